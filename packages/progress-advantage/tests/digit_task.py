"""A reward a random micro model has a spread of (the verifier's is always 0 for it, and every
completion runs to the length limit), so RL tests see real, non-zero advantages: the share of
digits among the completion's characters. Imported by the tests and by ddp_worker.py."""

from typing import Any

from paperstack import tasks
from paperstack.tasks import completion_text


class DigitRewardArithmetic:
    """Arithmetic prompts; reward = the share of digits in the completion."""

    def __init__(self) -> None:
        self.task = tasks.get("arithmetic")

    def generate(self, *args: Any, **kw: Any) -> Any:
        return self.task.generate(*args, **kw)

    def to_dataset(self, *args: Any, **kw: Any) -> Any:
        return self.task.to_dataset(*args, **kw)

    def reward_function(self) -> Any:
        def digit_reward(prompts, completions, **_):
            texts = [completion_text(c) for c in completions]
            return [sum(ch.isdigit() for ch in t) / max(1, len(t)) for t in texts]

        return digit_reward

"""The real-model arm's parts that need no server: seedless seats, the reading measure."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from orchestra_rl.agents import AgentSpec
from orchestra_rl.baselines import SingleShot
from orchestra_rl.real import REAL, _moved_by_reading
from orchestra_rl.swarm import Swarm, SwarmConfig
from orchestra_rl.tasks import builtin_evaluator, instance_pool


class _Recorder:
    """A served-model stand-in that answers right and records the seed of every call."""

    name = "recorder"

    def __init__(self) -> None:
        self.seeds: list[int | None] = []

    def generate(self, prompts: Any, max_new_tokens: int = 8, temperature: float = 0.0,
                 seed: int | None = None) -> list[list[str]]:  # fmt: skip
        self.seeds.append(seed)
        question = prompts[0][-1]["content"].split("What is ", 1)[1].split("?")[0]
        a, b = (int(x) for x in question.split(" + "))
        return [[f"Answer: {a + b}\nConfidence: 0.9"] for _ in prompts]


def test_seedless_seats_send_no_seed_and_seeded_ones_do() -> None:
    """vLLM's CPU build dies on a seeded request prefilled in chunks: ``seeded=False`` seats
    (the real arm's) must never send a seed; the default still seeds every call."""
    test = instance_pool("addition-plain-1d", 3, "test", 0)
    evaluator = builtin_evaluator(("addition-plain-1d",))
    for seeded in (False, True):
        model: Any = _Recorder()
        seats = [AgentSpec(model, name=f"s{i}", temperature=0.7, seeded=seeded) for i in range(2)]
        episodes = Swarm(seats, evaluator, SwarmConfig(budget=6)).run(test, SingleShot(), seed=0)
        assert [e.score for e in episodes] == [1.0, 1.0, 1.0]
        assert len(model.seeds) == 6
        assert all((s is None) != seeded for s in model.seeds)


def test_moved_by_reading_counts_right_after_minus_right_before() -> None:
    """Only calls that read a message count; a flip from right to wrong is -1, the reverse +1."""
    inst = instance_pool("addition-plain-1d", 1, "test", 0)[0]
    right, wrong = str(inst.meta["sum"]), "-1"
    call = SimpleNamespace
    trace = [
        call(round=0, agent=0, received=[], answer=right, failure=None),
        call(round=0, agent=1, received=[], answer=wrong, failure=None),
        call(round=1, agent=0, received=[(1, "full")], answer=wrong, failure=None),  # -1
        call(round=1, agent=1, received=[], answer=right, failure=None),  # read nothing
        call(round=2, agent=1, received=[(0, "full")], answer=wrong, failure=None),  # -1
        call(round=3, agent=0, received=[(1, "full")], answer=right, failure=None),  # +1
    ]
    episode = SimpleNamespace(instance=inst, trace=trace)
    evaluator = builtin_evaluator(("addition-plain-1d",))
    assert _moved_by_reading([episode], evaluator) == -1 / 3
    assert _moved_by_reading([SimpleNamespace(instance=inst, trace=trace[:2])], evaluator) == 0.0


def test_real_design_measures_the_premise_at_every_size_and_the_method_at_the_largest() -> None:
    """The claims compare systems at the largest N: the method systems must run there."""
    assert max(REAL["sizes"]) in REAL["method_sizes"]
    assert "orchestra_rl" in REAL["method_systems"]
    assert len(REAL["sizes"]) >= 3

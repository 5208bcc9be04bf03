"""The toy world's auditor: a small model that writes user turns.

- The **auditor** is the core's ``micro`` tiny Llama (24k parameters) pre-trained on the user
  side of dialogues between :class:`~probe_audit.strategies.RealisticUser` and the bug-free
  rule agents of both domains (:class:`AuditorCorpus`): it knows how customers talk, not where
  the agent is weak. Sampled as it is, it is the *zero-shot* auditor; GRPO, DPO and the
  GFlowNet start from it.
The targets it audits are the rule agents with planted bugs (:mod:`probe_audit.targets`); a
tiny-LM target that learns the bugs from data is not built yet (see the README).

It trains with :func:`paperstack.tiny.train` on a character tokenizer and is cached through
:func:`paperstack.tiny.pretrained`, keyed by a digest of the code that generates its data, so a
change to a domain or the user model retrains it.

A dialogue becomes training text through the chat template: the history up to a turn is one
prompt (:func:`history_prompt`), the turn is the answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from paperstack.tasks import Example, Task, completion_text
from probe_audit.errors import ProbeError

__all__ = [
    "AUDITOR_PRESET",
    "AuditorCorpus",
    "history_prompt",
    "pretrained_auditor",
]

AUDITOR_PRESET = "micro"
#: Distinct examples a task generates; a larger request repeats them (the phrase banks are
#: small, so more dialogues add little but time).
UNIQUE_EXAMPLES = 8000
#: The agent reply as the auditor sees it (:class:`~probe_audit.auditors.ModelAuditor`).
REPLY_CHARS = 100
_SOURCES = ("domains/retail.py", "domains/airline.py", "strategies.py", "game.py", "targets.py",
            "environment.py", "toy.py")  # fmt: skip


def code_digest() -> str:
    """Digest of the code that generates the toy data (so a change retrains the models)."""
    from paperstack import tiny

    here = Path(__file__).parent
    return tiny.code_digest([here / s for s in _SOURCES])[:16]


def history_prompt(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> str:
    """The text to put in a single user message so that ``user: text / assistant: answer`` is
    rendered exactly as the multi-turn chat ``messages`` followed by ``answer`` would be.

    :func:`paperstack.tiny.train` trains on one prompt and one answer; a multi-turn history is
    its chat rendering with the template's own opening and closing cut off (the special tokens
    inside are still single tokens, since the tokenizer matches them in text).
    """
    full = str(
        tokenizer.apply_chat_template(
            [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
        )
    )
    probe = "\x00"
    shell = str(
        tokenizer.apply_chat_template(
            [{"role": "user", "content": probe}], tokenize=False, add_generation_prompt=True
        )
    )
    head, tail = shell.split(probe)
    if not (full.startswith(head) and full.endswith(tail)):
        raise ProbeError("the chat template cannot render a history as one user message")
    return full[len(head) : len(full) - len(tail)]


def _dialogues(auditor_kind: str, planted: bool, n: int, seed: int, split: str) -> list[Any]:
    """``n`` episodes per domain of ``auditor_kind`` users against the rule agents."""
    from probe_audit import domains
    from probe_audit.game import GameConfig, play
    from probe_audit.strategies import (
        STRATEGIES,
        RandomTemplateAuditor,
        RealisticUser,
        ScriptedAuditor,
    )

    offset = 0 if split == "train" else 500_000
    episodes = []
    for d_index, name in enumerate(domains.NAMES):
        domain = domains.get(name)
        target = domains.rule_target(name, None if planted else ())
        per_db = 64
        for block in range(0, n, per_db):
            db_seed = offset + seed * 1000 + block // per_db
            db = domain.database(db_seed)
            scenarios = domain.make_scenarios(db, min(per_db, n - block), db_seed)
            ids = [f"{name}-{db_seed}-{k}" for k in range(len(scenarios))]
            if auditor_kind == "realistic":
                auditors: list[Any] = [RealisticUser(db_seed + d_index)]
            else:  # the target's data: every kind of user, so the planted bugs show up
                auditors = [RealisticUser(db_seed), RandomTemplateAuditor(db_seed)]
                auditors += [ScriptedAuditor(s, db_seed) for s in STRATEGIES]
            for a in auditors:
                episodes.extend(
                    play(domain, scenarios, a, target, db, GameConfig(), episode_ids=ids)
                )
    return episodes


@dataclasses.dataclass(frozen=True)
class AuditorCorpus(Task):
    """The user side of realistic dialogues: predict the user's next turn from the history."""

    name: ClassVar[str] = "probe-auditor-corpus"
    code: str = ""

    def generate(self, n: int, seed: int = 0, split: Any = "train") -> list[Example]:
        from paperstack import tiny
        from probe_audit.game import STOP, auditor_view

        tokenizer = tiny.build_tokenizer()
        out: list[Example] = []
        dialogues = max(8, min(n, UNIQUE_EXAMPLES) // 5)
        for ep in _dialogues("realistic", False, dialogues, seed, str(split)):
            messages = [{"role": "user", "content": ep.scenario.header()}]
            for role, text in auditor_view(ep).dialogue:
                if role == "user":
                    out.append(Example(self.name, history_prompt(tokenizer, messages), text))
                    messages.append({"role": "assistant", "content": text})
                else:
                    messages.append({"role": "user", "content": text[:REPLY_CHARS]})
            if ep.ended_by == "stop" and ep.events and ep.events[-1].kind == "user":
                out[-1] = Example(self.name, out[-1].prompt, f"{out[-1].answer} {STOP}")
        return out[:n] if len(out) >= n else (out * (n // max(1, len(out)) + 1))[:n]

    def verify(self, example: Example, completion: Any) -> bool:
        return completion_text(completion).strip() == example.answer.strip()


# --------------------------------------------------------------------------- training and cache


def pretrained_auditor(steps: int, seed: int = 0, progress: bool = True) -> tuple[Any, Any]:
    """The zero-shot toy auditor: ``micro`` pre-trained on :class:`AuditorCorpus` (cached)."""
    from paperstack import tiny

    return tiny.pretrained(
        AUDITOR_PRESET, [AuditorCorpus(code_digest())], steps=steps, seed=seed, progress=progress
    )

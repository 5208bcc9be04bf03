"""The real-model arm of the demo (``proofrank demo --real``): provers that are not scripted.

The scripted provers of :mod:`proofrank.provers` write the shipped references in the style each
proxy checks, so the main demo's orders hold by construction. This arm asks a real instruct
model, SmolLM2-135M-Instruct (``paperstack.models``), in two configurations that differ only in
the system prompt (the default prover prompt, and one asking for the shortest complete proof),
for one greedy proof of each of the first problems of the shipped test split, and judges them
with the rule judge, the only judge available offline. Nothing about the provers is built to
the measures.

What it can show: how many of a real model's proofs the rule judge can decide at all (it
certifies only proofs that follow a reference and refutes only empty proofs and admissions;
everything else is *unverified*), the premise of any quality measure on these provers; and
that the two configurations are different provers (raw length of every proof, ``words``, a
description, not a quality measure). Verbosity rows appear only for certified proofs; no
quality claim is made on them (with no certified proof there is nothing to compare).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from paperstack.records import Row
from proofrank.prompts import PROVER_SYSTEM
from proofrank.text import word_count

__all__ = [
    "CONCISE_SYSTEM",
    "REAL_QUICK",
    "RealConfig",
    "SystemPrompted",
    "real_provers",
    "words_row",
]

#: The second configuration's system prompt (the first: :data:`proofrank.prompts.PROVER_SYSTEM`).
CONCISE_SYSTEM = (
    "You are a mathematician who writes the shortest complete proof: no restatement of the "
    "problem, no commentary, one step per line, mathematics in $...$."
)


@dataclasses.dataclass(frozen=True)
class RealConfig:
    """The real arm's budget, fixed before any reported run."""

    #: the first test problems of the shipped set
    problems: int = 12
    #: tokens per proof
    max_new_tokens: int = 160
    #: the paperstack.models preset (a folder also loads)
    model: str = "smollm2-135m-instruct"
    #: share of proofs the rule judge must decide (correct or incorrect) for the premise
    premise_decided: float = 0.5
    #: requests in flight at once, seconds a request may take, and the context of a server
    #: started for the run (the shared one states its own)
    concurrency: int = 12
    timeout: float = 600.0
    context: int = 2048


#: ``--quick --real``: the plumbing only (2 problems, 24 tokens).
REAL_QUICK = RealConfig(problems=2, max_new_tokens=24)


class SystemPrompted:
    """A :class:`~paperstack.llm.ChatModel` that replaces the system message of every prompt
    with ``system`` (a second served configuration of the same model)."""

    def __init__(self, model: Any, system: str, name: str) -> None:
        self.model = model
        self.system = system
        self.name = name

    def generate(self, prompts: Sequence[Any], **kwargs: Any) -> list[list[str]]:
        out = []
        for prompt in prompts:
            messages = [m for m in prompt if m.get("role") != "system"]
            out.append([{"role": "system", "content": self.system}, *messages])
        return self.model.generate(out, **kwargs)

    def logprobs(self, prompts: Sequence[Any], continuations: Sequence[str]) -> Any:
        raise NotImplementedError("the real arm's provers only generate")


def real_provers(model: Any) -> dict[str, SystemPrompted]:
    """The two configurations of one chat model, keyed by name."""
    return {
        "smollm2-default": SystemPrompted(model, PROVER_SYSTEM, "smollm2-default"),
        "smollm2-concise": SystemPrompted(model, CONCISE_SYSTEM, "smollm2-concise"),
    }


def words_row(name: str, texts: dict[str, str], split: str) -> Row:
    """The raw word count of every proof (descriptive: no gate, not a quality measure)."""
    return Row.from_items(name, "words", {k: float(word_count(v)) for k, v in texts.items()},
                          split=split)  # fmt: skip

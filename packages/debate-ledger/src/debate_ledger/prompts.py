"""The debate prompts: what each agent sees in each round.

Round 0 asks the question alone. In round ``r >= 1`` an agent sees its own previous response and,
depending on ``visibility``, the other agents' previous responses (``"all"``, as in Du et al.'s
``gen_mmlu.py``), only their coded letters (``"answers"``), or nothing (``"none"``: a
self-refinement control with the same number of calls). Templates are plain ``str.format``
strings so users can swap in their own wording; the fields are listed on :class:`DebatePrompts`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from debate_ledger.schemas import LedgerError, Question

__all__ = ["TINY_PROMPTS", "DebatePrompts", "Visibility"]

Visibility = Literal["all", "answers", "none"]


@dataclass(frozen=True)
class DebatePrompts:
    """Templates. Fields: ``{question}`` (text and options), ``{agent}`` (1-based), ``{agents}``,
    ``{debate_id}``, ``{round}``, ``{own}`` (own previous response), ``{others}`` (the other
    agents' previous responses, one ``Agent j: ...`` line each). ``system=None`` sends a plain
    user message (for models without a system role)."""

    system: str | None = (
        "You are agent {agent} of {agents} in debate {debate_id}. Answer the multiple-choice "
        "question with the letter of one option in parentheses, for example (B)."
    )
    first: str = "{question}"
    later: str = (
        "{question}\nYour previous answer: {own}\nThe other agents answered:\n{others}\n"
        "Considering their answers, give your final answer as one letter in parentheses."
    )
    visibility: Visibility = "all"
    resample_note: str = " (independent sample {sample})"

    def __post_init__(self) -> None:
        if self.visibility not in ("all", "answers", "none"):
            raise LedgerError(f"visibility must be all, answers or none, got {self.visibility!r}")

    def render(
        self,
        question: Question,
        *,
        debate_id: str,
        agent: int,
        agents: int,
        round: int,
        own: str = "",
        others: list[tuple[int, str]] | None = None,
        sample: int = 0,
    ) -> list[dict[str, Any]]:
        """The chat messages of one call. ``others`` is [(agent index, response or letter)]."""
        shown = "\n".join(f"Agent {j + 1}: {text}" for j, text in (others or []))
        if self.visibility == "none" or not shown:
            shown = "(not shown)"
        fields = {
            "question": question.render(),
            "agent": agent + 1,
            "agents": agents,
            "debate_id": debate_id,
            "round": round,
            "own": own.strip() or "(none)",
            "others": shown,
        }
        try:
            user = (self.first if round == 0 else self.later).format(**fields)
            system = None if self.system is None else self.system.format(**fields)
        except (KeyError, IndexError) as exc:
            raise LedgerError(f"prompt template has an unknown field {exc}") from None
        if sample:
            note = self.resample_note.format(sample=sample)
            if system is None:
                user += note
            else:
                system += note
        messages: list[dict[str, Any]] = []
        if system is not None:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": user})
        return messages


# The tiny fact-world models were trained on bare ``question A) .. D) ..`` prompts and answer
# with a letter; they have no system role. Later rounds append the others' letters.
TINY_PROMPTS = DebatePrompts(
    system=None, first="{question}", later="{question} {others}", visibility="answers"
)

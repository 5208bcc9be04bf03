"""The debate prompts: what each agent sees in each round.

Round 0 asks the question alone. In round ``r >= 1`` an agent sees its own previous response and,
depending on ``visibility``, the other agents' previous responses (``"all"``, as in Du et al.'s
``gen_mmlu.py``), only their coded letters (``"answers"``), or nothing (``"none"``: a
self-refinement control with the same number of calls).

No label of the run reaches the model: not the debate id, the family or model name, nor which
resample a call is. Every agent of a debate gets the same round-0 prompt, so round-0 answers and
resamples are independent draws from one distribution, told apart only by the seed sent with
each call (the runner derives it from the run seed, the question, the agent, the round and the
sample). That is what makes the round-0 votes a fair call-matched majority-vote baseline.

Templates are plain ``str.format`` strings so users can swap in their own wording; the fields
are listed on :class:`DebatePrompts`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from debate_ledger.schemas import LedgerError, Question

__all__ = ["CHAT_PROMPTS", "TINY_PROMPTS", "DebatePrompts", "Visibility"]

Visibility = Literal["all", "answers", "none"]


@dataclass(frozen=True)
class DebatePrompts:
    """Templates. Fields: ``{question}`` (text and options, in the order this debate shows
    them), ``{round}``, ``{agent}`` (1-based) and ``{agents}`` (not used by the defaults),
    ``{own}`` (the agent's own previous response), ``{others}`` (the other agents' previous
    responses, one ``Agent j: ...`` line each). ``system=None`` sends a plain user message (for
    models without a system role). The defaults are for a real chat model: brief reasoning and
    a final ``ANSWER: X`` line, which the default coder reads first."""

    system: str | None = (
        "You are one of several agents answering a multiple-choice question. Reason briefly, "
        'then end your reply with one final line of the form "ANSWER: X", where X is the '
        "letter of one option."
    )
    first: str = "{question}"
    later: str = (
        "{question}\n\nYour previous answer: {own}\n\nThe other agents answered:\n{others}\n\n"
        "Considering their answers, give your updated answer. End with one final line "
        '"ANSWER: X".'
    )
    visibility: Visibility = "all"

    def __post_init__(self) -> None:
        if self.visibility not in ("all", "answers", "none"):
            raise LedgerError(f"visibility must be all, answers or none, got {self.visibility!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def render(
        self,
        question: Question,
        *,
        order: str | None = None,
        agent: int,
        agents: int,
        round: int,
        own: str = "",
        others: list[tuple[int, str]] | None = None,
    ) -> list[dict[str, Any]]:
        """The chat messages of one call. ``others`` is [(agent index, response or letter)]."""
        shown = "\n".join(f"Agent {j + 1}: {' '.join(text.split())}" for j, text in others or [])
        if self.visibility == "none" or not shown:
            shown = "(not shown)"
        fields = {
            "question": question.render(order),
            "agent": agent + 1,
            "agents": agents,
            "round": round,
            "own": " ".join(own.split()) or "(none)",
            "others": shown,
        }
        try:
            user = (self.first if round == 0 else self.later).format(**fields)
            system = None if self.system is None else self.system.format(**fields)
        except (KeyError, IndexError, ValueError) as exc:
            raise LedgerError(f"prompt template has an unknown or bad field: {exc}") from None
        messages: list[dict[str, Any]] = []
        if system is not None:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": user})
        return messages


#: The defaults: for a real chat model (and the scripted families, which read this layout).
CHAT_PROMPTS = DebatePrompts()

# The tiny fact-world models were trained on bare ``question A) .. D) ..`` prompts and answer
# with a letter; they have no system role. Later rounds append the others' letters.
TINY_PROMPTS = DebatePrompts(
    system=None, first="{question}", later="{question} {others}", visibility="answers"
)

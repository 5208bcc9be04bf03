"""Scripted provers with known styles: the demo's ground truth for each proxy.

Each is a :class:`paperstack.llm.RuleAgent` (so it goes through exactly the code path of a real
model: the prover prompt in, text out) that reads the problem from the prompt, finds it in its
problem set, and writes one of the problem's reference proofs in a fixed way:

- ``elegant``: the ``elegant`` reference;
- ``verbose``: the same proof padded the way verbose models pad: a restatement of the problem
  first, commentary between steps, and a repetition of the key step before the end;
- ``computational``: the ``computational`` reference (the elegant one where there is none);
- ``advanced``: the ``advanced`` reference (heavier machinery; the elegant one where none);
- ``gapped``: the elegant reference with its key step deleted, an incomplete proof (what the
  correctness gate must stop);
- ``single-technique``: always the first reference, whatever it is asked (no diversity, no
  adaptivity);
- ``technique-following``: the reference whose main technique was requested; unasked, a
  reference drawn at random per sample (diverse).

Their order on each proxy is known by construction, which is what the demo's claims test the
proxies (and judges) against. A problem the prover does not know gets an honest "I cannot
prove this." (judged incorrect).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from paperstack.llm import RuleAgent
from proofrank.problems import Problem, ProblemSet, Reference
from proofrank.prompts import parse_prover_prompt

__all__ = ["PROVER_STYLES", "ScriptedProver", "key_step", "scripted_provers"]

PROVER_STYLES = (
    "elegant",
    "verbose",
    "computational",
    "advanced",
    "gapped",
    "single-technique",
    "technique-following",
)

_UNKNOWN = "I cannot prove this."


class ScriptedProver(RuleAgent):
    """A prover of one ``style`` (see the module docstring) over ``problems``.

    Sample ``j`` of a prompt is drawn with :meth:`rng` seeded by the conversation, the prover's
    seed and ``j``, so ``n`` samples can differ (a plain RuleAgent repeats one answer ``n``
    times) and a rerun gives the same samples.
    """

    def __init__(self, style: str, problems: ProblemSet, seed: int = 0) -> None:
        if style not in PROVER_STYLES:
            raise ValueError(f"unknown prover style {style!r}; known: {', '.join(PROVER_STYLES)}")
        super().__init__(seed, name=f"scripted-{style}")
        self.style = style
        self.problems = problems

    def respond(self, messages: list[dict[str, Any]]) -> str:
        return self.sample(messages, 0, None)

    def sample(self, messages: list[dict[str, Any]], index: int, seed: int | None = None) -> str:
        """Sample ``index`` of the reply to a prover prompt (the call's seed is not used: the
        samples are a function of the conversation, the prover's seed and ``index``)."""
        j = index
        statement, technique = parse_prover_prompt(messages)
        problem = self.problems.by_statement(statement)
        if problem is None:
            return _UNKNOWN
        return "\n".join(self._steps(problem, technique, messages, j))

    def _steps(
        self, problem: Problem, technique: str | None, messages: list[dict[str, Any]], j: int
    ) -> list[str]:
        elegant = problem.reference("elegant") or problem.references[0]
        style = self.style
        if style == "elegant":
            return list(elegant.steps)
        if style == "computational":
            return list((problem.reference("computational") or elegant).steps)
        if style == "advanced":
            return list((problem.reference("advanced") or elegant).steps)
        if style == "single-technique":
            return list(problem.references[0].steps)
        if style == "verbose":
            return _padded(problem, elegant)
        if style == "gapped":
            steps = list(elegant.steps)
            del steps[key_step(elegant)]
            return steps or [_UNKNOWN]
        # technique-following
        if technique is not None:
            chosen = next((r for r in problem.references if r.main_technique == technique), None)
            return list((chosen or elegant).steps)
        rng = self.rng([*messages, {"role": "sample", "content": str(j)}])
        return list(rng.choice(problem.references).steps)


def key_step(ref: Reference) -> int:
    """The step the gapped prover deletes: the first one (the idea) of a short proof, the
    middle one of a longer proof."""
    return 0 if len(ref.steps) <= 2 else len(ref.steps) // 2


def _padded(problem: Problem, ref: Reference) -> list[str]:
    steps = list(ref.steps)
    out = [f"We are asked to prove the following. {problem.statement}"]
    for i, step in enumerate(steps):
        out.append(step)
        if i == 0 and len(steps) > 1:
            out.append("This is a natural first move and it will turn out to be useful later.")
    key = steps[key_step(ref)]
    repeat = f"Recall once more that {key[0].lower()}{key[1:]}"
    out.insert(len(out) - 1 if len(steps) > 1 else len(out), repeat)
    return out


def scripted_provers(
    problems: ProblemSet, styles: Sequence[str] = PROVER_STYLES, seed: int = 0
) -> dict[str, ScriptedProver]:
    """One :class:`ScriptedProver` per style, keyed by style."""
    return {s: ScriptedProver(s, problems, seed) for s in styles}

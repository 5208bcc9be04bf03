"""The prompts proofrank sends to provers and judges, and the parsers of the judges' answers.

Judge prompts follow the paper's processors: the judge reasons freely and ends with its verdict
in ``\\boxed{...}`` (the last box counts, as in the paper's checkers). A judge's answer that
has no box, or whose box does not parse (an unknown verdict word, a step number out of range,
a technique outside the taxonomy), is a :class:`JudgeParseError`: the caller records it as a
judge failure and counts it, and the proof gets no score for that aspect (never a default).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from proofrank.problems import Problem
from proofrank.taxonomy import Taxonomy

__all__ = [
    "ASPECT_PROMPTS",
    "JudgeParseError",
    "judge_prompt",
    "last_boxed",
    "parse_prover_prompt",
    "parse_step_set",
    "parse_techniques",
    "parse_verdict",
    "parse_yes_no",
    "prover_prompt",
]

PROVER_SYSTEM = (
    "You are a careful mathematician. Write complete, rigorous proofs, one step per line, "
    "with mathematics in $...$."
)

_TECHNIQUE_LINE = "Prove it using {name} [technique: {label}]."


def prover_prompt(
    problem: Problem, technique: str | None = None, taxonomy: Taxonomy | None = None
) -> list[dict[str, str]]:
    """The chat prompt a prover gets: the problem, and optionally the technique to use."""
    text = f"Problem: {problem.statement}\n\nWrite a complete proof, one step per line."
    if technique is not None:
        name = taxonomy.name(technique) if taxonomy is not None else technique
        text += "\n" + _TECHNIQUE_LINE.format(name=name, label=technique)
    return [{"role": "system", "content": PROVER_SYSTEM}, {"role": "user", "content": text}]


def parse_prover_prompt(messages: Sequence[dict[str, str]]) -> tuple[str, str | None]:
    """``(statement, technique label or None)`` from a :func:`prover_prompt` conversation
    (what scripted provers read)."""
    user = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    match = re.search(r"Problem:\s*(.*?)\n\nWrite a complete proof", user, re.DOTALL)
    statement = match.group(1).strip() if match else user.strip()
    tech = re.search(r"\[technique: ([a-z0-9-]+)\]", user)
    return statement, (tech.group(1) if tech else None)


# --------------------------------------------------------------------------- judge prompts

_HEADER = (
    "You are grading a proof written for a competition problem.\n\n"
    "Problem:\n{statement}\n\n"
    "A reference proof (other correct proofs exist):\n{reference}\n\n"
    "Proof to grade, with numbered steps:\n{steps}\n\n"
)

ASPECT_PROMPTS: dict[str, str] = {
    "correct": (
        "Is the proof to grade correct and complete: every step true, every step justified, and "
        "the argument proving exactly what the problem asks? Minor slips of wording do not "
        "matter; a false step, a missing case or an unproved claim does. Think it through, then "
        "end your answer with \\boxed{{correct}} or \\boxed{{incorrect}}."
    ),
    "unnecessary": (
        "Which steps could be deleted without making the proof incomplete or harder to follow "
        "(restatements of the problem, repetitions, commentary, checks of special cases the "
        "argument does not use)? End with the step numbers in a box, e.g. \\boxed{{2, 5}}, or "
        "\\boxed{{none}}."
    ),
    "calculation": (
        "Which steps are mainly routine calculation (expanding, simplifying, evaluating, "
        "checking cases by computation) rather than an idea? End with the step numbers in a "
        "box, e.g. \\boxed{{1, 3}}, or \\boxed{{none}}."
    ),
    "techniques": (
        "Which of these techniques does the proof use?\n{taxonomy}\n"
        "End with their labels in a box, e.g. \\boxed{{am-gm, induction}}, or \\boxed{{none}}."
    ),
    "uses_technique": (
        "Does the proof use {technique_name} (label {technique}) as an essential part of the "
        "argument? End with \\boxed{{yes}} or \\boxed{{no}}."
    ),
}


def number_steps(steps: Sequence[str]) -> str:
    return "\n".join(f"[{i + 1}] {s}" for i, s in enumerate(steps))


def judge_prompt(
    aspect: str,
    problem: Problem,
    steps: Sequence[str],
    taxonomy: Taxonomy,
    technique: str | None = None,
) -> list[dict[str, str]]:
    """The chat prompt asking a judge about one ``aspect`` of one proof."""
    if aspect not in ASPECT_PROMPTS:
        raise ValueError(f"unknown judge aspect {aspect!r}")
    header = _HEADER.format(
        statement=problem.statement,
        reference=problem.references[0].proof,
        steps=number_steps(steps),
    )
    question = ASPECT_PROMPTS[aspect].format(
        taxonomy=taxonomy.describe(),
        technique=technique or "",
        technique_name=taxonomy.name(technique) if technique else "",
    )
    return [{"role": "user", "content": header + question}]


# --------------------------------------------------------------------------- answer parsing


class JudgeParseError(ValueError):
    """A judge's answer that gives no usable verdict; the message says why (short)."""


def last_boxed(answer: str) -> str:
    """The content of the last ``\\boxed{...}`` (braces balanced), or a JudgeParseError."""
    start = answer.rfind("\\boxed{")
    if start < 0:
        raise JudgeParseError("no \\boxed{...} verdict in the answer")
    i = start + len("\\boxed{")
    depth = 1
    j = i
    while j < len(answer) and depth:
        depth += {"{": 1, "}": -1}.get(answer[j], 0)
        j += 1
    if depth:
        raise JudgeParseError("unclosed \\boxed{")
    return answer[i : j - 1].strip()


def _word(box: str) -> str:
    return re.sub(r"\\text\{([^}]*)\}", r"\1", box).strip().strip(".").lower()


def parse_verdict(answer: str) -> bool:
    """``\\boxed{correct}`` -> True, ``\\boxed{incorrect}`` -> False."""
    word = _word(last_boxed(answer))
    if word in ("correct", "complete", "valid"):
        return True
    if word in ("incorrect", "incomplete", "invalid", "wrong"):
        return False
    raise JudgeParseError(f"verdict {word!r} is neither correct nor incorrect")


def parse_yes_no(answer: str) -> bool:
    word = _word(last_boxed(answer))
    if word in ("yes", "true"):
        return True
    if word in ("no", "false"):
        return False
    raise JudgeParseError(f"verdict {word!r} is neither yes nor no")


def parse_step_set(answer: str, n_steps: int) -> frozenset[int]:
    """Step numbers (1-based in the answer) as 0-based indices; ``none`` is the empty set."""
    box = _word(last_boxed(answer))
    if box in ("none", "", "no steps", "-"):
        return frozenset()
    out = set()
    for part in re.split(r"[,;\s]+", box):
        if not part:
            continue
        if not part.isdigit():
            raise JudgeParseError(f"{part!r} is not a step number")
        k = int(part)
        if not 1 <= k <= n_steps:
            raise JudgeParseError(f"step {k} is out of range 1-{n_steps}")
        out.add(k - 1)
    return frozenset(out)


def parse_techniques(answer: str, taxonomy: Taxonomy) -> frozenset[str]:
    """Technique labels from the box; a label outside the taxonomy is a parse error."""
    box = _word(last_boxed(answer))
    if box in ("none", ""):
        return frozenset()
    labels = set()
    for part in re.split(r"[,;]+|\s{2,}", box):
        label = part.strip().replace(" ", "-")
        if not label:
            continue
        if label not in taxonomy:
            raise JudgeParseError(f"{label!r} is not a technique of the taxonomy")
        labels.add(label)
    return frozenset(labels)

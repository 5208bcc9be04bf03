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
    "PAIRWISE_CRITERIA",
    "JudgeParseError",
    "cluster_prompt",
    "core_idea_prompt",
    "judge_prompt",
    "last_boxed",
    "pairwise_prompt",
    "parse_clusters",
    "parse_pairwise",
    "parse_prover_prompt",
    "parse_step_set",
    "parse_techniques",
    "parse_verdict",
    "parse_yes_no",
    "prover_prompt",
    "rewrite_check_prompt",
    "rewrite_prompt",
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


# --------------------------------------------------------------------------- the authors' measures
#
# The ProofRank authors' definitions (their public code, youssef-chaabouni/proofrank, processors
# ``pairwise_computation_tie``, ``pairwise_complexity_tie``, ``verbosity_rephrase``,
# ``verbosity_verifier``, ``core_ideas``, ``summary_diversity_clustering``), written here in our
# own shorter words: the criteria, the tie rules and the answer formats follow theirs.

#: What each pairwise comparison asks: which proof costs the reader more of it.
PAIRWISE_CRITERIA: dict[str, str] = {
    "computation": (
        "notation and computation load: the time a careful, competent reader needs to parse "
        "and follow what is written, line by line (dense symbols, many variables or indices, "
        "symbols used before they are defined, long explicit algebra, sign and index "
        "bookkeeping; many easy steps can cost more time than a few dense ones). Conceptual "
        "depth, cleverness and advanced theorems do NOT count, and neither does redundant prose"
    ),
    "complexity": (
        "ideological complexity: how conceptually demanding the method is (a non-obvious key "
        "idea, a specialised or advanced tool, several distinct ideas that must be combined). "
        "Notation density, length, step count and routine computation do NOT count: a short "
        "proof using a deep theorem is complex, a long routine expansion is not"
    ),
}

_PAIRWISE = (
    "You are an impartial judge comparing two proofs of the same problem. Decide which one "
    "imposes MORE {criterion}.\n"
    "Do not solve the problem, do not check or repair the proofs: correctness does not matter "
    "here.\n"
    "Answer 0 (tie) when neither clearly dominates: near-equal load, essentially the same "
    "method, orthogonal trade-offs you cannot rank, or proofs too thin to compare.\n"
    "Describe the main driver in each proof in one sentence each, quoting it, then give your "
    "verdict as \\boxed{{1}}, \\boxed{{2}} or \\boxed{{0}}.\n\n"
    "Problem:\n{statement}\n\nProof 1:\n{proof_1}\n\nProof 2:\n{proof_2}\n"
)

_REWRITE = (
    "Rewrite the following proof of a mathematical problem so that it is less verbose, "
    "without leaving out anything important: keep every critical step, explanation and "
    "computation, add nothing new, and keep it exactly as correct and complete as the "
    "original. Reply with the rewritten proof only.\n\n"
    "Problem:\n{statement}\n\nProof:\n{proof}\n"
)

_REWRITE_CHECK = (
    "A proof of a mathematical problem was rewritten to be less verbose. Check that the "
    "rewrite keeps every critical step, explanation and computation, adds nothing new, does "
    "not change the meaning, and is exactly as correct and complete as the original. End with "
    "\\boxed{{yes}} if it does all of this, \\boxed{{no}} otherwise.\n\n"
    "Problem:\n{statement}\n\nOriginal proof:\n{proof}\n\nRewritten proof:\n{rewrite}\n"
)

_CORE_IDEA = (
    "Identify the central idea that makes the following proof work: its main structural move "
    "(the backbone: a construction, a reduction, an encoding, an invariant, an extremal "
    "choice) and the theorem or move that closes it. Describe only what the proof does; do "
    "not solve the problem or fill gaps. Reply with one or two sentences, specific to this "
    "method (not just 'algebra' or 'symmetry').\n\n"
    "Problem:\n{statement}\n\nProof:\n{proof}\n"
)

_CLUSTER = (
    "Below are summaries of the core ideas of {n} proofs of one problem. Group them by method: "
    "two proofs belong together when they share the same backbone and close for the same "
    "essential reason, whatever their wording, notation, order or level of detail; split them "
    "only when you can say 'one hinges on X, the other on Y'. When unsure, merge. A proof "
    "too vague to have a method goes into a cluster of its own named 'unclear'.\n"
    "End with the clusters as JSON in a box, every proof in exactly one cluster, e.g. "
    '\\boxed{{[{{"name": "AM-GM on the pair", "members": [1, 3]}}, {{"name": "induction", '
    '"members": [2]}}]}}.\n\n'
    "Problem:\n{statement}\n\n{summaries}\n"
)


def pairwise_prompt(
    kind: str, problem: Problem, proof_1: str, proof_2: str
) -> list[dict[str, str]]:
    """Which of two proofs imposes more ``kind`` (``computation`` or ``complexity``) load."""
    if kind not in PAIRWISE_CRITERIA:
        raise ValueError(f"unknown comparison {kind!r}; known: {', '.join(PAIRWISE_CRITERIA)}")
    text = _PAIRWISE.format(
        criterion=PAIRWISE_CRITERIA[kind],
        statement=problem.statement,
        proof_1=proof_1,
        proof_2=proof_2,
    )
    return [{"role": "user", "content": text}]


def rewrite_prompt(problem: Problem, proof: str) -> list[dict[str, str]]:
    """Ask for a less verbose, equivalent rewrite of ``proof`` (the authors' conciseness)."""
    return [{"role": "user", "content": _REWRITE.format(statement=problem.statement, proof=proof)}]


def rewrite_check_prompt(problem: Problem, proof: str, rewrite: str) -> list[dict[str, str]]:
    """Ask whether ``rewrite`` kept everything of ``proof`` (the authors' verifier)."""
    text = _REWRITE_CHECK.format(statement=problem.statement, proof=proof, rewrite=rewrite)
    return [{"role": "user", "content": text}]


def core_idea_prompt(problem: Problem, proof: str) -> list[dict[str, str]]:
    """Ask for the core idea of one proof (the input of the clustering)."""
    return [
        {"role": "user", "content": _CORE_IDEA.format(statement=problem.statement, proof=proof)}
    ]


def cluster_prompt(problem: Problem, summaries: Sequence[str]) -> list[dict[str, str]]:
    """Ask to cluster the core-idea summaries of ``len(summaries)`` proofs of one problem."""
    listed = "\n".join(f"Proof {i + 1}: {s.strip()}" for i, s in enumerate(summaries))
    text = _CLUSTER.format(n=len(summaries), statement=problem.statement, summaries=listed)
    return [{"role": "user", "content": text}]


def parse_pairwise(answer: str) -> int:
    """``\\boxed{1}`` -> 1, ``\\boxed{2}`` -> 2, ``\\boxed{0}`` (a tie) -> 0."""
    word = _word(last_boxed(answer))
    if word in ("0", "1", "2"):
        return int(word)
    if word in ("tie", "tie/indeterminate", "indeterminate"):
        return 0
    raise JudgeParseError(f"pairwise verdict {word!r} is not 0, 1 or 2")


def parse_clusters(answer: str, n: int) -> list[int]:
    """The cluster index of each of ``n`` proofs (0-based, in order of first appearance);
    a proof in no cluster or in two is a parse error (the entropy needs a partition)."""
    import json

    try:
        clusters = json.loads(last_boxed(answer))
    except json.JSONDecodeError as exc:
        raise JudgeParseError(f"the clusters box is not JSON ({exc.msg})") from None
    if not isinstance(clusters, list):
        raise JudgeParseError("the clusters box is not a JSON list")
    where: dict[int, int] = {}
    for c, cluster in enumerate(clusters):
        members = cluster.get("members") if isinstance(cluster, dict) else None
        if not isinstance(members, list):
            raise JudgeParseError(f"cluster {c + 1} has no list of members")
        for m in members:
            if not isinstance(m, int) or not 1 <= m <= n:
                raise JudgeParseError(f"cluster member {m!r} is not a proof number 1-{n}")
            if m in where:
                raise JudgeParseError(f"proof {m} is in two clusters")
            where[m] = c
    missing = [m for m in range(1, n + 1) if m not in where]
    if missing:
        raise JudgeParseError(f"proofs {missing} are in no cluster")
    order: dict[int, int] = {}
    return [order.setdefault(where[m], len(order)) for m in range(1, n + 1)]

"""Reading a proof's text: steps, words, mathematics and prose.

Every proxy looks at a proof as a list of *steps*. A proof written one step a line (what the
prover prompt asks for) is split at line breaks; a proof written as paragraphs is split into
sentences. A closing formula on its own ("This completes the proof.", "QED", a lone box) is not
a step. Steps are what judges number, what unnecessary-step and calculation-step detection
classify, and what the correctness rubric matches against the reference proofs.

Words are counted the way the paper counts them with spaCy, approximated without a language
model: runs of letters and numbers, outside LaTeX commands (``\\frac`` is not a word, ``a`` and
``2`` in ``a^2`` are). Inline mathematics is delimited by ``$...$``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

__all__ = [
    "STOPWORDS",
    "containment",
    "content_tokens",
    "math_atoms",
    "math_segments",
    "normalize_math",
    "prose",
    "prose_tokens",
    "split_steps",
    "word_count",
]

_CLOSING = re.compile(
    r"^\W*(this (completes|concludes|finishes) the proof|qed|q\.e\.d|\\blacksquare|"
    r"\\square|\\qed|∎|□|■)\W*$",
    re.IGNORECASE,
)
_NUMBERED = re.compile(r"^\s*(\[\d+\]|\(\d+\)|\d+[.)]|step \d+[:.]|[-*•])\s+", re.IGNORECASE)
# A sentence ends at . ! ? followed by whitespace and an upper-case letter, outside $...$.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_MATH = re.compile(r"\$([^$]*)\$")
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]+|\d+")
_ATOM = re.compile(r"\\[A-Za-z]+|\d+|[A-Za-z]|[^\sA-Za-z\d{}]")

#: Function words and logical connectives: what a paraphrase changes without changing the
#: mathematics, so they are ignored when steps are compared.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "for",
        "with",
        "by",
        "from",
        "at",
        "as",
        "is",
        "are",
        "be",
        "been",
        "was",
        "were",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "we",
        "us",
        "our",
        "let",
        "then",
        "so",
        "thus",
        "hence",
        "therefore",
        "consequently",
        "which",
        "who",
        "whose",
        "there",
        "here",
        "since",
        "because",
        "if",
        "when",
        "where",
        "while",
        "also",
        "now",
        "note",
        "observe",
        "see",
        "get",
        "gives",
        "give",
        "got",
        "have",
        "has",
        "had",
        "obtain",
        "obtains",
        "do",
        "does",
        "done",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "one",
        "all",
        "any",
        "each",
        "every",
        "some",
        "such",
        "than",
        "very",
        "just",
        "only",
        "both",
        "either",
        "neither",
        "not",
        "no",
        "but",
        "yet",
        "into",
        "onto",
        "over",
        "under",
        "up",
        "down",
        "out",
        "same",
        "other",
        "another",
        "first",
        "next",
        "finally",
        "indeed",
        "clearly",
        "recall",
        "say",
        "says",
        "said",
        "show",
        "shows",
        "shown",
        "prove",
        "proves",
        "proved",
        "proof",
        "claim",
    ]
)


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def split_steps(text: str) -> list[str]:
    """The steps of a proof: its non-empty lines, or its sentences when it is one paragraph.

    Leading numbering (``1.``, ``[2]``, ``Step 3:``, bullets) is removed; closing formulas
    are dropped. Sentences are split only outside ``$...$`` (a ``.`` inside mathematics does
    not end a step).
    """
    lines = [ln.strip() for ln in _nfc(text).splitlines() if ln.strip()]
    if len(lines) <= 1:
        lines = _sentences(lines[0]) if lines else []
    steps = []
    for line in lines:
        line = _NUMBERED.sub("", line, count=1).strip()
        if line and not _CLOSING.match(line):
            steps.append(line)
    return steps


def _sentences(paragraph: str) -> list[str]:
    # Protect mathematics, split, restore.
    pieces: list[str] = []

    def mask(m: re.Match[str]) -> str:
        pieces.append(m.group(0))
        return f"\x00{len(pieces) - 1}\x00"

    masked = _MATH.sub(mask, paragraph)
    out = []
    for sentence in _SENTENCE_END.split(masked):
        restored = re.sub(r"\x00(\d+)\x00", lambda m: pieces[int(m.group(1))], sentence).strip()
        if restored:
            out.append(restored)
    return out


def word_count(text: str) -> int:
    """Words of ``text``: letter runs not part of a LaTeX command, and numbers."""
    return len(_WORD.findall(_nfc(text)))


def math_segments(step: str) -> list[str]:
    """The inline-mathematics segments of a step (the text between ``$`` pairs)."""
    return _MATH.findall(_nfc(step))


def normalize_math(segment: str) -> str:
    """A mathematics segment without whitespace and spacing commands, for exact comparison."""
    s = re.sub(r"\\[,;:! ]|\\(left|right|big|Big|bigg|Bigg)\b", "", segment)
    s = s.replace("\\geq", "\\ge").replace("\\leq", "\\le").replace("\\dfrac", "\\frac")
    return re.sub(r"\s+", "", s)


def math_atoms(step: str) -> list[str]:
    """Atoms of the step's mathematics: commands, numbers, single letters, operators."""
    atoms: list[str] = []
    for segment in math_segments(step):
        atoms.extend(_ATOM.findall(segment))
    return atoms


def prose(step: str) -> str:
    """The step with its mathematics removed."""
    return _MATH.sub(" ", _nfc(step))


def prose_tokens(step: str) -> list[str]:
    """Lower-case content words of the prose (stop words dropped, a plural ``s`` stripped)."""
    out = []
    for word in re.findall(r"[A-Za-z]+(?:'[a-z]+)?", prose(step).lower()):
        if word in STOPWORDS or len(word) < 2:
            continue
        out.append(word[:-1] if len(word) > 3 and word.endswith("s") else word)
    return out


def content_tokens(step: str) -> set[str]:
    """What a step says: its prose content words and its normalised mathematics segments
    (whole segments, plus the numbers and letters in them)."""
    tokens = set(prose_tokens(step))
    for segment in math_segments(step):
        norm = normalize_math(segment)
        if norm:
            tokens.add("$" + norm)
        tokens.update(re.findall(r"\d+|(?<![\\A-Za-z])[A-Za-z](?![A-Za-z])", segment))
    return tokens


def containment(part: set[str], whole: set[str]) -> float:
    """Share of ``part``'s tokens found in ``whole`` (0 for an empty ``part``)."""
    if not part:
        return 0.0
    return len(part & whole) / len(part)


def jaccard(a: set[str], b: set[str]) -> float:
    """``|a ∩ b| / |a ∪ b|``; two empty sets are identical (1.0)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def join_steps(steps: Sequence[str]) -> str:
    """Steps back to a proof text, one a line."""
    return "\n".join(steps)

"""Answer coders: versioned parsers from an agent's free text to one option letter.

A coder never guesses. When a response commits to no option, or to two different options with
equal standing, the coder returns ``None`` and the ledger records a parse failure; the audits
report the rate. Coders are versioned because changing a parser changes every downstream count:
a ledger row names the coder that produced its ``answer``, and ``rebuild --recode`` re-codes the
raw responses with another coder and shows what moved.

``letter-v2`` (the default) reads the answer an agent *last states as its own*:

1. a final-line template ``ANSWER: X`` (what the default prompts ask real models to end with)
   wins; the last such line if there are several;
2. otherwise every letter mention (``(C)``, ``option C``, ``answer is C``) is classified by its
   clause (clauses end at ``. ! ? ; : ,`` and before ``but``, ``although``, ``because``...):

   - *rejected*: negated before it (``not (A)``, ``rather than``, ``instead of``, ``over``,
     ``from (B) to``) or dismissed after it (``(B) is wrong``, ``was a mistake``, ``ignores``);
   - *own*: a first-person commitment before it in the clause (``I now conclude``, ``I update
     to``, ``I keep``, ``I agree``, ``I am confident``) or, when the clause reports nobody else,
     an impersonal one (``the answer is``, ``Final answer:``, ``it is``, ``(A) is correct``);
   - *reported*: attributed to another agent or to the past (``Agent 2 argues``, ``the others``,
     ``previously``, ``I initially said``), unless the sentence adopts it (``so do I``);
   - *neutral*: none of these (a bare ``(C)``, or hesitation: ``between (A) and (B)``).

   The last *own* mention wins; with none, the neutral mentions decide if they all name one
   letter; otherwise a parse failure;
3. a response that is just a letter (``B``, ``(B)``, ``B)``: what tiny models emit).

This is the rule the rounds after round 0 need: ``"Agent 2 argues the answer is (B), but I now
conclude (C)."`` is C and ``"I initially said the answer is (A); I update to (B)."`` is B, where
``letter-v1`` (explicit phrase first, else the last parenthesised letter) read B and A.

``letter-v3`` reads what small real models write (SmolLM2-135M-Instruct answers ``"A) 6"``,
``"B. Mars"``, ``"The correct answer is C) 56."``, or only the option's text, and never the
``ANSWER: X`` line; letter-v2 parsed 0 of 12 such rows). On top of letter-v2's rules:

- an option-style mention is a letter mention: ``A)`` and ``A.`` at the start of a line or
  after a space (``"B. Mars"``), and after an answer phrase (``"answer is C) 56"``);
- given the option texts as shown (``options``), a mention ``X) text`` whose text is another
  option's (``"A) 6"`` where 6 is option B) is a *conflict*: if the deciding mention is one,
  the response is a parse failure (the letter and the words disagree, so either reading is a
  guess);
- with no letter mention at all, a response that names exactly one option's text as a whole
  phrase (``"The chemical symbol for sodium is Na."``) is that option; two or more: a failure.

The strict coders audit the default one: ``strict-final-v1`` accepts only the ``ANSWER: X``
line, ``strict-paren-v1`` only ``(X)`` mentions that all agree. Letters outside the question's
options are ignored by every coder, never clamped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from debate_ledger.schemas import LETTERS, LedgerError

__all__ = [
    "CODERS",
    "DEFAULT_CODER",
    "REAL_MODEL_CODER",
    "Mention",
    "code_answer",
    "get_coder",
    "mentions",
]

#: ``coder(text, n_options, options)``: ``options`` are the option texts in the order shown
#: (position ``i`` is letter ``LETTERS[i]``), or None where they are not known (a ledger
#: re-coded without its questions); coders before letter-v3 ignore them.
Coder = Callable[[str, int, "Sequence[str] | None"], "str | None"]

# ------------------------------------------------------------------------------- letter-v1

_FINAL = re.compile(r"(?i:final\s+answer|answer)\s*(?i:is|:)?\s*:?\s*\(?([A-J])\)?(?![A-Za-z])")
_PAREN = re.compile(r"\(([A-J])\)")
_BARE = re.compile(r"^\s*\(?([A-J])\)?[.)]?\s*$")


def _letter_v1(text: str, n_options: int) -> str | None:
    """0.1's coder: an explicit "answer is (X)" wins, else the last "(X)", else a bare letter.
    Kept so that 0.1 ledgers re-code identically; it misreads revisions (see the module)."""
    letters = LETTERS[:n_options]
    finals = [m.group(1) for m in _FINAL.finditer(text)]
    finals = [x for x in finals if x in letters]
    if finals:
        return finals[-1]
    parens = [m.group(1) for m in _PAREN.finditer(text) if m.group(1) in letters]
    if parens:
        return parens[-1]
    bare = _BARE.match(text)
    if bare and bare.group(1) in letters:
        return bare.group(1)
    return None


def _strict_paren_v1(text: str, n_options: int) -> str | None:
    """Only ``(X)``, and only when every parenthesised letter agrees (Du et al.'s parser is
    looser: it takes the last one). An audit of how much the default coder's reading adds."""
    letters = LETTERS[:n_options]
    found = {m.group(1) for m in _PAREN.finditer(text) if m.group(1) in letters}
    return found.pop() if len(found) == 1 else None


# ------------------------------------------------------------------------------- letter-v2

_TEMPLATE = re.compile(r"^\W*(?:final\s+)?answer\s*[:=]\s*\(?([A-J])\)?[\s.!*]*$", re.I)

#: A letter mention: ``(C)``, or a bare capital after option/choice/answer/letter (optionally
#: with ``is``/``:``), never inside a word.
_MENTION = re.compile(
    r"\(([A-J])\)"
    r"|(?<![A-Za-z(])(?:(?i:option|choice|answer|letter)s?\s*(?i:is|should be|would be)?\s*:?\s*)"
    r"([A-J])(?![A-Za-z0-9)])"
)
_SENTENCE = re.compile(r"(?<=[.!?;\n])\s+|\n+")
_CLAUSE = re.compile(
    r"[.!?;:,]\s+|[.!?;:,]$|\n|\s+(?=(?i:but|however|although|though|because|since|whereas|"
    r"while|yet)\b)"
)

_FIRST_PERSON = re.compile(
    r"\bI(?:'ll|'m|'d| will| am| would| shall)?\s+(?:\w+\s+){0,2}?"
    r"(?:conclude|update|change|changing|switch|switching|revise|pick|choose|select|go|going|"
    r"keep|maintain|remain|stay|stick|believe|think|agree|side|vote|say|answer|settle|"
    r"confident|sure|certain|convinced|concur|prefer)\b",
    re.I,
)
_IMPERSONAL = re.compile(
    r"\b(?:final|updated|new|revised|my)?\s*(?:answer|choice|vote)\s*(?:is|should be|would be|"
    r"stays|remains|:|=)"
    r"|\b(?:correct|right|best|true)\s+(?:option|answer|choice|one)\s+(?:is|should be|must be)"
    r"|\bit(?:'s|\s+is|\s+must be|\s+should be)\b"
    r"|\bthat is (?:still )?my answer"
    r"|^\W*(?:so|thus|therefore|hence)\b",
    re.I,
)
_AFTER_OWN = re.compile(
    r"^\W*(?:is|must be|should be)\s+(?:the\s+)?(?:correct|right|answer|best|true)\b"
    r"|^\W*(?:fits|is)\s+better\b|^\W*is\s+more\s+likely\b",
    re.I,
)
_REPORTED = re.compile(
    r"\bagent\s*\d|\bother\s+agents?\b|\bthe\s+others\b|\bothers\b|\beveryone\b|\bthey\b"
    r"|\bprevious(?:ly)?\b|\binitial(?:ly)?\b|\bearlier\b|\boriginal(?:ly)?\b|\bat first\b"
    r"|\bfirst\b|\bbefore\b|\bI\s+(?:\w+\s+)?(?:said|answered|chose|picked|thought|was|had)\b",
    re.I,
)
_ADOPT = re.compile(
    r"\bso do I\b|\bas do I\b|\bI\s+(?:\w+\s+)?(?:agree|concur|side with|join)\b|\bme too\b", re.I
)
_HESITANT = re.compile(
    r"\b(?:cannot|can't|could not|couldn't)\s+decide\b|\bunsure\b|\bnot\s+sure\b|\bbetween\b"
    r"|\beither\b|\btorn\b|\bcould\s+be\b|\bmaybe\b|\bperhaps\b",
    re.I,
)
_REJECT_BEFORE = re.compile(
    r"\b(?:not|rather than|instead of|over|from|than|except|cannot be|can't be|isn't)\s+"
    r"(?:[\w']+\s+){0,3}$",
    re.I,
)
_REJECT_AFTER = re.compile(
    r"^\W*(?:is|was)\s+(?:wrong|incorrect|a\s+mistake|a\s+distractor|tempting|not\s+right|"
    r"not\s+correct|mistaken)\b|^\W*(?:ignores|contradicts|does\s+not\s+fit|doesn't\s+fit|fails)\b",
    re.I,
)


@dataclass(frozen=True)
class Mention:
    """One letter mention and how ``letter-v2`` classified it."""

    letter: str
    start: int
    role: str  # "own", "reported", "neutral" or "rejected"


def _spans(pattern: re.Pattern[str], text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The pieces of ``text[start:end]`` between matches of ``pattern``, as absolute spans."""
    out, pos = [], start
    for m in pattern.finditer(text, start, end):
        if m.start() > pos:
            out.append((pos, m.start()))
        pos = m.end()
    if pos < end:
        out.append((pos, end))
    return out


def mentions(text: str, n_options: int, *, pattern: re.Pattern[str] = _MENTION) -> list[Mention]:
    """Every letter mention of ``text`` within the first ``n_options`` letters, classified.

    A mention's context is its clause: from the boundary before the mention's first character
    (``answer: B`` keeps ``answer``) to the boundary after its letter. ``pattern`` is
    letter-v2's mention pattern unless a later coder passes its own (one group per form)."""
    letters = LETTERS[:n_options]
    out: list[Mention] = []
    for s0, s1 in _spans(_SENTENCE, text, 0, len(text)):
        adopt = bool(_ADOPT.search(text, s0, s1))
        bounds = [(m.start(), m.end()) for m in _CLAUSE.finditer(text, s0, s1)]
        for m in pattern.finditer(text, s0, s1):
            group = next(i for i in range(1, (pattern.groups or 0) + 1) if m.group(i))
            letter = m.group(group)
            if letter not in letters:
                continue
            at = m.start(group)
            c0 = max((e for b, e in bounds if e <= m.start()), default=s0)
            c1 = min((b for b, e in bounds if b >= m.end()), default=s1)
            before, after = text[c0:at], text[m.end() : c1]
            out.append(Mention(letter, at, _role(before, after, adopt)))
    return out


def _role(before: str, after: str, adopt: bool) -> str:
    if _REJECT_BEFORE.search(before.rstrip("( ") + " ") or _REJECT_AFTER.search(after):
        return "rejected"
    if _HESITANT.search(before):
        return "neutral"
    if _FIRST_PERSON.search(before):
        return "own"
    if _REPORTED.search(before):
        return "own" if adopt else "reported"
    if _IMPERSONAL.search(before) or _AFTER_OWN.search(after):
        return "own"
    return "neutral"


def _letter_v2(text: str, n_options: int) -> str | None:
    letters = LETTERS[:n_options]
    templates = [m.group(1) for line in text.splitlines() if (m := _TEMPLATE.match(line))]
    templates = [x for x in templates if x in letters]
    if templates:
        return templates[-1]
    found = mentions(text, n_options)
    own = [m.letter for m in found if m.role == "own"]
    if own:
        return own[-1]
    neutral = {m.letter for m in found if m.role == "neutral"}
    if len(neutral) == 1:
        return neutral.pop()
    if found:
        return None
    bare = _BARE.match(text)
    if bare and bare.group(1) in letters:
        return bare.group(1)
    return None


# ------------------------------------------------------------------------------- letter-v3

_TEMPLATE_V3 = re.compile(
    r"^\W*(?:final\s+)?answer\s*[:=]\s*\**\(?([A-J])\)?(?:[\s.!*]*$|[).:]\s+\S)", re.I
)
_MENTION_V3 = re.compile(
    r"\(([A-J])\)"
    r"|(?<![A-Za-z(])(?:(?i:option|choice|answer|letter)s?\s*(?i:is|should be|would be)?\s*:?\s*)"
    r"\**([A-J])\**(?![A-Za-z0-9])"
    r"|(?:^|(?<=\s))\**([A-J])\**[).](?=\s|$)",
    re.M,
)
#: A mention in option style, ``X) text`` or ``X. text``: the text that follows is checked
#: against the options.
_OPTION_STYLE = re.compile(r"([A-J])\**[).]\s*(.*)")


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w%.+-]+", " ", text.lower()).split()).strip(". ")


def _named(text: str, option: str) -> bool:
    """Whether ``text`` names ``option`` as a whole phrase (not inside a longer word or
    number: "8" is not named by "18" nor "8.5")."""
    phrase = _norm(option)
    if not phrase:
        return False
    body = " " + _norm(text).replace(". ", " ") + " "
    return re.search(rf"(?<![\w.]){re.escape(phrase)}(?![\w]|\.\d)", body) is not None


def _conflicts(text: str, mention: Mention, options: Sequence[str]) -> bool:
    """``X) words``: the words start with another option's text and not with option X's."""
    m = _OPTION_STYLE.match(text, mention.start)
    if m is None or m.group(1) != mention.letter:
        return False
    words = _norm(m.group(2))
    if not words:
        return False
    idx = LETTERS.index(mention.letter)

    def starts(option: str) -> bool:
        phrase = _norm(option)
        return bool(phrase) and (words == phrase or words.startswith(phrase + " "))

    if idx < len(options) and starts(options[idx]):
        return False
    return any(starts(o) for k, o in enumerate(options) if k != idx)


def _letter_v3(text: str, n_options: int, options: Sequence[str] | None = None) -> str | None:
    letters = LETTERS[:n_options]
    if options is not None and len(options) != n_options:
        raise LedgerError(f"letter-v3: {len(options)} option texts for {n_options} options")
    templates = [m.group(1) for line in text.splitlines() if (m := _TEMPLATE_V3.match(line))]
    templates = [x for x in templates if x in letters]
    if templates:
        return templates[-1]
    found = mentions(text, n_options, pattern=_MENTION_V3)
    own = [m for m in found if m.role == "own"]
    neutral = [m for m in found if m.role == "neutral"]
    if own:
        decider = [own[-1]]
    elif neutral and len({m.letter for m in neutral}) == 1:
        decider = neutral
    elif found:
        return None
    else:
        decider = []
    if decider:
        if options is not None and any(_conflicts(text, m, options) for m in decider):
            return None
        return decider[-1].letter
    bare = _BARE.match(text)
    if bare and bare.group(1) in letters:
        return bare.group(1)
    if options is None:
        return None
    named = {letters[k] for k, o in enumerate(options) if _named(text, o)}
    return named.pop() if len(named) == 1 else None


def _strict_final_v1(text: str, n_options: int) -> str | None:
    """Only a final-line template ``ANSWER: X`` (the last one): the audit coder for prompts
    that ask for it."""
    letters = LETTERS[:n_options]
    found = [m.group(1) for line in text.splitlines() if (m := _TEMPLATE.match(line))]
    found = [x for x in found if x in letters]
    return found[-1] if found else None


def _letters_only(coder: Callable[[str, int], str | None]) -> Coder:
    def read(text: str, n_options: int, options: Sequence[str] | None = None) -> str | None:
        return coder(text, n_options)

    read.__doc__ = coder.__doc__
    return read


CODERS: dict[str, Coder] = {
    "letter-v3": _letter_v3,
    "letter-v2": _letters_only(_letter_v2),
    "letter-v1": _letters_only(_letter_v1),
    "strict-final-v1": _letters_only(_strict_final_v1),
    "strict-paren-v1": _letters_only(_strict_paren_v1),
}
#: The library's default, and the coder of every committed scripted demo (whose agents write
#: ``(X)`` and ``ANSWER: X``); kept so their ledgers re-code identically.
DEFAULT_CODER = "letter-v2"
#: What ``debate-ledger run`` (a real model) uses unless ``--coder`` says otherwise.
REAL_MODEL_CODER = "letter-v3"
#: The coders ``rebuild`` audits the recorded answers against.
AUDIT_CODERS = ("strict-final-v1", "strict-paren-v1")


def get_coder(name: str) -> Coder:
    try:
        return CODERS[name]
    except KeyError:
        raise LedgerError(f"unknown coder {name!r}; known: {', '.join(sorted(CODERS))}") from None


def code_answer(
    text: str,
    n_options: int,
    coder: str = DEFAULT_CODER,
    options: Sequence[str] | None = None,
) -> str | None:
    """The option letter ``text`` commits to, or ``None`` (a recorded parse failure).

    ``options``: the option texts in the order the agent saw them (letter-v3 checks ``X) text``
    against them and reads a response that names one option's text only)."""
    if not 2 <= n_options <= len(LETTERS):
        raise LedgerError(f"n_options must be in 2..{len(LETTERS)}, got {n_options}")
    return get_coder(coder)(text, n_options, options)

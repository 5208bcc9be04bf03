"""The text that travels in a swarm: an agent's prompt, and the messages it receives.

Every agent, a scripted one, a tiny local model or a model behind a server, sees the same plain
text, so the runtime never special-cases a backend:

    Question: What is the pet of Luku? A) eel B) owl C) bat D) frog

    Your previous answer:
    Answer: B / Confidence: 0.4 / I am guessing.

    Messages from other agents:
    - agent 3 [full]: Answer: D / Confidence: 0.9 / I know this.
    - agent 5 [vote]: Answer: B

    Reply with "Answer: <answer>", then "Confidence: <0 to 1>", then one line of reasoning.

A message carries the sender's latest output at one of three granularities, which set what it
says and what it costs in prompt tokens: ``full`` (the whole output), ``summary`` (the answer
and the confidence) and ``vote`` (the answer only). A *bare* agent (a model that only knows the
task, such as a tiny model trained on sums) is shown the question alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "GRANULARITIES",
    "INSTRUCTION",
    "Received",
    "build_prompt",
    "estimate_tokens",
    "parse_prompt",
    "render_message",
]

#: Message granularities, cheapest first.
GRANULARITIES: tuple[str, ...] = ("vote", "summary", "full")
INSTRUCTION = (
    'Reply with "Answer: <answer>", then "Confidence: <0 to 1>", then one line of reasoning.'
)
_Q = "Question: "
_PREV = "Your previous answer:"
_MSGS = "Messages from other agents:"
_MESSAGE = re.compile(r"^- agent (\d+) \[(vote|summary|full)\]: (.*)$")
#: Longest message text kept (a runaway model output must not blow up every prompt).
MAX_MESSAGE_CHARS = 400


@dataclass(frozen=True)
class Received:
    """One message as a recipient sees it."""

    sender: int
    granularity: str
    text: str


def _one_line(text: str) -> str:
    return " / ".join(line.strip() for line in text.strip().splitlines() if line.strip())


def render_message(
    output: str, answer: str | None, confidence: float | None, granularity: str
) -> str:
    """What a sender's latest ``output`` says at ``granularity`` (one line)."""
    if granularity == "full":
        return _one_line(output)[:MAX_MESSAGE_CHARS]
    shown = answer if answer is not None else "none"
    if granularity == "summary" and confidence is not None:
        return f"Answer: {shown} / Confidence: {confidence:.1f}"
    if granularity in ("summary", "vote"):
        return f"Answer: {shown}"
    raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")


def build_prompt(
    question: str,
    previous: str | None = None,
    messages: Sequence[Received] = (),
    *,
    bare: bool = False,
) -> list[dict[str, str]]:
    """The chat prompt of one call (see the module docstring); ``bare`` shows the question only."""
    if bare:
        return [{"role": "user", "content": question}]
    parts = [_Q + question]
    if previous is not None:
        parts.append(f"{_PREV}\n{_one_line(previous)[:MAX_MESSAGE_CHARS]}")
    if messages:
        lines = [f"- agent {m.sender} [{m.granularity}]: {_one_line(m.text)}" for m in messages]
        parts.append(_MSGS + "\n" + "\n".join(lines))
    parts.append(INSTRUCTION)
    return [{"role": "user", "content": "\n\n".join(parts)}]


def parse_prompt(content: str) -> tuple[str, str | None, list[Received]]:
    """``(question, previous output or None, messages)`` of a prompt :func:`build_prompt`
    wrote (what scripted agents read; a bare prompt is all question)."""
    if not content.startswith(_Q):
        return content.strip(), None, []
    blocks = content[len(_Q) :].split("\n\n")
    question = blocks[0].strip()
    previous: str | None = None
    messages: list[Received] = []
    for block in blocks[1:]:
        if block.startswith(_PREV):
            previous = block[len(_PREV) :].strip().replace(" / ", "\n")
        elif block.startswith(_MSGS):
            for line in block.splitlines()[1:]:
                m = _MESSAGE.match(line.strip())
                if m is not None:
                    text = m.group(3).replace(" / ", "\n")
                    messages.append(Received(int(m.group(1)), m.group(2), text))
    return question, previous, messages


def estimate_tokens(text: str) -> int:
    """A token count for backends that report none (rule agents): about four characters per
    token, the usual rule of thumb for English BPE vocabularies. Marked as estimated wherever
    it is reported."""
    return max(1, (len(text) + 3) // 4) if text else 0

"""The agent harness: any ChatModel, file tools in a sandbox, budgets, Pass@1 and a cost card.

One episode (:func:`run_episode`): copy the task's workspace into a fresh sandbox, give the
agent a system message (the tools and the action format) and the prompt at one guidance
level, then loop: the agent answers, the harness parses one JSON action from the answer,
runs it in the sandbox and sends back the observation. The episode ends when the agent calls
``done``, or a budget runs out (model calls, tokens), or it has answered three times in a row
with no parseable action. Then the harness checks that nothing changed the sandbox between
tool calls (an edit from outside the tools fails the episode), and the hidden validators judge
the sandbox. Pass@1 is the share of tasks whose single episode passes every check that ran.

Token counts are the backend's (``Completion`` usage) where it reports them, else estimated
at four characters a token and marked ``estimated``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from paperstack.llm import ChatModel
from paperstack.llm.base import BackendHTTPError, ContextOverflowError, LLMError
from pcbinnobench.errors import PcbBenchError
from pcbinnobench.tasks import Task
from pcbinnobench.tools import Sandbox, tool_help, tree_digest
from pcbinnobench.validators import Check, ValidationResult, validate

__all__ = ["SYSTEM_PROMPT", "Budget", "Episode", "cost_card", "parse_action", "run_episode"]

SYSTEM_PROMPT = (
    "You edit a KiCad 9 project (schematic .kicad_sch, board .kicad_pcb) in a sandboxed "
    "workspace. Each reply must contain exactly one action as a JSON object "
    '{{"tool": NAME, "args": {{...}}}}; you will get the tool\'s output back. Coordinates are '
    "millimetres, rotations degrees. Call done when the design is finished.\nTools:\n{tools}"
)


@dataclass(frozen=True)
class Budget:
    """What one episode may spend. ``max_calls``: model calls; ``max_tokens``: prompt plus
    completion tokens over the episode; ``max_new_tokens``: per answer."""

    max_calls: int = 30
    max_tokens: int = 200_000
    max_new_tokens: int = 512

    def __post_init__(self) -> None:
        for name in ("max_calls", "max_tokens", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise PcbBenchError(f"budget {name} must be >= 1, got {getattr(self, name)}")


@dataclass
class Episode:
    task_id: str
    level: str
    agent: str
    result: ValidationResult
    calls: int = 0
    tool_calls: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated_tokens: bool = False
    seconds: float = 0.0
    stop: str = ""
    transcript: list[dict[str, str]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.result.passed

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "level": self.level,
            "agent": self.agent,
            "passed": self.passed,
            "calls": self.calls,
            "tool_calls": self.tool_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "estimated_tokens": self.estimated_tokens,
            "seconds": round(self.seconds, 3),
            "stop": self.stop,
            "validation": self.result.to_json(),
        }


_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)


def parse_action(text: str) -> dict[str, Any] | None:
    """The first JSON object with a ``tool`` key in an answer (fenced or bare), or None."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    decoder = json.JSONDecoder()
    i = text.find("{")
    while i >= 0 and len(candidates) < 20:
        try:
            obj, end = decoder.raw_decode(text, i)
            candidates.append(text[i:end])
            i = text.find("{", end)
        except ValueError:
            i = text.find("{", i + 1)
    for cand in candidates:
        try:
            obj = json.loads(cand)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("tool"), str):
            obj.setdefault("args", {})
            return obj
    return None


def _context_full(exc: LLMError) -> bool:
    """Whether a failed model call says the conversation no longer fits the model's context
    (vLLM answers such a prompt with HTTP 400 naming the maximum context length)."""
    if isinstance(exc, ContextOverflowError):
        return True
    text = str(exc).lower()
    return (
        isinstance(exc, BackendHTTPError)
        and exc.status == 400
        and ("context length" in text or "max_model_len" in text or "maximum context" in text)
    )


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def run_episode(
    task: Task,
    agent: ChatModel,
    level: str,
    budget: Budget | None = None,
    *,
    temperature: float = 0.0,
    seed: int | None = None,
    observer: Callable[[Sandbox, int], None] | None = None,
    keep_transcript: bool = False,
    stop_on_model_error: bool = False,
    stop_on_full_context: bool = False,
) -> Episode:
    """One episode of ``agent`` on ``task`` at prompt ``level`` (objective or guided).

    ``observer(sandbox, step)`` is called after every tool call (tests use it to play an
    outside process editing the sandbox; it must not be used to help an agent).
    ``stop_on_model_error``: a model call that fails ends the episode (``stop: model error``)
    instead of raising; for a local model whose context a long episode can fill, never for a
    served one, whose failure (a dead server, a wrong model name) the user must see.
    ``stop_on_full_context``: only a conversation that outgrew a served model's context ends
    the episode (``stop: context full``): the client's :class:`ContextOverflowError`, or the
    server's HTTP 400 refusal of a prompt over its ``max_model_len`` (vLLM); any other failure
    of the server still raises.
    """
    budget = budget or Budget()
    prompt = task.prompt(level)
    source_before = tree_digest(task.workspace)
    started = time.perf_counter()
    with Sandbox(task.workspace) as box:
        messages: list[dict[str, str]] = [
            {"role": "system", "content": SYSTEM_PROMPT.format(tools=tool_help())},
            {"role": "user", "content": prompt},
        ]
        ep = Episode(
            task.id, level, getattr(agent, "name", type(agent).__name__), ValidationResult(task.id)
        )
        misses = 0
        while True:
            if ep.calls >= budget.max_calls:
                ep.stop = "budget: model calls"
                break
            if ep.prompt_tokens + ep.completion_tokens >= budget.max_tokens:
                ep.stop = "budget: tokens"
                break
            try:
                answer = agent.generate(
                    [list(messages)],
                    max_new_tokens=budget.max_new_tokens,
                    temperature=temperature,
                    seed=seed,
                )[0][0]
            except LLMError as exc:
                if stop_on_full_context and _context_full(exc):
                    ep.stop = f"context full: {str(exc).splitlines()[0][:200]}"
                    break
                if not stop_on_model_error:  # an unreachable server is the user's to fix
                    raise
                # a local model whose context the conversation outgrew: the episode ends
                ep.stop = f"model error: {str(exc).splitlines()[0][:200]}"
                break
            ep.calls += 1
            pt, ct = (
                getattr(answer, "prompt_tokens", None),
                getattr(answer, "completion_tokens", None),
            )
            if pt is None or ct is None:
                ep.estimated_tokens = True
                pt = sum(_tokens(m["content"]) for m in messages)
                ct = _tokens(str(answer))
            ep.prompt_tokens += int(pt)
            ep.completion_tokens += int(ct)
            messages.append({"role": "assistant", "content": str(answer)})
            action = parse_action(str(answer))
            if action is None:
                misses += 1
                observation = 'error: no action found; reply with {"tool": ..., "args": {...}}'
                if misses >= 3:
                    ep.stop = "no parseable action three times"
                    messages.append({"role": "user", "content": observation})
                    break
            else:
                misses = 0
                name = str(action["tool"])
                ep.tool_calls[name] = ep.tool_calls.get(name, 0) + 1
                observation = box.execute(action)
                if observer is not None:
                    observer(box, ep.calls)
                if box.done:
                    ep.stop = "done"
                    messages.append({"role": "user", "content": observation})
                    break
            messages.append({"role": "user", "content": f"Observation:\n{observation}"})
        tampered = box.tampered or tree_digest(box.root) != box.last_digest
        result = validate(box.root, task.hidden)
        if tampered:
            result.checks.insert(
                0,
                Check(
                    "workspace_integrity", "failed", "the sandbox changed outside the agent's tools"
                ),
            )
        if tree_digest(task.workspace) != source_before:
            result.checks.insert(
                0, Check("workspace_integrity", "failed", "the shipped workspace was modified")
            )
        ep.result = result
    ep.seconds = time.perf_counter() - started
    if keep_transcript:
        ep.transcript = messages
    return ep


def cost_card(episodes: Sequence[Episode], ledger: Any | None = None) -> dict[str, Any]:
    """Calls, tokens, tool calls and time per agent and level (plus a backend's ledger)."""
    card: dict[str, Any] = {"agents": {}}
    for ep in episodes:
        key = f"{ep.agent}/{ep.level}"
        row = card["agents"].setdefault(
            key,
            {
                "episodes": 0,
                "passed": 0,
                "calls": 0,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "estimated_tokens": False,
                "seconds": 0.0,
                "tool_calls": {},
            },
        )
        row["episodes"] += 1
        row["passed"] += int(ep.passed)
        row["calls"] += ep.calls
        row["prompt_tokens"] += ep.prompt_tokens
        row["completion_tokens"] += ep.completion_tokens
        row["estimated_tokens"] = row["estimated_tokens"] or ep.estimated_tokens
        row["seconds"] = round(row["seconds"] + ep.seconds, 3)
        for tool, count in ep.tool_calls.items():
            row["tool_calls"][tool] = row["tool_calls"].get(tool, 0) + count
    if ledger is not None:
        card["backend"] = ledger.to_json()
    return card

"""The two-player game: the auditor plays the user, the target answers or calls tools.

One episode, in tau-bench's loop: the auditor writes a user turn (its ``{placeholders}`` filled
from the scenario); the target answers, or calls a tool, which the environment executes on the
database and whose result goes back to the target, until it answers in words (at most
``max_tool_calls`` calls per turn). The episode ends at ``max_turns`` user turns, when the
auditor writes ``###STOP###``, or when the target transfers to a human.

:func:`play` runs many episodes in lockstep, so that one batched call per side serves all of
them (what makes a model auditor or target affordable on a CPU). Each finished episode goes to
``on_episode`` at once (the JSONL :class:`EpisodeLedger`), so a run that stops on bad input
keeps every episode it completed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from paperstack.records import JsonlWriter
from probe_audit.environment import (
    Domain,
    Scenario,
    execute_tool,
    format_tool_call,
    parse_tool_call,
)
from probe_audit.errors import ProbeError, TargetError

__all__ = [
    "STOP",
    "AuditorView",
    "Episode",
    "EpisodeLedger",
    "Event",
    "GameConfig",
    "Target",
    "auditor_view",
    "play",
    "target_messages",
]

STOP = "###STOP###"


@dataclasses.dataclass
class Event:
    """One step of an episode: a user turn, an agent message or a tool call and its result."""

    kind: Literal["user", "agent", "tool"]
    turn: int
    text: str = ""  # user: the filled text the target saw; agent: its message
    raw: str = ""  # user: the auditor's text; tool: the target's call text
    call_id: str = ""
    name: str = ""
    arguments: dict[str, Any] = dataclasses.field(default_factory=dict)
    result: Any = None
    ok: bool = True

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v not in ("", None, {})}


@dataclasses.dataclass
class Episode:
    """Everything that happened in one episode, and what the checkers found in it."""

    id: str
    domain: str
    scenario: Scenario
    db_before: dict[str, Any]
    db_after: dict[str, Any]
    events: list[Event] = dataclasses.field(default_factory=list)
    ended_by: str = ""
    turns: int = 0
    target_calls: int = 0
    auditor_calls: int = 0
    target_errors: int = 0
    seconds: float = 0.0
    violations: list[Any] = dataclasses.field(default_factory=list)
    ground_truth: list[dict[str, Any]] | None = None
    reward: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def done(self) -> bool:
        return bool(self.ended_by)

    def user_turns(self) -> list[str]:
        return [e.text for e in self.events if e.kind == "user"]

    def transcript(self) -> str:
        """The dialogue as text (tool calls shown with their results), for judges and logs."""
        lines = []
        for e in self.events:
            if e.kind == "user":
                lines.append(f"USER: {e.text}")
            elif e.kind == "agent":
                lines.append(f"AGENT: {e.text}")
            else:
                lines.append(f"TOOL {e.name}({json.dumps(e.arguments)}) -> {json.dumps(e.result)}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "domain": self.domain,
            "scenario": self.scenario.to_json(),
            "ended_by": self.ended_by,
            "turns": self.turns,
            "target_calls": self.target_calls,
            "auditor_calls": self.auditor_calls,
            "target_errors": self.target_errors,
            "seconds": round(self.seconds, 4),
            "events": [e.to_json() for e in self.events],
            "violations": [v.to_json() for v in self.violations],
            "ground_truth": self.ground_truth,
            "reward": self.reward,
        }


def target_messages(events: Sequence[Event]) -> list[dict[str, Any]]:
    """The target's side of the conversation as OpenAI-style messages: user turns, its own
    messages and tool-call texts (role ``assistant``), tool results (role ``tool``)."""
    out: list[dict[str, Any]] = []
    for e in events:
        if e.kind == "user":
            out.append({"role": "user", "content": e.text})
        elif e.kind == "agent":
            out.append({"role": "assistant", "content": e.text})
        else:
            out.append({"role": "assistant", "content": e.raw})
            out.append(
                {
                    "role": "tool",
                    "content": json.dumps(e.result, separators=(",", ":")),
                    "tool_call_id": e.call_id,
                    "name": e.name,
                }
            )
    return out


@dataclasses.dataclass(frozen=True)
class AuditorView:
    """What the auditor sees: its scenario and the dialogue so far, ``(role, text)`` pairs with
    role ``user`` (its own turns, as it wrote them) or ``agent`` (the agent's words)."""

    episode_id: str
    scenario: Scenario
    dialogue: tuple[tuple[str, str], ...]

    @property
    def turn(self) -> int:
        return sum(1 for role, _ in self.dialogue if role == "user")


@runtime_checkable
class Auditor(Protocol):
    """Writes the next user turn for each view (one batched call for many episodes)."""

    name: str

    def turns(self, views: Sequence[AuditorView]) -> list[str]: ...


@runtime_checkable
class Target(Protocol):
    """Answers each conversation (messages from :func:`target_messages`) with a message or a
    ``<tool_call>`` text; see :mod:`probe_audit.targets`."""

    name: str

    def act(self, conversations: Sequence[Sequence[Mapping[str, Any]]]) -> list[str]: ...


@dataclasses.dataclass(frozen=True)
class GameConfig:
    """Episode limits (tau-bench ends at a turn limit, a stop token or a transfer).

    ``on_target_error``: ``"raise"`` stops on a target answer that is not a usable tool call
    (one line naming the episode and turn); ``"record"`` returns the error to the target as a
    tool result and counts it (``Episode.target_errors``), for model targets that sometimes
    write broken calls.
    """

    max_turns: int = 3
    max_tool_calls: int = 4
    on_target_error: Literal["raise", "record"] = "raise"
    max_reply_chars: int = 160

    def __post_init__(self) -> None:
        if self.max_turns < 1 or self.max_tool_calls < 0:
            raise ProbeError(
                f"max_turns={self.max_turns}, max_tool_calls={self.max_tool_calls}: need "
                "max_turns >= 1 and max_tool_calls >= 0"
            )
        if self.on_target_error not in ("raise", "record"):
            raise ProbeError(f"on_target_error={self.on_target_error!r}: use 'raise' or 'record'")


class EpisodeLedger:
    """Completed episodes, one JSON line each, fsynced as they finish (crash-safe)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise ProbeError(f"{self.path}: is a directory; name the ledger file")
        self._writer = JsonlWriter(self.path)
        self.count = 0

    def __call__(self, episode: Episode) -> None:
        self._writer.write(episode.to_json())
        self.count += 1

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> EpisodeLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def auditor_view(ep: Episode) -> AuditorView:
    """What the auditor sees of ``ep`` so far (consecutive agent messages joined)."""
    dialogue: list[tuple[str, str]] = []
    for e in ep.events:
        if e.kind == "user":
            dialogue.append(("user", e.raw))
        elif e.kind == "agent":
            if dialogue and dialogue[-1][0] == "agent":
                dialogue[-1] = ("agent", f"{dialogue[-1][1]} {e.text}")
            else:
                dialogue.append(("agent", e.text))
    return AuditorView(ep.id, ep.scenario, tuple(dialogue))


def play(
    domain: Domain,
    scenarios: Sequence[Scenario],
    auditor: Auditor,
    target: Target,
    db: Mapping[str, Any],
    config: GameConfig | None = None,
    *,
    episode_ids: Sequence[str] | None = None,
    on_episode: Callable[[Episode], None] | None = None,
    checker: Callable[[Episode], None] | None = None,
) -> list[Episode]:
    """Play one episode per scenario, all in lockstep; return them in scenario order.

    Every episode starts from its own copy of ``db`` (``Episode.db_before`` is one shared copy:
    read it, never change it). ``checker`` runs on each episode as it
    ends (e.g. to fill ``violations`` and ``reward``), then ``on_episode`` (e.g. a ledger).
    """
    cfg = config or GameConfig()
    ids = (
        list(episode_ids) if episode_ids is not None else [f"ep{i}" for i in range(len(scenarios))]
    )
    if len(ids) != len(scenarios):
        raise ProbeError(f"{len(ids)} episode ids for {len(scenarios)} scenarios")
    # One read-only copy of the starting database is shared by every episode's ``db_before``;
    # each episode changes its own copy (a JSON round trip: the database is JSON, and this is
    # several times faster than copy.deepcopy).
    frozen = json.loads(json.dumps(dict(db)))
    text = json.dumps(frozen)
    episodes = [
        Episode(i, domain.name, s, frozen, json.loads(text))
        for i, s in zip(ids, scenarios, strict=True)
    ]
    started = {ep.id: time.perf_counter() for ep in episodes}
    calls = 0

    def finish(ep: Episode, why: str) -> None:
        ep.ended_by = why
        ep.seconds = time.perf_counter() - started[ep.id]
        if checker is not None:
            checker(ep)
        if on_episode is not None:
            on_episode(ep)

    for turn in range(1, cfg.max_turns + 1):
        active = [ep for ep in episodes if not ep.done]
        if not active:
            break
        texts = auditor.turns([auditor_view(ep) for ep in active])
        if len(texts) != len(active):
            raise ProbeError(
                f"auditor {auditor.name}: {len(texts)} turns for {len(active)} episodes"
            )
        talking = []
        for ep, raw in zip(active, texts, strict=True):
            ep.auditor_calls += 1
            raw = str(raw)
            if STOP in raw:
                before = raw.split(STOP)[0].strip()
                if before:
                    ep.events.append(Event("user", turn, text=ep.scenario.fill(before), raw=before))
                    ep.turns = turn
                finish(ep, "stop")
                continue
            ep.events.append(Event("user", turn, text=ep.scenario.fill(raw), raw=raw))
            ep.turns = turn
            talking.append(ep)
        for _step in range(cfg.max_tool_calls + 1):
            if not talking:
                break
            answers = target.act([target_messages(ep.events) for ep in talking])
            if len(answers) != len(talking):
                raise ProbeError(f"target {target.name}: {len(answers)} answers for {len(talking)}")
            still = []
            for ep, answer in zip(talking, answers, strict=True):
                ep.target_calls += 1
                text = str(answer)
                try:
                    call = parse_tool_call(
                        text, where=f"target {target.name}, {ep.id}, turn {turn}"
                    )
                except TargetError as exc:
                    if cfg.on_target_error == "raise":
                        raise
                    ep.target_errors += 1
                    calls += 1
                    ep.events.append(
                        Event(
                            "tool",
                            turn,
                            raw=text,
                            call_id=f"c{calls}",
                            result={"error": str(exc)},
                            ok=False,
                        )
                    )
                    still.append(ep)
                    continue
                if call is None:
                    ep.events.append(Event("agent", turn, text=text.strip()[: cfg.max_reply_chars]))
                    continue
                calls += 1
                result, ok = execute_tool(domain, ep.db_after, call)
                ep.events.append(
                    Event(
                        "tool", turn, raw=format_tool_call(call.name, call.arguments),
                        call_id=f"c{calls}", name=call.name, arguments=dict(call.arguments),
                        result=result, ok=ok,
                    )
                )  # fmt: skip
                tool = domain.tools.get(call.name)
                if ok and tool is not None and tool.ends_episode:
                    finish(ep, "transfer")
                    continue
                still.append(ep)
            talking = still
        for ep in talking:  # used up its tool-call budget without answering in words
            ep.events.append(Event("agent", turn, text=""))
    for ep in episodes:
        if not ep.done:
            finish(ep, "max_turns")
    return episodes

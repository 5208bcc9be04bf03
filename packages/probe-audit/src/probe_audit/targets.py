"""Targets: the agents under audit, all behind one text protocol.

A target answers a conversation (OpenAI-style messages, tool results as role ``tool``) with a
message or a ``<tool_call>`` text. Three kinds:

- :class:`RuleTarget` (the domains subclass it): a deterministic agent that follows its
  domain's policy except for :class:`PlantedBug` s, known faults switched on by name. It is a
  :class:`paperstack.llm.RuleAgent`, so it is also a ``ChatModel``, and it knows its ground
  truth: :meth:`RuleTarget.ground_truth` replays an episode and names every planted bug that
  made a tool call break a rule, which is what the checkers' precision is measured against;
- :class:`ChatTarget`: any ``ChatModel`` (a local transformers model, a model behind an
  OpenAI-compatible server such as ``transformers serve`` or vLLM), given the policy as its
  system prompt, with tool results rendered for templates that have no ``tool`` role;
- :class:`CallableTarget`: a Python function ``f(messages) -> str``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from abc import abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from paperstack.llm import CostLedger, RuleAgent
from probe_audit.environment import format_tool_call, parse_tool_call
from probe_audit.errors import ProbeError, TargetError

if TYPE_CHECKING:
    from paperstack.llm import ChatModel
    from probe_audit.game import Episode

__all__ = [
    "CallableTarget",
    "ChatTarget",
    "Decision",
    "DialogueState",
    "PlantedBug",
    "RuleTarget",
]


@dataclasses.dataclass(frozen=True)
class PlantedBug:
    """A known fault of a rule target: what sets it off and which rule it breaks."""

    id: str
    rule_id: str
    category: str
    trigger: str


@dataclasses.dataclass(frozen=True)
class Decision:
    """A rule target's answer and the planted bugs that made it differ from the policy."""

    text: str
    fired: frozenset[str] = frozenset()


@dataclasses.dataclass
class DialogueState:
    """What a rule target reads off the conversation (it keeps no memory of its own)."""

    last_user: str = ""
    entities: dict[str, str] = dataclasses.field(default_factory=dict)
    triggers: set[str] = dataclasses.field(default_factory=set)
    intent: str | None = None
    intent_done: bool = False  # a write answered that intent after it was stated
    auth: dict[str, Any] | None = None
    records: dict[str, Any] = dataclasses.field(default_factory=dict)
    checks: dict[str, Any] = dataclasses.field(default_factory=dict)
    this_turn: list[tuple[str, dict[str, Any], Any]] = dataclasses.field(default_factory=list)
    asked: str = ""  # the agent's last message before the latest user turn

    def called(self, name: str, **arguments: Any) -> Any | None:
        """The result of ``name(arguments)`` if it was called since the latest user turn."""
        for n, args, result in self.this_turn:
            if n == name and all(args.get(k) == v for k, v in arguments.items()):
                return result if result is not None else {}
        return None


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    m = pattern.search(text)
    if m is None:
        return None
    return m.group(1) if m.groups() else m.group(0)


class RuleTarget(RuleAgent):
    """A policy-following rule agent with planted bugs (``bugs``: the ids switched on).

    Subclasses give the regular expressions that read a user turn (``ENTITIES``,
    ``INTENTS``, ``TRIGGERS``), the bugs they can plant (``BUGS``) and :meth:`plan`, the
    policy as the agent applies it. Every answer is a pure function of the conversation.
    ``oracle`` is a database the target consults only to attribute a fired bug (did skipping
    the check actually let a forbidden change through?); it never changes what the target says.
    """

    ENTITIES: ClassVar[dict[str, re.Pattern[str]]] = {}
    INTENTS: ClassVar[dict[str, re.Pattern[str]]] = {}
    TRIGGERS: ClassVar[dict[str, re.Pattern[str]]] = {}
    BUGS: tuple[PlantedBug, ...] = ()
    AUTH_TOOL = ""
    WRITE_TOOLS: frozenset[str] = frozenset()
    TRANSFER_TOOL = "transfer_to_human"

    def __init__(
        self,
        bugs: Collection[str] | None = None,
        *,
        name: str | None = None,
        oracle: Mapping[str, Any] | None = None,
    ) -> None:
        known = {b.id for b in self.BUGS}
        chosen = set(known if bugs is None else bugs)
        unknown = sorted(chosen - known)
        if unknown:
            raise ProbeError(
                f"{type(self).__name__}: unknown planted bug(s) {', '.join(unknown)}; known: "
                + ", ".join(sorted(known))
            )
        self.bugs = frozenset(chosen)
        suffix = (
            "bugfree" if not chosen else "+".join(sorted(chosen)) if bugs is not None else "planted"
        )
        super().__init__(seed=0, name=name or f"{type(self).__name__}[{suffix}]")
        self.oracle = oracle

    @property
    def planted(self) -> tuple[PlantedBug, ...]:
        return tuple(b for b in self.BUGS if b.id in self.bugs)

    # ------------------------------------------------------------------ reading the dialogue

    def read(self, messages: Sequence[Mapping[str, Any]]) -> DialogueState:
        s = DialogueState()
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        pending_call: tuple[str, dict[str, Any]] | None = None
        for i, m in enumerate(messages):
            role, content = m.get("role"), str(m.get("content") or "")
            if role == "user":
                if i == last_user:
                    s.last_user = content
                for name, pattern in self.ENTITIES.items():
                    value = _first(pattern, content)
                    if value is not None:
                        s.entities[name] = value
                for name, pattern in self.TRIGGERS.items():
                    if pattern.search(content):
                        s.triggers.add(name)
                hits = [
                    (mm.start(), k) for k, p in self.INTENTS.items() if (mm := p.search(content))
                ]
                if hits:
                    s.intent, s.intent_done = min(hits)[1], False
            elif role == "assistant":
                try:
                    call = parse_tool_call(content)
                except TargetError:
                    call = None
                if call is None:
                    if i < last_user:
                        s.asked = content
                    pending_call = None
                else:
                    pending_call = (call.name, call.arguments)
            elif role == "tool" and pending_call is not None:
                name, args = pending_call
                try:
                    result = json.loads(content)
                except json.JSONDecodeError:
                    result = {"error": content}
                self.observe(s, name, args, result)
                if name in self.WRITE_TOOLS and isinstance(result, dict) and "error" not in result:
                    s.intent_done = True
                if i > last_user:
                    s.this_turn.append((name, args, result))
                pending_call = None
        return s

    def observe(self, s: DialogueState, name: str, args: dict[str, Any], result: Any) -> None:
        """Remember what a tool result says (authentication, records, checks)."""
        ok = isinstance(result, dict) and "error" not in result
        if name == self.AUTH_TOOL and ok:
            s.auth = result

    # ------------------------------------------------------------------ answering

    def decide(self, messages: Sequence[Mapping[str, Any]]) -> Decision:
        """The answer to ``messages`` and the planted bugs that shaped it."""
        s = self.read(messages)
        text = s.last_user
        transfer = self.TRIGGERS.get("transfer")
        if transfer is not None and transfer.search(text) and s.called(self.TRANSFER_TOOL) is None:
            return self.call(self.TRANSFER_TOOL, reason="the user asked for a human")
        if self.TRIGGERS.get("injection") and self.TRIGGERS["injection"].search(text):
            return Decision("Sorry, I can't do that.")
        return self.plan(s)

    @abstractmethod
    def plan(self, s: DialogueState) -> Decision:
        """The policy as this agent applies it (with its planted bugs)."""

    def call(self, name: str, fired: Collection[str] = (), **arguments: Any) -> Decision:
        return Decision(format_tool_call(name, arguments), frozenset(fired))

    def respond(self, messages: list[dict[str, Any]]) -> str:
        return self.decide(messages).text

    def act(self, conversations: Sequence[Sequence[Mapping[str, Any]]]) -> list[str]:
        """The :class:`~probe_audit.game.Target` interface."""
        return [self.decide(list(c)).text for c in conversations]

    def ground_truth(self, episode: Episode) -> list[dict[str, Any]]:
        """Replay ``episode``: every successful tool call a planted bug made break a rule, as
        ``{bug, rule_id, category, turn, call_id}`` (consults ``episode.db_before``)."""
        from probe_audit.game import target_messages

        oracle, self.oracle = self.oracle, episode.db_before
        by_id = {b.id: b for b in self.BUGS}
        out = []
        try:
            for k, ev in enumerate(episode.events):
                if ev.kind != "tool" or not ev.ok:
                    continue
                decision = self.decide(target_messages(episode.events[:k]))
                for bug in sorted(decision.fired):
                    b = by_id[bug]
                    out.append(
                        {
                            "bug": b.id,
                            "rule_id": b.rule_id,
                            "category": b.category,
                            "turn": ev.turn,
                            "call_id": ev.call_id,
                        }
                    )
        finally:
            self.oracle = oracle
        return out


# --------------------------------------------------------------------------- model targets


class ChatTarget:
    """Any :class:`~paperstack.llm.ChatModel` as a target.

    The policy and tool list go in the system prompt (``system_prompt``; None leaves it out,
    for a model that learned the policy). ``tool_role="user"`` renders tool results as user
    messages wrapped in ``<tool_response>`` (for chat templates without a ``tool`` role, such
    as the toy world's); ``window`` keeps only the last messages (a small model's context).
    Generation is greedy. Calls go into :attr:`ledger` unless the model keeps its own
    (:class:`~paperstack.llm.OpenAIChat` does).
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        system_prompt: str | None = None,
        tool_role: str = "tool",
        window: int | None = None,
        max_new_tokens: int = 96,
        name: str | None = None,
        ledger: CostLedger | None = None,
    ) -> None:
        if tool_role not in ("tool", "user"):
            raise ProbeError(f"tool_role={tool_role!r}: use 'tool' or 'user'")
        if window is not None and window < 1:
            raise ProbeError(f"window={window}: must be >= 1")
        self.model = model
        self.system_prompt = system_prompt
        self.tool_role = tool_role
        self.window = window
        self.max_new_tokens = max_new_tokens
        self.name = name or str(getattr(model, "name", type(model).__name__))
        own = getattr(model, "ledger", None)
        self.ledger: CostLedger = own if isinstance(own, CostLedger) else (ledger or CostLedger())
        self._record = not isinstance(own, CostLedger)

    def render(self, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
        """The messages as the model reads them."""
        out: list[dict[str, str]] = []
        for m in messages:
            role, content = str(m["role"]), str(m.get("content") or "")
            if role == "tool" and self.tool_role == "user":
                out.append({"role": "user", "content": f"<tool_response>{content}</tool_response>"})
            else:
                out.append({"role": role, "content": content})
        if self.window is not None:
            out = out[-self.window :]
            while len(out) > 1 and out[0]["role"] != "user":  # templates open on a user turn
                out = out[1:]
        if self.system_prompt:
            out.insert(0, {"role": "system", "content": self.system_prompt})
        return out

    def act(self, conversations: Sequence[Sequence[Mapping[str, Any]]]) -> list[str]:
        prompts = [self.render(c) for c in conversations]
        started = time.perf_counter()
        answers = self.model.generate(prompts, max_new_tokens=self.max_new_tokens, temperature=0.0)
        seconds = time.perf_counter() - started
        out = []
        for answer in answers:
            text = answer[0]
            if self._record:
                self.ledger.record(
                    model=self.name,
                    prompt_tokens=getattr(text, "prompt_tokens", None),
                    completion_tokens=getattr(text, "completion_tokens", None),
                    retries=0,
                    seconds=seconds / max(1, len(answers)),
                )
            out.append(str(text))
        return out


class CallableTarget:
    """A Python function ``f(messages) -> str`` as a target (one call per conversation)."""

    def __init__(
        self, func: Callable[[list[dict[str, Any]]], str], name: str | None = None
    ) -> None:
        if not callable(func):
            raise ProbeError(f"CallableTarget needs a function, got {type(func).__name__}")
        self.func = func
        self.name = name or getattr(func, "__name__", "callable")

    def act(self, conversations: Sequence[Sequence[Mapping[str, Any]]]) -> list[str]:
        out = []
        for c in conversations:
            answer = self.func([dict(m) for m in c])
            if not isinstance(answer, str):
                raise TargetError(f"target {self.name}: returned {type(answer).__name__}, not text")
            out.append(answer)
        return out

"""The swarm runtime: N frozen agents, rounds of message passing, a hard call budget, a trace.

One *instance* is solved by one *episode*:

1. **Round 0.** Every agent answers the question (N calls).
2. **Rounds t = 1 .. max_rounds - 1.** The communication policy sees an :class:`Observation`
   per episode (the agents' latest outputs, answers and confidences, the budget left, H(t) when
   it asks for it) and returns a :class:`Plan`: messages (sender, recipient, granularity) and
   agents to resample independently, or ``stop``. Every agent that receives at least one
   message makes one call (its previous output and the messages in its prompt, see
   :mod:`orchestra_rl.wire`); a resampled agent makes one fresh call. Messages carry the
   senders' outputs as they were at the start of the round (synchronous rounds).
3. **Answer.** The plurality of the agents' final answers (or, for a policy whose ``vote`` is
   ``"all"``, of every answer any call produced: self-consistency); a tie goes to the answer
   of the lowest-numbered agent among the tied ones (the same rule for every policy). The
   evaluator scores it.

**Budget.** ``budget`` calls per instance, exactly: a call is counted when it is made, whether
it succeeds or fails. A round that would exceed the budget runs only as many of its calls as
are left (the recipients are chosen by a seeded shuffle and the others are counted as denied);
then the episode ends. A budget below N is refused: every agent must answer once.

**Concurrency.** Calls of a round are issued together for all episodes of a batch. Rule
agents are called inline (they are Python functions); a local transformers model gets one
batched ``generate`` per round; every other backend (an OpenAI-compatible server) gets one
request per call from a pool of ``concurrency`` threads shared by the whole swarm, on top of
the backend's own limit (:class:`~paperstack.llm.OpenAIChat` has one per backend).

**Failures.** A call that raises, or runs past ``call_timeout`` seconds, is recorded in the
trace as an error or a timeout and counted; the agent keeps its previous output (no answer if
it had none) and the instance continues. An evaluator that raises is recorded on the episode
(score 0). Nothing of this stops the run, with two exceptions that would otherwise turn a
broken setup into a run of silent zeros: a call that raises one of ``SwarmConfig.fatal``
(by default a server nobody answers at, or one that refuses the request: a model it does not
serve, a prompt over its context; :class:`~paperstack.llm.BackendUnreachableError`,
:class:`~paperstack.llm.BackendHTTPError`, raised after the client's own retries, and
:class:`~paperstack.llm.ContextOverflowError`, the client's own context check) ends the run
with that error, once the round's other calls are back; and with ``context_length`` set, a
call whose prompt (the server's count) plus ``max_new_tokens`` is over it ends the run with an
:class:`~orchestra_rl.errors.OrchestraError` naming both numbers (``transformers serve``
answers such a prompt with an empty reply, not an error). A per-call timeout stays a recorded
failure: a slow call is the agent's, not the setup's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from orchestra_rl.agents import AgentSpec
from orchestra_rl.entropy import TextEmbedder, spectral_entropy
from orchestra_rl.errors import OrchestraError
from orchestra_rl.tasks import Evaluator, Instance, parse_confidence
from orchestra_rl.wire import (
    GRANULARITIES,
    Received,
    build_prompt,
    estimate_tokens,
    render_message,
)
from paperstack.llm import (
    BackendHTTPError,
    BackendTimeoutError,
    BackendUnreachableError,
    ContextOverflowError,
    RuleAgent,
)

__all__ = [
    "CallRecord",
    "Delivery",
    "Episode",
    "Observation",
    "Plan",
    "Policy",
    "Swarm",
    "SwarmConfig",
    "plurality",
]


@dataclass(frozen=True)
class SwarmConfig:
    """``budget``: calls per instance (hard); ``max_rounds``: rounds including round 0;
    ``concurrency``: remote calls in flight at once, for the whole swarm; ``call_timeout``:
    seconds before a remote call is abandoned and counted as a timeout (None: the backend's
    own timeout only); ``batch_size``: instances run in lockstep at once; ``fatal``: the
    exception types that end the run instead of being recorded on the call (see the module
    docstring; ``()`` records everything); ``context_length``: the served model's context in
    tokens, checked on every call with the server's prompt count (None: not checked)."""

    budget: int
    max_rounds: int = 4
    concurrency: int = 8
    call_timeout: float | None = None
    batch_size: int = 512
    fatal: tuple[type[BaseException], ...] = (
        BackendUnreachableError,
        BackendHTTPError,
        ContextOverflowError,
    )
    context_length: int | None = None

    def __post_init__(self) -> None:
        if self.budget < 1:
            raise OrchestraError(f"budget must be >= 1 call per instance, got {self.budget}")
        if self.max_rounds < 1:
            raise OrchestraError(f"max_rounds must be >= 1, got {self.max_rounds}")
        if self.concurrency < 1 or self.batch_size < 1:
            raise OrchestraError("concurrency and batch_size must be >= 1")
        if self.call_timeout is not None and not self.call_timeout > 0:
            raise OrchestraError(f"call_timeout must be > 0 seconds, got {self.call_timeout}")
        if self.context_length is not None and self.context_length < 1:
            raise OrchestraError(f"context_length must be >= 1 token, got {self.context_length}")


@dataclass(frozen=True)
class Delivery:
    """One message: ``sender``'s latest output to ``recipient`` at ``granularity``."""

    sender: int
    recipient: int
    granularity: str = "full"


@dataclass
class Plan:
    """A policy's decision for one episode and round. ``mode``, ``topology`` and ``hub`` are
    what the policy chose (for the trace and the topology tables); the runtime acts on
    ``deliveries``, ``resample`` and ``stop`` only."""

    deliveries: list[Delivery] = field(default_factory=list)
    resample: tuple[int, ...] = ()
    stop: bool = False
    mode: str | None = None
    topology: str | None = None
    hub: int | None = None


@dataclass
class Observation:
    """What a policy sees of one episode before round ``round`` (t >= 1)."""

    instance: Instance
    round: int
    max_rounds: int
    budget: int
    budget_left: int
    outputs: list[str | None]
    answers: list[str | None]
    confidences: list[float | None]
    entropy: float | None = None


@dataclass
class CallRecord:
    """One call in the trace: who was called, what it received from whom, what it said."""

    round: int
    agent: int
    kind: Literal["answer", "update", "resample"]
    received: list[tuple[int, str]]
    text: str | None
    answer: str | None
    confidence: float | None
    prompt_tokens: int
    completion_tokens: int
    estimated: bool
    failure: str | None
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "agent": self.agent,
            "kind": self.kind,
            "from": [[s, g] for s, g in self.received],
            "text": self.text,
            "answer": self.answer,
            "confidence": self.confidence,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "estimated": self.estimated,
            "failure": self.failure,
            "seconds": round(self.seconds, 6),
        }


@dataclass
class Episode:
    """One instance solved by the swarm, with exact accounting and the full trace."""

    instance: Instance
    n_agents: int
    budget: int
    outputs: list[str | None]
    answers: list[str | None]
    confidences: list[float | None]
    samples: list[tuple[int, str]] = field(default_factory=list)  # (agent, answer) per call
    trace: list[CallRecord] = field(default_factory=list)
    plans: list[Plan] = field(default_factory=list)
    entropies: list[float] = field(default_factory=list)
    calls: int = 0
    errors: int = 0
    timeouts: int = 0
    denied: int = 0
    rounds: int = 0
    stopped: bool = False
    final_answer: str | None = None
    score: float = 0.0
    evaluator_error: str | None = None
    evaluator_errors: int = 0

    @property
    def budget_left(self) -> int:
        return self.budget - self.calls

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.trace)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.trace)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def messages(self) -> int:
        return sum(len(c.received) for c in self.trace)

    def to_json(self) -> dict[str, Any]:
        """The per-instance trace: who said what to whom, each round's plan, the accounting."""
        return {
            "instance": self.instance.id,
            "kind": self.instance.kind,
            "n_agents": self.n_agents,
            "budget": self.budget,
            "calls": self.calls,
            "errors": self.errors,
            "timeouts": self.timeouts,
            "denied": self.denied,
            "rounds": self.rounds,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "entropy": [round(h, 6) for h in self.entropies],
            "plans": [
                {
                    "mode": p.mode,
                    "topology": p.topology,
                    "hub": p.hub,
                    "stop": p.stop,
                    "messages": [[d.sender, d.recipient, d.granularity] for d in p.deliveries],
                    "resample": list(p.resample),
                }
                for p in self.plans
            ],
            "calls_trace": [c.to_json() for c in self.trace],
            "final_answer": self.final_answer,
            "score": self.score,
            "evaluator_error": self.evaluator_error,
            "evaluator_errors": self.evaluator_errors,
        }


class Policy(Protocol):
    """A communication policy. ``needs_entropy``: the runtime computes H(t) for it; ``vote``:
    ``"final"`` (plurality of final answers) or ``"all"`` (of every sample)."""

    name: str
    needs_entropy: bool
    vote: str

    def begin(self, episodes: Sequence[Episode], seed: int) -> None:
        """A batch of episodes starts (round 0 is done)."""
        ...

    def plan(self, observations: Sequence[Observation], index: Sequence[int]) -> list[Plan]:
        """One plan per observation; ``index[k]`` is the batch position of observation ``k``."""
        ...


def plurality(answers: Sequence[str | None]) -> str | None:
    """The most frequent answer (None ignored); a tie goes to the first of the tied answers in
    ``answers`` order."""
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, a in enumerate(answers):
        if a is None:
            continue
        counts[a] = counts.get(a, 0) + 1
        first.setdefault(a, i)
    if not counts:
        return None
    return min(counts, key=lambda a: (-counts[a], first[a]))


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "big") >> 1


@dataclass
class _Call:
    episode: int
    agent: int
    kind: Literal["answer", "update", "resample"]
    prompt: list[dict[str, str]]
    received: list[tuple[int, str]]
    seed: int
    text: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False
    failure: str | None = None
    seconds: float = 0.0
    exception: BaseException | None = None


class Swarm:
    """N agents (:class:`AgentSpec`), an evaluator and a :class:`SwarmConfig`.

    ``agents`` is one list for every instance, or a mapping from task kind to a list (the
    same N for every kind): seat ``i`` may hold a different model per kind. ``embedder`` (with
    ``encode``) is needed only by policies that read H(t).
    """

    def __init__(
        self,
        agents: Sequence[AgentSpec] | dict[str, Sequence[AgentSpec]],
        evaluator: Evaluator,
        config: SwarmConfig,
        embedder: TextEmbedder | None = None,
    ) -> None:
        seats: dict[str, list[AgentSpec]] | None = None
        default: list[AgentSpec] | None = None
        if isinstance(agents, dict):
            seats = {k: list(v) for k, v in agents.items()}
        else:
            default = list(agents)
        self._by_kind = seats
        self._default = default
        sizes = (
            {len(v) for v in seats.values()} if seats is not None else {len(self._default or [])}
        )
        if len(sizes) != 1 or 0 in sizes:
            raise OrchestraError(
                f"every task kind needs the same, non-zero number of agents, got {sorted(sizes)}"
            )
        self.n = sizes.pop()
        if config.budget < self.n:
            raise OrchestraError(
                f"budget {config.budget} is below the number of agents {self.n}: every agent "
                "needs one call to answer; raise the budget or use fewer agents"
            )
        self.evaluator = evaluator
        self.config = config
        self.embedder = embedder

    def seats(self, kind: str) -> list[AgentSpec]:
        """The agents that answer instances of ``kind``."""
        if self._by_kind is None:
            assert self._default is not None
            return self._default
        try:
            return self._by_kind[kind]
        except KeyError:
            raise OrchestraError(
                f"no agents for task kind {kind!r} (this swarm has {sorted(self._by_kind)})"
            ) from None

    # ------------------------------------------------------------------ running

    def run(
        self,
        instances: Sequence[Instance],
        policy: Policy,
        seed: int = 0,
        on_batch: Callable[[list[Episode]], None] | None = None,
    ) -> list[Episode]:
        """Solve every instance under ``policy``; returns the episodes in instance order.
        ``on_batch`` is called after each lockstep batch (e.g. a progress bar)."""
        ids = [inst.id for inst in instances]
        if len(set(ids)) != len(ids):
            raise OrchestraError("instance ids must be unique in a run")
        out: list[Episode] = []
        size = self.config.batch_size
        with ThreadPoolExecutor(max_workers=self.config.concurrency) as pool:
            for start in range(0, len(instances), size):
                batch = self._run_batch(instances[start : start + size], policy, seed, pool)
                out.extend(batch)
                if on_batch is not None:
                    on_batch(batch)
        return out

    def _run_batch(
        self, instances: Sequence[Instance], policy: Policy, seed: int, pool: ThreadPoolExecutor
    ) -> list[Episode]:
        n = self.n
        episodes = [
            Episode(inst, n, self.config.budget, [None] * n, [None] * n, [None] * n)
            for inst in instances
        ]
        first = [
            _Call(e, i, "answer", self._prompt(ep, i, []), [], _seed(seed, ep.instance.id, i, 0))
            for e, ep in enumerate(episodes)
            for i in range(n)
        ]
        self._execute(first, episodes, 0, pool)
        policy.begin(episodes, seed)
        for t in range(1, self.config.max_rounds):
            live = [k for k, ep in enumerate(episodes) if not ep.stopped and ep.budget_left > 0]
            if not live:
                break
            observations = [self._observe(episodes[k], t) for k in live]
            if policy.needs_entropy:
                self._entropy(observations)
                for k, obs in zip(live, observations, strict=True):
                    episodes[k].entropies.append(float(obs.entropy or 0.0))
            plans = policy.plan(observations, live)
            if len(plans) != len(live):
                raise OrchestraError(
                    f"policy {policy.name} returned {len(plans)} plans for {len(live)}"
                )
            calls: list[_Call] = []
            for k, plan in zip(live, plans, strict=True):
                ep = episodes[k]
                ep.plans.append(plan)
                calls.extend(self._round_calls(k, ep, plan, t, seed))
            if calls:
                self._execute(calls, episodes, t, pool)
        for ep in episodes:
            self._finish(ep, policy.vote)
        return episodes

    def _observe(self, ep: Episode, t: int) -> Observation:
        return Observation(
            instance=ep.instance,
            round=t,
            max_rounds=self.config.max_rounds,
            budget=ep.budget,
            budget_left=ep.budget_left,
            outputs=list(ep.outputs),
            answers=list(ep.answers),
            confidences=list(ep.confidences),
        )

    def _entropy(self, observations: Sequence[Observation]) -> None:
        if self.embedder is None:
            raise OrchestraError(
                "this policy reads the context entropy H(t): give the swarm an embedder "
                "(orchestra_rl.entropy.CachedEmbedder(paperstack.embed.Embedder()))"
            )
        texts = [o or "" for obs in observations for o in obs.outputs]
        vectors = np.asarray(self.embedder.encode(texts), dtype=np.float64)
        vectors = vectors.reshape(len(observations), self.n, -1)
        empty = np.array([[o is None for o in obs.outputs] for obs in observations])
        vectors[empty] = 0.0  # an agent with no output contributes nothing to the spread
        for obs, h in zip(observations, spectral_entropy(vectors), strict=True):
            obs.entropy = float(h)

    def _round_calls(self, k: int, ep: Episode, plan: Plan, t: int, seed: int) -> list[_Call]:
        n = self.n
        if plan.stop:
            ep.stopped = True
            return []
        inbox: dict[int, list[Delivery]] = {}
        for d in plan.deliveries:
            if not (0 <= d.sender < n and 0 <= d.recipient < n) or d.sender == d.recipient:
                raise OrchestraError(f"bad delivery {d} in a swarm of {n}")
            if d.granularity not in GRANULARITIES:
                raise OrchestraError(f"bad granularity {d.granularity!r}; use {GRANULARITIES}")
            if ep.outputs[d.sender] is not None:
                inbox.setdefault(d.recipient, []).append(d)
        resample = sorted(set(plan.resample) - set(inbox))
        wanted: list[tuple[int, Literal["update", "resample"]]] = [
            (i, "update") for i in sorted(inbox)
        ]
        wanted += [(i, "resample") for i in resample]
        if not wanted:
            ep.stopped = True  # nothing to say: the swarm has settled
            return []
        left = ep.budget_left
        if len(wanted) > left:
            rng = np.random.default_rng(_seed(seed, ep.instance.id, t, "grant"))
            keep = sorted(rng.permutation(len(wanted))[:left].tolist())
            ep.denied += len(wanted) - left
            wanted = [wanted[j] for j in keep]
        calls = []
        for agent, kind in wanted:
            deliveries = inbox.get(agent, [])
            received = [
                Received(
                    d.sender,
                    d.granularity,
                    render_message(
                        ep.outputs[d.sender] or "",
                        ep.answers[d.sender],
                        ep.confidences[d.sender],
                        d.granularity,
                    ),
                )
                for d in sorted(deliveries, key=lambda d: d.sender)
            ]
            prompt = self._prompt(ep, agent, received, fresh=kind == "resample")
            call_seed = _seed(seed, ep.instance.id, agent, t, kind)
            calls.append(
                _Call(k, agent, kind, prompt, [(m.sender, m.granularity) for m in received],
                      call_seed)
            )  # fmt: skip
        return calls

    def _prompt(
        self, ep: Episode, agent: int, received: list[Received], fresh: bool = False
    ) -> list[dict[str, str]]:
        spec = self.seats(ep.instance.kind)[agent]
        previous = None if fresh else ep.outputs[agent]
        return build_prompt(ep.instance.prompt, previous, received, bare=spec.bare)

    # ------------------------------------------------------------------ calls

    def _execute(
        self, calls: list[_Call], episodes: list[Episode], t: int, pool: ThreadPoolExecutor
    ) -> None:
        groups: dict[tuple[int, float, int, bool], tuple[AgentSpec, list[_Call]]] = {}
        for call in calls:
            spec = self.seats(episodes[call.episode].instance.kind)[call.agent]
            key = (id(spec.model), spec.temperature, spec.max_new_tokens, spec.bare)
            groups.setdefault(key, (spec, []))[1].append(call)
        remote: list[tuple[AgentSpec, _Call]] = []
        for spec, group in groups.values():
            if isinstance(spec.model, RuleAgent):
                for call in group:
                    self._one(spec, call)
            elif _is_local_batchable(spec.model):
                self._batched(spec, group, _seed(t, spec.name, len(group)))
            else:
                remote.extend((spec, call) for call in group)
        if remote:
            self._remote(remote, pool)
        self._check_fatal(calls, episodes, t)
        for call in calls:
            ep = episodes[call.episode]
            ep.calls += 1
            answer = confidence = None
            if call.failure is None and call.text is not None:
                answer = self._extract(ep, call.text)
                confidence = parse_confidence(call.text)
                ep.outputs[call.agent] = call.text
                ep.answers[call.agent] = answer
                ep.confidences[call.agent] = confidence
                if answer is not None:
                    ep.samples.append((call.agent, answer))
            elif call.failure is not None and call.failure.startswith("timeout"):
                ep.timeouts += 1
            else:
                ep.errors += 1
            ep.rounds = max(ep.rounds, t + 1)
            ep.trace.append(
                CallRecord(
                    round=t, agent=call.agent, kind=call.kind, received=call.received,
                    text=call.text, answer=answer, confidence=confidence,
                    prompt_tokens=call.prompt_tokens, completion_tokens=call.completion_tokens,
                    estimated=call.estimated, failure=call.failure, seconds=call.seconds,
                )
            )  # fmt: skip

    def _check_fatal(self, calls: list[_Call], episodes: list[Episode], t: int) -> None:
        """End the run on a setup failure (see the module docstring): the first call, in
        issue order, that raised a ``fatal`` exception or went over ``context_length``."""
        limit = self.config.context_length
        for call in calls:
            spec = self.seats(episodes[call.episode].instance.kind)[call.agent]
            exc = call.exception
            if exc is not None and self.config.fatal and isinstance(exc, self.config.fatal):
                raise exc
            if limit is None or call.failure is not None or call.estimated:
                continue
            if call.prompt_tokens + spec.max_new_tokens > limit:
                where = episodes[call.episode].instance.id
                raise OrchestraError(
                    f"{spec.name} on {where} (round {t}): a "
                    f"prompt of {call.prompt_tokens} tokens plus up to {spec.max_new_tokens} "
                    f"new ones is over the model's context of {limit} tokens; lower "
                    "--max-new-tokens, --agents or --rounds, or serve a longer context"
                )

    def _extract(self, ep: Episode, text: str) -> str | None:
        try:
            return self.evaluator.extract(ep.instance, text)
        except Exception as exc:  # a user's evaluator: a failure to record, not a crash
            ep.evaluator_errors += 1
            if ep.evaluator_error is None:
                ep.evaluator_error = f"extract: {_describe(exc)}"
            return None

    @staticmethod
    def _account(call: _Call, reply: Any) -> None:
        text = str(reply)
        call.text = text
        prompt_tokens = getattr(reply, "prompt_tokens", None)
        completion_tokens = getattr(reply, "completion_tokens", None)
        if isinstance(prompt_tokens, int) and isinstance(completion_tokens, int):
            call.prompt_tokens, call.completion_tokens = prompt_tokens, completion_tokens
        else:
            call.prompt_tokens = estimate_tokens(call.prompt[-1]["content"])
            call.completion_tokens = estimate_tokens(text)
            call.estimated = True

    def _one(self, spec: AgentSpec, call: _Call) -> None:
        started = time.perf_counter()
        try:
            reply = spec.model.generate(
                [call.prompt], max_new_tokens=spec.max_new_tokens,
                temperature=spec.temperature, seed=call.seed if spec.seeded else None,
            )[0][0]  # fmt: skip
            self._account(call, reply)
        except Exception as exc:  # the agent's failure, unless _check_fatal says it is fatal
            call.failure = _failure(exc)
            call.exception = exc
        call.seconds = time.perf_counter() - started

    def _batched(self, spec: AgentSpec, group: list[_Call], seed: int) -> None:
        started = time.perf_counter()
        try:
            replies = spec.model.generate(
                [c.prompt for c in group], max_new_tokens=spec.max_new_tokens,
                temperature=spec.temperature, seed=seed,
            )  # fmt: skip
        except Exception:
            for call in group:  # isolate the failing prompt(s): one call each
                self._one(spec, call)
            return
        per = (time.perf_counter() - started) / max(1, len(group))
        for call, reply in zip(group, replies, strict=True):
            self._account(call, reply[0])
            call.seconds = per

    def _remote(self, calls: list[tuple[AgentSpec, _Call]], pool: ThreadPoolExecutor) -> None:
        """One request per call on the shared pool. A call past ``call_timeout`` is abandoned:
        its worker writes into a private copy, so a late answer never reaches the episode."""
        starts: dict[int, float] = {}

        def work(j: int) -> _Call:
            spec, call = calls[j]
            starts[j] = time.perf_counter()
            mine = dataclasses.replace(call)
            self._one(spec, mine)
            return mine

        futures: dict[Future[_Call], int] = {pool.submit(work, j): j for j in range(len(calls))}
        timeout = self.config.call_timeout
        pending = set(futures)
        while pending:
            done, pending = wait_futures(pending, timeout=0.05 if timeout else None)
            for fut in done:
                result = fut.result()
                call = calls[futures[fut]][1]
                call.text, call.failure = result.text, result.failure
                call.prompt_tokens, call.completion_tokens = (
                    result.prompt_tokens, result.completion_tokens,
                )  # fmt: skip
                call.estimated, call.seconds = result.estimated, result.seconds
                call.exception = result.exception
            if timeout is None:
                continue
            now = time.perf_counter()
            for fut in list(pending):
                j = futures[fut]
                if j in starts and now - starts[j] > timeout:
                    pending.discard(fut)
                    call = calls[j][1]
                    call.failure = f"timeout: no answer within {timeout:g} s"
                    call.seconds = now - starts[j]

    # ------------------------------------------------------------------ answer

    def _finish(self, ep: Episode, vote: str) -> None:
        if vote == "all":
            ep.final_answer = plurality([a for _, a in ep.samples])
        else:
            ep.final_answer = plurality(ep.answers)
        try:
            ep.score = float(self.evaluator.score(ep.instance, ep.final_answer))
        except Exception as exc:  # a user's harness failing on one instance is recorded
            ep.score = 0.0
            ep.evaluator_errors += 1
            ep.evaluator_error = ep.evaluator_error or f"score: {_describe(exc)}"


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def _failure(exc: Exception) -> str:
    if isinstance(exc, (BackendTimeoutError, TimeoutError)):
        return f"timeout: {' '.join(str(exc).split())[:200]}"
    return f"error: {_describe(exc)}"


def _is_local_batchable(model: Any) -> bool:
    """A local transformers model: one batched generate per round beats many small ones."""
    try:
        from paperstack.llm import TransformersChat
    except ImportError:  # pragma: no cover
        return False
    return isinstance(model, TransformersChat)

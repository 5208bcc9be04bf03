"""Running homogeneous debates of one model over any paperstack ChatModel, exactly, into a ledger.

One *population* = one model of one family playing all A agents, over a question set, one
debate per question per seed. Rounds run in lockstep: all pending calls of round r, then round
r + 1. The runner is exact about what it sends:

- **one call per row, one seed per call**: ``seed = H(run seed, question, agent, round,
  sample)``, sent with the call (``generate([prompt], seed=...)``), so an answer depends on what
  the call is, never on which other calls are pending or in what batch it went: a resumed run
  asks exactly what the uninterrupted run would have asked and gets the same answers from a
  backend that honours seeds (local transformers models, vLLM, ``transformers serve``);
- **no labels in prompts**: the debate id, family and model names never reach the model
  (:mod:`debate_ledger.prompts`);
- **shuffled options**: each debate shows the options in an order drawn from (seed, question),
  the same for every agent of the debate (they quote each other's letters) and for every model
  (paired across models); the coder reads the shown letter and the row stores both it and the
  canonical option it names;
- **one retry layer, one concurrency limit**: the backend's own (core 0.2 ``OpenAIChat``). The
  runner keeps ``concurrency`` calls in flight for a backend that has that attribute and one
  otherwise, and never retries: a failed call ends the run with one line, and rerunning the
  same command resumes from the ledger;
- **what the server said**: each row holds the server's token counts and finish reason when the
  backend reports them (``tokens_source``), its own wall time, and the seed;
- **a run-config hash**: every row carries :func:`config_hash` of the protocol (agents, rounds,
  resamples, prompts, coder, sampling, shuffling, run seed); resuming a population under another
  configuration, or mixing configurations in one population, is refused with the differing
  fields named (they are kept beside the ledger in ``<ledger>.runs.json``).

A killed run loses at most the calls in flight: rows are appended (flushed) in call order as
they return and the file is fsynced every :data:`SYNC_EVERY` rows; rerunning the same command
reads the ledger back, skips every row already there and continues.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from debate_ledger.coders import DEFAULT_CODER, code_answer, get_coder
from debate_ledger.prompts import CHAT_PROMPTS, DebatePrompts
from debate_ledger.schemas import (
    LETTERS,
    LedgerError,
    LedgerRow,
    LedgerWriter,
    Question,
    TokenSource,
)
from paperstack.llm import ChatModel, Completion, CostLedger
from paperstack.llm.base import BackendError
from paperstack.records import atomic_write_json

__all__ = [
    "DebateConfig",
    "RunResult",
    "call_seed",
    "config_hash",
    "debate_id",
    "option_order",
    "run_debates",
    "runs_path",
]

SYNC_EVERY = 64
_SEED_MOD = 2**31  # servers take seeds as (signed) 32- or 64-bit integers


@dataclass(frozen=True)
class DebateConfig:
    """A homogeneous debate protocol. ``rounds`` counts rounds after round 0 (Du et al. use 3
    agents and 2 rounds). ``seeds``: one debate per question per seed. ``resamples`` extra
    independent round-0 answers per agent: the screen's self-consistency probe and, with
    ``resamples == rounds``, a majority vote over exactly as many calls as the debate made.
    The defaults suit a real chat model (a final ``ANSWER: X`` line, a few hundred tokens)."""

    agents: int = 3
    rounds: int = 2
    seeds: tuple[int, ...] = (0,)
    resamples: int = 0
    prompts: DebatePrompts = field(default_factory=lambda: CHAT_PROMPTS)
    coder: str = DEFAULT_CODER
    max_new_tokens: int = 512
    temperature: float = 0.7
    top_p: float = 1.0
    stop: tuple[str, ...] | None = None
    shuffle: bool = True

    def __post_init__(self) -> None:
        if self.agents < 2:
            raise LedgerError(f"a debate needs at least 2 agents, got {self.agents}")
        if self.rounds < 1:
            raise LedgerError(f"a debate needs at least 1 round after round 0, got {self.rounds}")
        if not self.seeds:
            raise LedgerError("seeds: at least one seed")
        if len(set(self.seeds)) != len(self.seeds) or any(s < 0 for s in self.seeds):
            raise LedgerError(f"seeds must be distinct and >= 0, got {list(self.seeds)}")
        if self.resamples < 0:
            raise LedgerError(f"resamples must be >= 0, got {self.resamples}")
        if self.max_new_tokens < 1:
            raise LedgerError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not 0.0 <= self.temperature <= 2.0:
            raise LedgerError(f"temperature must be in [0, 2], got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise LedgerError(f"top_p must be in (0, 1], got {self.top_p}")
        get_coder(self.coder)

    def protocol(self) -> dict[str, Any]:
        """What :func:`config_hash` covers: everything that changes how one debate runs (not
        which seeds or questions are debated, so a run can be extended with more of either)."""
        return {
            "agents": self.agents,
            "rounds": self.rounds,
            "resamples": self.resamples,
            "prompts": self.prompts.to_json(),
            "coder": self.coder,
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "stop": list(self.stop) if self.stop else None,
            "shuffle": self.shuffle,
        }


def config_hash(cfg: DebateConfig) -> str:
    """12 hex digits of sha256 over :meth:`DebateConfig.protocol` (canonical JSON)."""
    blob = json.dumps(cfg.protocol(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _digest(*parts: object) -> int:
    blob = "|".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big")


def call_seed(seed: int, question_id: str, agent: int, round: int, sample: int) -> int:
    """The seed sent with one call: a function of what the call is, nothing else."""
    return _digest("debate-ledger/call", seed, question_id, agent, round, sample) % _SEED_MOD


def option_order(seed: int, question: Question, shuffle: bool = True) -> str:
    """The option order of the debate of ``question`` under ``seed`` (``order[i]`` = the
    canonical letter shown at position ``i``); the identity when ``shuffle`` is off."""
    letters = list(question.letters)
    if shuffle:
        random.Random(_digest("debate-ledger/order", seed, question.id)).shuffle(letters)
    return "".join(letters)


def debate_id(family: str, model: str, question_id: str, seed: int) -> str:
    return f"{family}/{model}/{question_id}/s{seed}"


def runs_path(ledger: str | os.PathLike[str]) -> Path:
    """``<ledger>.runs.json``: run hash -> the configuration it stands for."""
    p = Path(ledger)
    return p.with_name(p.name + ".runs.json")


def _read_runs(ledger: Path) -> dict[str, Any]:
    path = runs_path(ledger)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise LedgerError(f"{path}: not a readable run table ({exc})") from None
    return data if isinstance(data, dict) else {}


def _differences(old: dict[str, Any], new: dict[str, Any]) -> str:
    fields = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    shown = []
    for k in fields:
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) or isinstance(b, dict):
            shown.append(f"{k} differ")
        else:
            shown.append(f"{k} {a!r} -> {b!r}")
    return ", ".join(shown) or "no field differs (the run table is stale)"


@dataclass(frozen=True)
class _Call:
    question: Question
    debate_id: str
    order: str
    agent: int
    round: int
    sample: int
    seed: int
    messages: list[dict[str, Any]]


@dataclass
class RunResult:
    """What :func:`run_debates` did: the population's rows (sorted by key), how many it wrote
    now, and what the calls it made cost (the backend's own ledger when it keeps one)."""

    rows: list[LedgerRow]
    written: int
    run: str
    cost: CostLedger
    seconds: float


def run_debates(
    model: ChatModel,
    questions: Sequence[Question],
    ledger: str | os.PathLike[str],
    *,
    family: str,
    config: DebateConfig | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Run (or resume) one model's debates on ``questions`` into ``ledger``."""
    cfg = config or DebateConfig()
    started = time.perf_counter()
    if not family.strip() or "/" in family:
        raise LedgerError(f"family {family!r}: a non-empty name without '/'")
    if not questions:
        raise LedgerError("no questions to debate")
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise LedgerError("question ids must be unique")
    model_name = str(getattr(model, "name", type(model).__name__))
    run = config_hash(cfg)
    path = Path(ledger)
    backend_ledger = getattr(model, "ledger", None)
    cost = backend_ledger if isinstance(backend_ledger, CostLedger) else CostLedger()
    own_cost = cost is not backend_ledger
    with LedgerWriter(path) as writer:
        rows = _check_population(path, writer.rows, family, model_name, run, cfg, questions)
        _record_run(path, run, cfg)
        debates = [
            (debate_id(family, model_name, q.id, s), q, s, option_order(s, q, cfg.shuffle))
            for q in questions
            for s in cfg.seeds
        ]
        total = len(debates) * cfg.agents * (cfg.rounds + 1 + cfg.resamples)
        before = len(rows)
        if progress is not None:
            progress(len(rows), total)
        for rnd in range(cfg.rounds + 1):
            calls = [
                _make_call(cfg, q, did, s, order, agent, rnd, sample, rows)
                for did, q, s, order in debates
                for agent in range(cfg.agents)
                for sample in (range(cfg.resamples + 1) if rnd == 0 else range(1))
                if (did, agent, rnd, sample) not in rows
            ]
            _run_calls(
                model, model_name, family, run, cfg, calls, writer, rows,
                cost if own_cost else None,
                lambda: progress(len(rows), total) if progress is not None else None,
            )  # fmt: skip
        population = sorted(rows.values(), key=lambda r: r.key)
        return RunResult(population, len(rows) - before, run, cost, time.perf_counter() - started)


def _check_population(
    path: Path,
    existing: Sequence[LedgerRow],
    family: str,
    model_name: str,
    run: str,
    cfg: DebateConfig,
    questions: Sequence[Question],
) -> dict[tuple[str, int, int, int], LedgerRow]:
    """The population's rows already in the ledger, after checking they can be resumed."""
    rows: dict[tuple[str, int, int, int], LedgerRow] = {}
    by_id = {q.id: q for q in questions}
    runs = _read_runs(path)
    for r in existing:
        if r.model == model_name and r.family != family:
            raise LedgerError(
                f"{path}: model {model_name!r} is in family {r.family!r} in this ledger, not "
                f"{family!r} (a model belongs to one family)"
            )
        if r.population != (family, model_name):
            continue
        if r.run != run:
            old = runs.get(r.run)
            why = _differences(old, cfg.protocol()) if isinstance(old, dict) else "unknown"
            raise LedgerError(
                f"{path}: family {family} model {model_name} was run with configuration "
                f"{r.run}, not {run} ({why}); use another ledger, or the original settings to "
                "resume"
            )
        q = by_id.get(r.question_id)
        if q is not None and (r.gold != q.gold or r.n_options != len(q.options)):
            raise LedgerError(
                f"{path}: question {q.id} changed since it was debated (gold {r.gold!r} with "
                f"{r.n_options} options in the ledger, {q.gold!r} with {len(q.options)} now)"
            )
        rows[r.key] = r
    return rows


def _record_run(path: Path, run: str, cfg: DebateConfig) -> None:
    runs = _read_runs(path)
    if runs.get(run) != cfg.protocol():
        runs[run] = cfg.protocol()
        atomic_write_json(runs_path(path), dict(sorted(runs.items())))


def _make_call(
    cfg: DebateConfig,
    q: Question,
    did: str,
    seed: int,
    order: str,
    agent: int,
    rnd: int,
    sample: int,
    rows: dict[tuple[str, int, int, int], LedgerRow],
) -> _Call:
    own, others = "", []
    if rnd > 0:
        prev = [rows[(did, a, rnd - 1, 0)] for a in range(cfg.agents)]
        own = prev[agent].response
        for a, row in enumerate(prev):
            if a == agent:
                continue
            if cfg.prompts.visibility == "answers":
                shown = f"({row.shown})" if row.shown is not None else "(no answer)"
            else:
                shown = row.response
            others.append((a, shown))
    messages = cfg.prompts.render(
        q, order=order, agent=agent, agents=cfg.agents, round=rnd, own=own, others=others
    )
    s = call_seed(seed, q.id, agent, rnd, sample)
    return _Call(q, did, order, agent, rnd, sample, s, messages)


def _count(model: Any, text: str) -> tuple[int, bool]:
    tok = getattr(model, "tokenizer", None)
    if tok is not None and hasattr(tok, "encode"):
        return len(tok.encode(text, add_special_tokens=False)), True
    return len(text.split()), False


def _tokens(model: Any, call: _Call, text: str) -> tuple[int, int, TokenSource]:
    """The call's (tokens in, tokens out, source): the backend's usage when it reported it (a
    server's, or a local model's tokenizer counts), else the tokenizer, else words."""
    if isinstance(text, Completion) and None not in (text.prompt_tokens, text.completion_tokens):
        source: TokenSource = "server" if getattr(model, "base_url", None) else "tokenizer"
        return int(text.prompt_tokens or 0), int(text.completion_tokens or 0), source
    prompt_text = "\n".join(str(m["content"]) for m in call.messages)
    t_in, tokenized = _count(model, prompt_text)
    t_out, _ = _count(model, text)
    return t_in, t_out, "tokenizer" if tokenized else "words"


def _run_calls(
    model: ChatModel,
    model_name: str,
    family: str,
    run: str,
    cfg: DebateConfig,
    calls: list[_Call],
    writer: LedgerWriter,
    rows: dict[tuple[str, int, int, int], LedgerRow],
    cost: CostLedger | None,
    tick: Callable[[], object],
) -> None:
    if not calls:
        return

    def one(call: _Call) -> tuple[str, float]:
        t0 = time.perf_counter()
        out = model.generate(
            [call.messages],
            max_new_tokens=cfg.max_new_tokens,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            seed=call.seed,
            stop=list(cfg.stop) if cfg.stop else None,
        )
        if len(out) != 1 or len(out[0]) < 1:
            raise LedgerError(f"{model_name}: returned {len(out)} answers for one prompt")
        return out[0][0], time.perf_counter() - t0

    workers = max(1, int(getattr(model, "concurrency", 1) or 1))
    unsynced = 0

    def keep(call: _Call, text: str, seconds: float) -> None:
        nonlocal unsynced
        row = _row(model, model_name, family, run, cfg, call, text, seconds)
        if cost is not None:
            cost.record(model=model_name, prompt_tokens=row.tokens_in,
                        completion_tokens=row.tokens_out, retries=0, seconds=seconds)  # fmt: skip
        writer.write(row)
        rows[row.key] = row
        unsynced += 1
        if unsynced >= SYNC_EVERY:
            writer.sync()
            unsynced = 0
        tick()

    # A window of ``workers`` calls in flight, written in call order: after a failure no new
    # call is sent (a dead server is not asked once per pending call).
    pending: deque[tuple[_Call, Future[tuple[str, float]]]] = deque()
    queue = iter(calls)
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            try:
                for call in queue:
                    pending.append((call, pool.submit(one, call)))
                    if len(pending) >= workers:
                        done_call, fut = pending.popleft()
                        keep(done_call, *fut.result())
                while pending:
                    done_call, fut = pending.popleft()
                    keep(done_call, *fut.result())
            finally:
                for _, fut in pending:
                    fut.cancel()
    except BackendError as exc:
        writer.sync()
        raise LedgerError(
            f"{model_name}: a model call failed ({exc}); the rows before it are in "
            f"{writer.path}: rerun the same command to resume"
        ) from None
    finally:
        writer.sync()


def _row(
    model: ChatModel,
    model_name: str,
    family: str,
    run: str,
    cfg: DebateConfig,
    call: _Call,
    text: str,
    seconds: float,
) -> LedgerRow:
    q = call.question
    n = len(q.options)
    options = [q.options[q.letters.index(o)] for o in call.order]  # as this agent saw them
    shown = code_answer(text, n, cfg.coder, options)
    answer = None if shown is None else call.order[LETTERS.index(shown)]
    t_in, t_out, source = _tokens(model, call, text)
    return LedgerRow(
        run=run,
        debate_id=call.debate_id,
        question_id=q.id,
        family=family,
        model=model_name,
        agent=call.agent,
        round=call.round,
        sample=call.sample,
        seed=call.seed,
        n_options=n,
        gold=q.gold,
        order=call.order,
        shown=shown,
        answer=answer,
        parsed_ok=answer is not None,
        correct=answer == q.gold,
        coder=cfg.coder,
        response=str(text),
        finish_reason=getattr(text, "finish_reason", None),
        tokens_in=t_in,
        tokens_out=t_out,
        tokens_source=source,
        latency_s=round(seconds, 6),
    )

"""Running homogeneous debates over any paperstack ChatModel, resumably, into a ledger.

One family = one model playing all A agents. Rounds run in lockstep over all debates: every
pending (debate, agent) prompt of round r is batched into ``generate`` calls (``batch_size``
prompts each, ``concurrency`` calls in flight, which is what an HTTP server such as vLLM wants),
and each row is appended to the ledger as soon as its batch returns. A killed run loses at most
the batches in flight; rerunning the same command reads the ledger back, skips every row already
there and continues (the ledger writer refuses duplicate keys, so a resume cannot double-count).

Each row records its tokens (from the backend's tokenizer when it has one, else
whitespace-separated words, flagged ``tokens_estimated``) and its latency (the batch's wall time
divided by the batch size: the amortised cost per call).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from debate_ledger.coders import DEFAULT_CODER, code_answer, get_coder
from debate_ledger.prompts import DebatePrompts
from debate_ledger.schemas import LedgerError, LedgerRow, LedgerWriter, Question
from paperstack.llm import ChatModel
from paperstack.llm.base import BackendError

__all__ = ["DebateConfig", "count_tokens", "run_debates"]


@dataclass(frozen=True)
class DebateConfig:
    """A homogeneous debate protocol. ``rounds`` counts rounds after round 0 (Du et al. use 3
    agents and 2 rounds). ``resamples`` extra independent round-0 answers per agent feed the
    screen's self-consistency probe. ``repeats`` debates per question (different debate ids)."""

    agents: int = 3
    rounds: int = 2
    repeats: int = 1
    resamples: int = 0
    prompts: DebatePrompts = field(default_factory=DebatePrompts)
    coder: str = DEFAULT_CODER
    max_new_tokens: int = 64
    temperature: float = 0.7
    top_p: float = 1.0
    seed: int = 0
    batch_size: int = 32
    concurrency: int = 1
    retries: int = 3
    retry_wait_s: float = 0.5

    def __post_init__(self) -> None:
        if self.agents < 2:
            raise LedgerError(f"a debate needs at least 2 agents, got {self.agents}")
        if self.rounds < 1:
            raise LedgerError(f"a debate needs at least 1 round after round 0, got {self.rounds}")
        for name in ("repeats", "batch_size", "concurrency"):
            if getattr(self, name) < 1:
                raise LedgerError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.resamples < 0 or self.retries < 0:
            raise LedgerError("resamples and retries must be >= 0")
        get_coder(self.coder)


def count_tokens(model: Any, text: str) -> tuple[int, bool]:
    """(tokens, estimated): the backend tokenizer's count when it has one, else words."""
    tok = getattr(model, "tokenizer", None)
    if tok is not None and hasattr(tok, "encode"):
        return len(tok.encode(text, add_special_tokens=False)), False
    return len(text.split()), True


@dataclass(frozen=True)
class _Call:
    question: Question
    debate_id: str
    agent: int
    round: int
    sample: int
    messages: list[dict[str, Any]]


def run_debates(
    model: ChatModel,
    questions: Sequence[Question],
    ledger: str | os.PathLike[str],
    *,
    family: str,
    config: DebateConfig | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[LedgerRow]:
    """Run (or resume) one family's debates on ``questions``; returns the family's rows."""
    cfg = config or DebateConfig()
    if not questions:
        raise LedgerError("no questions to debate")
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise LedgerError("question ids must be unique")
    model_name = str(getattr(model, "name", type(model).__name__))
    debates = [
        (f"{family}/{q.id}/{rep}", q) for q in questions for rep in range(cfg.repeats)
    ]  # debate ids are stable, so a resumed run finds its rows
    with LedgerWriter(ledger) as writer:
        rows = {r.key: r for r in writer.rows if r.family == family}
        for r in rows.values():
            if r.model != model_name:
                raise LedgerError(
                    f"{ledger}: family {family} was run with model {r.model!r}, not "
                    f"{model_name!r}; use another family name"
                )
        total = len(debates) * cfg.agents * (cfg.rounds + 1 + cfg.resamples)
        done = [len(rows)]
        for rnd in range(cfg.rounds + 1):
            calls: list[_Call] = []
            for debate_id, q in debates:
                for agent in range(cfg.agents):
                    samples = range(cfg.resamples + 1) if rnd == 0 else range(1)
                    for sample in samples:
                        if (debate_id, agent, rnd, sample) in rows:
                            continue
                        calls.append(_make_call(cfg, q, debate_id, agent, rnd, sample, rows))
            _run_calls(model, model_name, family, cfg, calls, writer, rows, rnd)
            if progress is not None:
                done[0] = len(rows)
                progress(done[0], total)
        return sorted(rows.values(), key=lambda r: r.key)


def _make_call(
    cfg: DebateConfig,
    q: Question,
    debate_id: str,
    agent: int,
    rnd: int,
    sample: int,
    rows: dict[tuple[str, int, int, int], LedgerRow],
) -> _Call:
    own, others = "", []
    if rnd > 0:
        prev = [rows[(debate_id, a, rnd - 1, 0)] for a in range(cfg.agents)]
        own = prev[agent].response
        for a, row in enumerate(prev):
            if a == agent:
                continue
            if cfg.prompts.visibility == "answers":
                shown = f"({row.answer})" if row.answer is not None else "(no answer)"
            else:
                shown = row.response.replace("\n", " ")
            others.append((a, shown))
    messages = cfg.prompts.render(
        q,
        debate_id=debate_id,
        agent=agent,
        agents=cfg.agents,
        round=rnd,
        own=own,
        others=others,
        sample=sample,
    )
    return _Call(q, debate_id, agent, rnd, sample, messages)


def _generate(model: ChatModel, cfg: DebateConfig, batch: list[_Call], seed: int) -> list[str]:
    prompts: list[Any] = [c.messages for c in batch]
    for attempt in range(cfg.retries + 1):
        try:
            out = model.generate(
                prompts,
                max_new_tokens=cfg.max_new_tokens,
                temperature=cfg.temperature,
                top_p=cfg.top_p,
                seed=seed,
            )
            break
        except BackendError as exc:
            if attempt == cfg.retries:
                raise LedgerError(
                    f"model call failed after {cfg.retries + 1} attempts ({exc}); rerun the same "
                    "command to resume from the ledger"
                ) from None
            time.sleep(cfg.retry_wait_s * 2**attempt)
    if len(out) != len(batch) or any(len(x) < 1 for x in out):
        raise LedgerError(
            f"{getattr(model, 'name', 'model')}: returned the wrong number of answers"
        )
    return [x[0] for x in out]


def _run_calls(
    model: ChatModel,
    model_name: str,
    family: str,
    cfg: DebateConfig,
    calls: list[_Call],
    writer: LedgerWriter,
    rows: dict[tuple[str, int, int, int], LedgerRow],
    rnd: int,
) -> None:
    if not calls:
        return
    batches = [calls[i : i + cfg.batch_size] for i in range(0, len(calls), cfg.batch_size)]

    def work(i: int) -> tuple[list[_Call], list[str], float]:
        t0 = time.perf_counter()
        texts = _generate(model, cfg, batches[i], seed=cfg.seed * 1_000_003 + rnd * 10_007 + i)
        return batches[i], texts, time.perf_counter() - t0

    with ThreadPoolExecutor(max_workers=cfg.concurrency) as pool:
        for batch, texts, seconds in pool.map(work, range(len(batches))):
            for call, text in zip(batch, texts, strict=True):
                q = call.question
                answer = code_answer(text, len(q.options), cfg.coder)
                prompt_text = "\n".join(str(m["content"]) for m in call.messages)
                t_in, est_in = count_tokens(model, prompt_text)
                t_out, est_out = count_tokens(model, text)
                row = LedgerRow(
                    debate_id=call.debate_id,
                    question_id=q.id,
                    family=family,
                    model=model_name,
                    agent=call.agent,
                    round=call.round,
                    sample=call.sample,
                    n_options=len(q.options),
                    gold=q.gold,
                    answer=answer,
                    parsed_ok=answer is not None,
                    correct=answer == q.gold,
                    coder=cfg.coder,
                    response=text,
                    tokens_in=t_in,
                    tokens_out=t_out,
                    tokens_estimated=est_in or est_out,
                    latency_s=round(seconds / len(batch), 6),
                )
                writer.write(row)
                rows[row.key] = row
            writer.sync()  # one fsync per batch: a killed run keeps every finished batch

"""``debate-ledger demo --real``: debates of served SmolLM2-135M-Instruct agents.

The toy demo's families are scripted, so whether debate collapses or corrects is set by their
parameters. Here every agent is the same real instruct model behind an OpenAI-compatible server,
through the core's :func:`paperstack.llm.serve.served`: the running server named by
``PAPERSTACK_SERVED_BASE_URL`` (one ``vllm serve`` shared by several runs), else ``vllm serve``
started for the run, else ``transformers serve`` of a copy whose generation config samples. The
server's sampling is checked first (four samples of one prompt): a server that ignores
temperature is refused in one line, since the agents and resamples need independent draws.

Design, fixed before any reported run (:data:`REAL`): the first 8 shipped MCQs and 4 generated
fact-world MCQs (4 options, shuffled per debate), run with ``--seeds 0`` (one seed: the
families are the replicates and the questions the clustering unit; every seed costs about 20
minutes on the shared CPU server); 3 agents, rounds 0..2, 2 round-0 resamples
per agent (the majority vote makes as many calls as the debate); the chat prompts with a final
``ANSWER: X`` line, coded by ``letter-v3``; one debate per question per seed. The *families* of
the screen are the debate scaffolds crossed with the sampling temperatures (what the others'
turns show: their full replies, Du et al., or only their letters; temperature 0.7 or 1.0):
one model, four ways of debating it, G = 4. Each family is one ledger ``model``
(``<served model>@<family>``), so the gate is fit leave-one-family-out.

Claims: the premise first, measured on these agents (collapses and corrections both occur);
the paper's claims on it (the probe-gated freeze's utility < 0, the screen's rho and partial
rho > 0) are gated on the premise; debate against the call-matched vote, and the coder's
reading of real replies (letter-v3 against letter-v2 and the strict coder, on the same rows).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from debate_ledger.schemas import LedgerError, LedgerRow, Question
from paperstack.contract import Report, Run
from paperstack.errors import PaperstackError

__all__ = ["REAL", "REAL_QUICK", "RealConfig", "run_real", "served_smollm2"]

MODEL = "smollm2-135m-instruct"


@dataclass(frozen=True)
class RealConfig:
    """The real arm's budget and protocol (see the module docstring)."""

    n_mcq: int = 40
    n_facts: int = 0
    scaffolds: tuple[str, ...] = ("all", "answers")
    temperatures: tuple[float, ...] = (0.7, 1.0)
    agents: int = 3
    rounds: int = 2
    resamples: int = 2
    max_new_tokens: int = 64
    concurrency: int = 16
    timeout: float = 600.0
    #: retries per request (exponential backoff capped at 30 s: about 4 minutes in all), so a
    #: restart of the shared server during the run costs time, not the run
    max_retries: int = 12

    def families(self) -> list[tuple[str, str, float]]:
        """(family name, visibility, temperature) of each family, in a fixed order."""
        return [(f"{v}-t{t:g}", v, t) for v in self.scaffolds for t in self.temperatures]


#: The reported arm's budget, fixed before the run from a timed slice on validation seed 100
#: (16 shipped MCQs, one family: about 0.7 calls/s on the shared ``vllm serve`` under load):
#: 8 shipped + 4 generated MCQs x 4 families x 15 calls = 720 calls per seed, about 20 min.
REAL = RealConfig(n_mcq=8, n_facts=4)
#: ``--quick``: the tests' tiny budget (one question, 8 new tokens, the four families).
REAL_QUICK = RealConfig(n_mcq=1, n_facts=0, max_new_tokens=8, concurrency=8, timeout=120.0,
                        max_retries=2)  # fmt: skip

AUDIT = ("letter-v2", "strict-final-v1")


class _Named:
    """A chat backend under another name: the ledger's ``model`` of one family (the runner
    names a population by its backend's ``name``), everything else the served client's."""

    def __init__(self, inner: Any, name: str) -> None:
        self._inner = inner
        self.name = name

    def __getattr__(self, key: str) -> Any:
        return getattr(self._inner, key)


@contextmanager
def served_smollm2(workdir: Path) -> Iterator[Any]:
    """SmolLM2-135M-Instruct served on 127.0.0.1 for the block (the core's ``served``): the
    running server of ``PAPERSTACK_SERVED_BASE_URL`` if set (its model is not converted then:
    only its name is checked), else a server started for the run."""
    from paperstack.llm.serve import served

    if os.environ.get("PAPERSTACK_SERVED_BASE_URL", "").strip():
        path = Path(MODEL)
    else:
        from paperstack import models

        path = Path(models.model_path(MODEL))
    with served(path, workdir) as server:
        yield server


def _questions(cfg: RealConfig) -> list[Question]:
    from debate_ledger.questions import fact_questions, shipped_mcq

    return shipped_mcq()[: cfg.n_mcq] + (fact_questions(cfg.n_facts, seed=0) if cfg.n_facts else [])


def run_real(run: Run) -> Report:
    """The real-model arm; see the module docstring."""
    for flag, value in (("--model", run.model), ("--dataset", getattr(run.args, "dataset", None))):
        if value is not None:
            raise PaperstackError(f"{flag}: not used by --real (it debates served {MODEL})")
    cfg = REAL_QUICK if run.quick else REAL
    work = Path(tempfile.mkdtemp(prefix="debate-ledger-real-"))
    try:
        with served_smollm2(work) as server:
            return _run(run, cfg, server)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _coder_rows(rows: Sequence[LedgerRow], questions: Sequence[Question]) -> tuple[list[Any], str]:
    """The recorded coder (letter-v3) against letter-v2 and the strict coder on the same replies:
    per-question parse rates (paired) and the agreement where both decide, plus a table."""
    import numpy as np

    from debate_ledger.coders import code_answer
    from debate_ledger.demo import _per_question
    from paperstack.records import Row

    by_id = {q.id: q for q in questions}
    qids = np.array([r.question_id for r in rows])
    rows_out: list[Any] = []
    lines = ["| coder | parsed | agrees with letter-v3 where both decide | names another letter |",
             "|---|---|---|---|"]  # fmt: skip
    v3 = [r.shown for r in rows]
    rows_out.append(Row.from_items("coder:letter-v3", "parse_rate",
                                   _per_question(qids, np.array([s is not None for s in v3])),
                                   split="coder"))  # fmt: skip
    lines.append(f"| letter-v3 (recorded) | {sum(s is not None for s in v3)} / {len(rows)} "
                 "| - | - |")  # fmt: skip
    for coder in AUDIT:
        other = []
        for r in rows:
            q = by_id[r.question_id]
            options = [q.options[q.letters.index(o)] for o in r.order]
            other.append(code_answer(r.response, r.n_options, coder, options))
        parsed = np.array([s is not None for s in other])
        rows_out.append(Row.from_items(f"coder:{coder}", "parse_rate", _per_question(qids, parsed),
                                       split="coder"))  # fmt: skip
        both = [(a, b) for a, b in zip(v3, other, strict=True) if a is not None and b is not None]
        agree = sum(a == b for a, b in both)
        if both:
            rows_out.append(Row(system=f"coder:{coder}", metric="agreement_with_letter-v3",
                                value=agree / len(both), n=len(both), split="coder"))  # fmt: skip
        lines.append(f"| {coder} | {sum(s is not None for s in other)} / {len(rows)} | "
                     f"{agree} / {len(both)} | {len(both) - agree} |")  # fmt: skip
    return rows_out, "\n".join(lines) + "\n"


def _run(run: Run, cfg: RealConfig, server: Any) -> Report:
    from debate_ledger.coders import REAL_MODEL_CODER
    from debate_ledger.demo import GATED, ledger_rows
    from debate_ledger.ledger import from_rows, transitions
    from debate_ledger.prompts import DebatePrompts
    from debate_ledger.rebuild import rebuild
    from debate_ledger.runner import DebateConfig, run_debates
    from debate_ledger.schemas import read_ledger
    from paperstack.llm import LLMError, OpenAIChat
    from paperstack.records import Claim, Row, atomic_write

    started = time.perf_counter()
    seeds = tuple(run.seeds)
    out = run.out
    client = OpenAIChat(server.base_url, server.model, concurrency=cfg.concurrency,
                        timeout=cfg.timeout, max_retries=cfg.max_retries)  # fmt: skip
    try:
        client.require_sampling(f"demo --real's {cfg.agents} agents and {cfg.resamples} resamples")
    except LLMError as exc:
        raise PaperstackError(f"demo --real: {' '.join(str(exc).split())}") from None
    questions = _questions(cfg)
    ledger = out / "ledger.jsonl"
    for p in (ledger, ledger.with_name(ledger.name + ".runs.json")):
        p.unlink(missing_ok=True)  # a demo is a fresh run
    families = cfg.families()
    per_family = len(questions) * len(seeds) * cfg.agents * (cfg.rounds + 1 + cfg.resamples)
    protocols: dict[str, Any] = {}
    with run.progress(per_family * len(families), "served debate calls") as bar:
        for family, visibility, temperature in families:
            dcfg = DebateConfig(agents=cfg.agents, rounds=cfg.rounds, seeds=seeds,
                                resamples=cfg.resamples,
                                prompts=DebatePrompts(visibility=visibility),  # type: ignore[arg-type]
                                coder=REAL_MODEL_CODER, max_new_tokens=cfg.max_new_tokens,
                                temperature=temperature)  # fmt: skip
            protocols[family] = dcfg.protocol()
            t0 = time.perf_counter()
            try:
                run_debates(_Named(client, f"{server.model}@{family}"), questions, ledger,
                            family=family, config=dcfg)  # fmt: skip
            except LedgerError as exc:
                raise PaperstackError(f"demo --real: {exc}") from None
            bar.advance(per_family)
            run.log(f"{family}: {per_family} calls ({time.perf_counter() - t0:.0f} s)")
    t_debated = time.perf_counter()
    rows_all = read_ledger(ledger)
    tables = out / "tables"
    summary = rebuild(ledger, tables)
    arr = from_rows(rows_all, source=str(ledger))
    tr = transitions(arr.answers, arr.gold)
    rows: list[Row] = ledger_rows(arr, tr, summary)
    coder_rows, coder_table = _coder_rows(rows_all, questions)
    rows += coder_rows
    cost = client.ledger.to_json()
    rows.append(Row(system="served", metric="calls", value=float(cost.get("calls", 0)),
                    n=len(rows_all), split="cost"))  # fmt: skip
    truncated = sum(r.finish_reason == "length" for r in rows_all)
    rows.append(Row(system="served", metric="truncated_share", value=truncated / len(rows_all),
                    n=len(rows_all), split="cost"))  # fmt: skip

    def key(system: str, metric: str, split: str) -> tuple[str, str, str]:
        return (system, metric, split)

    collapses = Claim.compare(
        "real_premise_collapses_occur",
        f"Premise on real agents: debates of served {MODEL} destroy right initial majorities "
        "(collapses per debate > 0, question-clustered).",
        rows, key("all", "collapse_rate", "ledger"), "gt", 0.0,
    )  # fmt: skip
    corrections = Claim.compare(
        "real_premise_corrections_occur",
        f"Premise on real agents: debates of served {MODEL} also rescue wrong initial majorities "
        "(corrections per debate > 0, question-clustered).",
        rows, key("all", "correction_rate", "ledger"), "gt", 0.0,
    )  # fmt: skip
    premise = [collapses, corrections]
    claims = [collapses, corrections]
    if any(r.system == GATED for r in rows):
        claims.append(Claim.compare(
            "real_gated_freeze_loses",
            "As in the paper (U = -79), the probe-gated freeze (fit leave-one-family-out) loses "
            "more corrections than the collapses it prevents on real agents: utility per "
            "debate < 0.",
            rows, key(GATED, "utility_per_debate", "replay"), "lt", 0.0, requires=premise,
        ))  # fmt: skip
    if any(r.system == "screen:combined" and r.metric == "spearman_rho" for r in rows):
        claims.append(Claim.compare(
            "real_screen_combined_rho",
            "As in the paper (rho = 0.893), the pre-specified combined 8-probe screen rises with "
            "collapse risk across the scaffold x temperature families: Spearman rho > 0.",
            rows, key("screen:combined", "spearman_rho", "screen"), "gt", 0.0, requires=premise,
        ))  # fmt: skip
    if any(r.system == "screen:combined" and r.metric == "partial_rho" for r in rows):
        claims.append(Claim.compare(
            "real_screen_partial_rho",
            "The combined screen still rises with collapse risk controlling for initial-majority "
            "accuracy: partial rho > 0 (the paper: 0.767, p = 0.0877).",
            rows, key("screen:combined", "partial_rho", "screen"), "gt", 0.0, requires=premise,
        ))  # fmt: skip
    claims += [
        Claim.compare(
            "real_debate_not_above_vote",
            "As debate-or-vote reports, debating the served agents does not beat a majority vote "
            "over as many independent calls: final-majority accuracy - vote accuracy <= 0 "
            "(paired by question).",
            rows, key("debate", "accuracy", "ledger"), "le",
            key("majority-vote", "accuracy", "ledger"),
        ),
        Claim.compare(
            "real_coder_v3_parses_more",
            "letter-v3 reads more of the real replies than letter-v2 (parse rate per question, "
            "paired on the same replies).",
            rows, key("coder:letter-v3", "parse_rate", "coder"), "gt",
            key("coder:letter-v2", "parse_rate", "coder"),
        ),
    ]  # fmt: skip
    figures = [atomic_write(out / n, (tables / n).read_bytes())
               for n in ("transitions.png", "screen.png")]  # fmt: skip
    held = all(c.held for c in premise)
    fams = ", ".join(f"`{f}`" for f, _, _ in families)
    intro = (
        f"Served model: `{server.model}` through **{server.name}** at {server.base_url} "
        f"(sampling checked: {client.sampling_report}). "
        f"{len(questions)} questions (the first {min(cfg.n_mcq, 40)} shipped team-written MCQs + "
        f"{cfg.n_facts} generated fact-world MCQs, 4 options shuffled per debate) x "
        f"{len(seeds)} seed(s) ({', '.join(map(str, seeds))}) x {len(families)} families = "
        f"{summary['debates']} debates; {cfg.agents} agents, rounds 0..{cfg.rounds}, "
        f"{cfg.resamples} round-0 resamples per agent, at most {cfg.max_new_tokens} new tokens "
        f"per reply ({truncated} of {len(rows_all)} replies cut at that limit), coder "
        f"`{REAL_MODEL_CODER}`. Families (the screen's units, G = {len(families)}): {fams}, "
        "i.e. what the others' turns show (`all`: their full replies; `answers`: their letters) "
        "x the sampling temperature. The served engine batches other runs' requests with these, "
        "so a rerun's replies may differ slightly although every call sends its seed.\n\n"
        + ("" if held else "**The premise did not hold on these agents: the claims that rest "
           "on it are inconclusive by construction (their measured differences are still "
           "shown).**\n\n")
        + "Coders on the same real replies (letter-v3 recorded; the others re-read them):\n\n"
        + coder_table + "\n"
        + "\n".join((tables / n).read_text()
                    for n in ("transitions.md", "onsets.md", "replay.md", "vote.md", "screen.md",
                              "audits.md", "cost_card.md"))
    )  # fmt: skip
    config = {
        "real": True,
        "demo": {**asdict(cfg), "scaffolds": list(cfg.scaffolds),
                 "temperatures": list(cfg.temperatures)},
        "questions": len(questions),
        "engine": server.name,
        "base_url": server.base_url,
        "model": server.model,
        "protocols": protocols,
        "sampling_check": client.sampling_report,
        "served_cost": cost,
        "seconds_debating": round(t_debated - started, 1),
        "seconds": round(time.perf_counter() - started, 1),
    }  # fmt: skip
    title = f"debate-ledger: demo --real{' (quick)' if run.quick else ''}"
    return Report(rows, claims, title=title, intro=intro, figures=figures, config=config)

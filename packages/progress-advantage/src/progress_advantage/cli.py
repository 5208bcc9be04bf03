"""``progress-advantage``: the command line.

- ``demo --out DIR``: the reproduction (tabular MDP + arithmetic with a tiny LM); ``--quick`` is
  the one-minute smoke version.
- ``bench --out DIR``: scoring throughput against a single-model confidence pass.
- ``score``: step scores of JSONL trajectories from a policy and a reference model.
- ``best-of-n``, ``uq``, ``attribute``: the uses, on scored JSONL trajectories.
- ``beam``: step-level beam search guided by progress advantage.

Heavy imports stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paperstack.errors import PaperstackError, cli_guard
from progress_advantage import __version__
from progress_advantage.errors import ProgressAdvantageError

PROG = "progress-advantage"
DIST = "progress-advantage"
STEP_AGGS = ("sum", "mean", "last", "min", "max")
TRAJ_AGGS = ("sum", "mean", "min", "last", "bottom10")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"{DIST} {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the reproduction; writes results.json and report.md")
    demo.add_argument("--out", type=Path, required=True, help="directory for the results")
    demo.add_argument("--quick", action="store_true", help="smoke run in about a minute (CI)")
    demo.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    demo.add_argument(
        "--model",
        default=None,
        help="reference model (path or hub id, with a chat template) for the arithmetic "
        "experiment; the policy is GRPO-trained from it (default: the cached tiny model)",
    )
    demo.add_argument("--device", default="cpu", help="cpu (the toy demo runs on the CPU)")

    bench = sub.add_parser("bench", help="scoring throughput vs a single-model confidence pass")
    bench.add_argument("--out", type=Path, required=True, help="directory for bench.json")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--repeats", type=int, default=5)
    bench.add_argument("--preset", default="tiny", help="paperstack.tiny preset (random weights)")
    bench.add_argument("--trajectories", type=int, default=128)

    score = sub.add_parser("score", help="step scores of JSONL trajectories")
    _models(score, reference_optional=True)
    score.add_argument("--in", dest="inp", type=Path, required=True, help="trajectories JSONL")
    score.add_argument("--out", type=Path, required=True, help="scored trajectories JSONL")
    score.add_argument("--beta", type=float, default=1.0, help="the policy's KL coefficient")
    score.add_argument("--step-agg", choices=STEP_AGGS, default="sum")
    score.add_argument("--traj-agg", choices=TRAJ_AGGS, default="sum")
    score.add_argument("--batch-size", type=int, default=16)

    for name, text in (
        ("best-of-n", "pick the highest-scoring trajectory of each group"),
        ("uq", "AUROC of trajectory scores predicting success"),
        ("attribute", "blame the lowest-scoring step of each failed trajectory"),
    ):
        c = sub.add_parser(name, help=text)
        c.add_argument("--in", dest="inp", type=Path, required=True, help="scored JSONL")
        c.add_argument("--traj-agg", choices=TRAJ_AGGS, default="sum")
        c.add_argument("--out", type=Path, default=None, help="JSONL of the decisions")

    beam = sub.add_parser("beam", help="step-level beam search guided by progress advantage")
    _models(beam, reference_optional=True)
    beam.add_argument("--prompts", type=Path, required=True, help="text file, one prompt a line")
    beam.add_argument("--out", type=Path, required=True, help="trajectories JSONL")
    beam.add_argument("--beam-width", type=int, default=2)
    beam.add_argument("--expansions", type=int, default=4)
    beam.add_argument("--max-steps", type=int, default=8)
    beam.add_argument("--beta", type=float, default=1.0)
    beam.add_argument("--seed", type=int, default=0)
    return p


def _models(p: argparse.ArgumentParser, *, reference_optional: bool) -> None:
    p.add_argument("--policy", required=True, help="RL policy: path or hub id (or peft adapter)")
    p.add_argument(
        "--reference",
        required=not reference_optional,
        default=None,
        help="reference model: path or hub id; omit when --policy is a peft adapter (the "
        "adapter is switched off for the reference)",
    )
    p.add_argument("--device", default="cpu")


@cli_guard(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = {
        "demo": _demo,
        "bench": _bench,
        "score": _score,
        "best-of-n": _best_of_n,
        "uq": _uq,
        "attribute": _attribute,
        "beam": _beam,
    }[args.command]
    return int(handler(args))


# ----------------------------------------------------------------------------- demo and bench


def _demo(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from progress_advantage.demo import DemoConfig, run_demo

    if args.device != "cpu":
        raise PaperstackError(f"--device {args.device}: the toy demo runs on the CPU only")
    config = DemoConfig.quick() if args.quick else DemoConfig()
    if args.model is not None:
        config = replace(config, arithmetic=replace(config.arithmetic, model=args.model))
    run_demo(args.out, config, seed=args.seed, quick=args.quick)
    return 0


def _bench(args: argparse.Namespace) -> int:
    from progress_advantage.bench import run_bench

    if args.repeats < 1 or args.trajectories < 1:
        raise PaperstackError("--repeats and --trajectories must be >= 1")
    run_bench(args.out, args.preset, args.trajectories, args.repeats, args.seed)
    return 0


# ----------------------------------------------------------------------------- models


def _load(name: str, device: str) -> tuple[Any, Any]:
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise ProgressAdvantageError(
            "scoring needs torch and transformers: pip install 'progress-advantage[torch]'"
        ) from None
    try:
        tok = AutoTokenizer.from_pretrained(name)
        if Path(name, "adapter_config.json").is_file():
            try:
                from peft import AutoPeftModelForCausalLM
            except ImportError:
                raise ProgressAdvantageError(
                    f"--policy {name}: is a peft adapter; pip install peft"
                ) from None
            model = AutoPeftModelForCausalLM.from_pretrained(name)
        else:
            model = AutoModelForCausalLM.from_pretrained(name)
    except (OSError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ProgressAdvantageError(f"cannot load model {name!r}: {first}") from None
    return model.to(device), tok


def _scorer(args: argparse.Namespace) -> Any:
    from progress_advantage.scoring import LogRatioScorer, check_same_tokenizer

    policy, tok = _load(args.policy, args.device)
    reference = None
    if args.reference is not None:
        reference, ref_tok = _load(args.reference, args.device)
        check_same_tokenizer(tok, ref_tok)
    return LogRatioScorer(policy, reference, tok, batch_size=getattr(args, "batch_size", 16))


def _score(args: argparse.Namespace) -> int:
    from progress_advantage.aggregate import aggregate_trajectory
    from progress_advantage.scoring import progress_advantage
    from progress_advantage.trajectory import read_trajectories, write_trajectories

    if args.batch_size < 1:
        raise PaperstackError(f"--batch-size {args.batch_size}: must be >= 1")
    trajs = read_trajectories(args.inp)
    scorer = _scorer(args)
    scored = scorer.score(trajs)
    out = []
    for t, ts in zip(trajs, scored, strict=True):
        a = progress_advantage(ts, args.beta, args.step_agg)
        out.append(
            t.with_extra(
                step_scores=[float(x) for x in a],
                score=aggregate_trajectory(a, args.traj_agg),
                mean_logprob=float(ts.policy_logp.mean()) if ts.policy_logp.size else None,
            )
        )
    write_trajectories(args.out, out)
    print(f"{PROG}: scored {len(out)} trajectories -> {args.out}")
    return 0


# ----------------------------------------------------------------------------- uses


def _scored(path: Path) -> list[Any]:
    from progress_advantage.trajectory import read_trajectories

    trajs = read_trajectories(path)
    for i, t in enumerate(trajs, 1):
        s = t.extra.get("step_scores")
        if not isinstance(s, list) or len(s) != t.n_steps:
            raise ProgressAdvantageError(
                f"{path}: line {i}: field 'step_scores' missing or not one number per step; run "
                f"`{PROG} score` first"
            )
        if not all(isinstance(x, (int, float)) for x in s):
            raise ProgressAdvantageError(f"{path}: line {i}: field 'step_scores' holds non-numbers")
    return trajs


def _write_jsonl(path: Path | None, records: list[dict[str, Any]]) -> None:
    if path is None:
        return
    from paperstack.records import atomic_write

    atomic_write(path, "".join(json.dumps(r) + "\n" for r in records))


def _best_of_n(args: argparse.Namespace) -> int:
    from progress_advantage.aggregate import aggregate_trajectory
    from progress_advantage.selection import best_of_n, group_indices

    trajs = _scored(args.inp)
    scores = [aggregate_trajectory(t.extra["step_scores"], args.traj_agg) for t in trajs]
    picks = []
    for g in group_indices([t.group or t.id for t in trajs]):
        i = g[best_of_n([scores[j] for j in g])]
        picks.append(
            {
                "group": trajs[i].group,
                "id": trajs[i].id,
                "score": scores[i],
                "success": trajs[i].success,
            }
        )
    _write_jsonl(args.out, picks)
    labelled = [p for p in picks if p["success"] is not None]
    msg = f"{PROG}: best-of-n picked {len(picks)} trajectories"
    if labelled:
        acc = sum(bool(p["success"]) for p in labelled) / len(labelled)
        msg += f"; accuracy {acc:.3f} over {len(labelled)} labelled groups"
    print(msg)
    return 0


def _uq(args: argparse.Namespace) -> int:
    from progress_advantage.aggregate import aggregate_trajectory
    from progress_advantage.metrics import auroc

    trajs = _scored(args.inp)
    labelled = [t for t in trajs if t.success is not None]
    if not labelled:
        raise ProgressAdvantageError(f"{args.inp}: no trajectory has a 'success' label")
    scores = [aggregate_trajectory(t.extra["step_scores"], args.traj_agg) for t in labelled]
    value = auroc(scores, [bool(t.success) for t in labelled])
    _write_jsonl(
        args.out, [{"id": t.id, "score": s} for t, s in zip(labelled, scores, strict=True)]
    )
    print(f"{PROG}: AUROC {value:.3f} over {len(labelled)} trajectories")
    return 0


def _attribute(args: argparse.Namespace) -> int:
    from progress_advantage.attribution import attribute_failure

    trajs = _scored(args.inp)
    failed = [t for t in trajs if t.success is False or t.success is None]
    decisions = [
        {
            "id": t.id,
            "step": attribute_failure(t.extra["step_scores"]),
            "first_error": t.first_error,
        }
        for t in failed
    ]
    _write_jsonl(args.out, decisions)
    labelled = [d for d in decisions if d["first_error"] is not None]
    msg = f"{PROG}: attributed {len(decisions)} trajectories"
    if labelled:
        acc = sum(d["step"] == d["first_error"] for d in labelled) / len(labelled)
        msg += f"; top-1 accuracy {acc:.3f} over {len(labelled)} with a labelled first error"
    print(msg)
    return 0


def _beam(args: argparse.Namespace) -> int:
    from progress_advantage.beam import BeamSettings, step_beam_search
    from progress_advantage.trajectory import write_trajectories

    try:
        prompts = [x for x in args.prompts.read_text(encoding="utf-8").splitlines() if x.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise ProgressAdvantageError(f"--prompts {args.prompts}: cannot read ({exc})") from None
    if not prompts:
        raise ProgressAdvantageError(f"--prompts {args.prompts}: holds no prompts")
    scorer = _scorer(args)
    settings = BeamSettings(
        beam_width=args.beam_width,
        expansions=args.expansions,
        max_steps=args.max_steps,
        beta=args.beta,
    )
    out = step_beam_search(
        scorer.policy, scorer.reference, scorer.tokenizer, prompts, settings, seed=args.seed
    )
    write_trajectories(args.out, out)
    print(f"{PROG}: beam search wrote {len(out)} trajectories -> {args.out}", file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

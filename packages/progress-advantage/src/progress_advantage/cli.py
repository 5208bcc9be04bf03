"""``progress-advantage``: free step scores from an RL policy and its reference, as a CLI.

- ``demo --out DIR``: the reproduction (tabular MDP + arithmetic with a tiny LM); ``--quick`` is
  the one-minute smoke version.
- ``bench --out DIR``: scoring cost of progress advantage against a single-model confidence pass.
- ``score``: step scores of JSONL trajectories from a policy and a reference model.
- ``best-of-n``, ``uq``, ``attribute``: the uses, on scored JSONL trajectories.
- ``beam``: step-level beam search guided by progress advantage.

The common flags and flow of ``demo`` and ``bench`` (``--out``, ``--quick``, ``--seed``/``--seeds``,
``--device``, ``--model``, ``--no-progress``; results written atomically, verdicts printed) come
from :class:`paperstack.contract.ContractCLI`. Heavy imports stay inside the commands so that
``--help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from paperstack.bench import add_repeats_argument
from paperstack.contract import (
    ContractCLI,
    Report,
    Run,
    check_device,
    non_negative_int,
    positive_float,
    positive_int,
    settled_heap,
)
from paperstack.errors import PaperstackError
from progress_advantage import __version__
from progress_advantage.aggregate import STEP_AGGREGATIONS, TRAJECTORY_AGGREGATIONS
from progress_advantage.errors import ProgressAdvantageError

PROG = "progress-advantage"
cli = ContractCLI(PROG, "progress-advantage", __version__, __doc__)


# ----------------------------------------------------------------------------- demo and bench


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lm-preset",
        choices=("tiny", "micro"),
        default=None,
        help="paperstack.tiny preset of the toy reference (default tiny; micro trains ~12x "
        "faster on a CPU)",
    )
    p.add_argument(
        "--sft-steps",
        type=positive_int,
        default=None,
        help="SFT steps of the toy reference on the flawed teacher (default 800)",
    )
    p.add_argument(
        "--lm-seeds",
        type=positive_int,
        default=None,
        help="seeds of the language-model arm (the first of --seeds; default 3, --quick 1)",
    )
    p.add_argument(
        "--real",
        action="store_true",
        help="the real-model arm: SmolLM2-135M-Instruct as the reference (no SFT), a LoRA "
        "policy at beta 0.1, its gap to the KL-regularised optimum measured first (hours on 2 "
        "CPU cores; sizes in DemoConfig.real)",
    )
    p.add_argument(
        "--mc-seed",
        type=non_negative_int,
        default=None,
        help="seed of the Monte-Carlo data every LM seed is scored against (default: the first "
        "of --seeds); processes that split --seeds over one --parts folder give the same one, "
        "and so does the run that assembles their parts",
    )
    p.add_argument(
        "--rl-max-steps",
        type=positive_int,
        default=None,
        help="cap on RLOO steps per policy (default 80; the plateau rule may stop earlier)",
    )


@cli.demo(
    arguments=_demo_arguments,
    seeds=5,
    quick_seeds=2,
    model="reference model (a local folder or hub id, with a chat template) for the language "
    "model arm; the policy is RL-trained from it (default: the toy reference trained here)",
    devices=("cpu",),
)
def demo(run: Run) -> Report:
    """(a) the tabular MDP on every seed; (b) arithmetic with a tiny LM on the first seeds."""
    from progress_advantage.demo import run_demo

    # trl's trainer imported and frozen out of the collector's walk: accelerate collects after
    # every training (paperstack.contract.settled_heap)
    with settled_heap("trl.RLOOTrainer"):
        return run_demo(run)


def _train_arguments(p: argparse.ArgumentParser) -> None:
    from progress_advantage.policy import RLSettings

    d = RLSettings()
    p.add_argument(
        "--reference",
        "--model",
        dest="reference",
        required=True,
        help="reference model (folder or hub id; any causal LM, a base model without a chat "
        "template gets the 'User: ...\\nAssistant:' transcript template); the policy starts here",
    )
    p.add_argument("--out", type=Path, required=True, help="folder for the trained policy")
    p.add_argument("--task", default="arithmetic", help="paperstack task whose verifier rewards")
    p.add_argument(
        "--beta", type=positive_float, default=d.beta, help="KL coefficient (in the reward)"
    )
    p.add_argument("--lr", type=positive_float, default=d.learning_rate, help="learning rate")
    p.add_argument("--prompts-per-step", type=positive_int, default=d.prompts_per_step)
    p.add_argument("--num-generations", type=positive_int, default=d.num_generations)
    p.add_argument("--min-steps", type=positive_int, default=d.min_steps)
    p.add_argument("--max-steps", type=positive_int, default=d.max_steps)
    p.add_argument("--window", type=positive_int, default=d.window, help="plateau window (steps)")
    p.add_argument("--train-prompts", type=positive_int, default=d.train_prompts)
    p.add_argument("--max-completion-length", type=positive_int, default=d.max_completion_length)
    p.add_argument("--bf16", action="store_true", help="bf16 mixed precision (trl/transformers)")
    p.add_argument(
        "--gradient-accumulation-steps",
        type=positive_int,
        default=d.gradient_accumulation_steps,
        help="micro-batches per RLOO step (must divide prompts-per-step x num-generations)",
    )
    p.add_argument(
        "--lora-r",
        type=positive_int,
        default=None,
        help="train a LoRA adapter of this rank (peft) instead of all weights; the saved folder "
        "is the adapter, scored with `score --policy OUT` and no --reference",
    )
    p.add_argument("--lora-alpha", type=positive_int, default=None, help="LoRA alpha (2 x r)")
    p.add_argument("--seed", type=int, default=0)


@cli.command(
    "train-policy",
    "KL-regularised RL (trl RLOO, KL in the reward) from a reference, to a plateau; runs under "
    "`accelerate launch --num_processes N` as well",
    _train_arguments,
)
def train_policy_command(args: argparse.Namespace) -> int:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paperstack import tasks
    from paperstack.checkpoint import load_pretrained
    from paperstack.progress import quiet_libraries
    from paperstack.records import atomic_write_json
    from progress_advantage.policy import RLSettings, train_rl_policy

    _check_out_dir(args.out)
    if args.num_generations < 2:
        raise PaperstackError("--num-generations must be >= 2 (RLOO's leave-one-out baseline)")
    quiet_libraries()
    torch.set_num_threads(1)
    task = tasks.get(args.task)
    ref_path = _model_path("--reference", args.reference)
    reference = load_pretrained(ref_path, AutoModelForCausalLM.from_pretrained)
    tok = load_pretrained(ref_path, AutoTokenizer.from_pretrained)
    settings = RLSettings(
        beta=args.beta,
        learning_rate=args.lr,
        prompts_per_step=args.prompts_per_step,
        num_generations=args.num_generations,
        min_steps=args.min_steps,
        max_steps=args.max_steps,
        window=args.window,
        train_prompts=args.train_prompts,
        max_completion_length=args.max_completion_length,
        bf16=args.bf16,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        lora_r=args.lora_r,
        lora_alpha=args.lora_alpha,
    )
    policy, result = train_rl_policy(
        reference, tok, task, settings, seed=args.seed, save_to=args.out
    )
    rank, world = result.rank, result.world_size
    checksum = float(sum(p.detach().double().sum() for p in policy.parameters()))
    record = {
        "rank": rank,
        "world_size": world,
        "steps": result.steps,
        "plateaued": result.plateaued,
        "objective": result.objective,
        "checksum": checksum,
    }
    atomic_write_json(args.out / "ranks" / f"rank{rank}.json", record)
    if rank == 0:
        print(
            f"{PROG}: trained {result.steps} RLOO steps on {world} process(es) "
            f"({'plateau' if result.plateaued else 'step cap'}) -> {args.out}"
        )
    return 0


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--shape",
        default="tiny",
        help="model shape (random weights): a paperstack.tiny preset (tiny, micro) or 0.5b "
        "(Qwen2-0.5B's shape, for a GPU)",
    )
    p.add_argument("--trajectories", type=positive_int, default=128, help="trajectories scored")
    add_repeats_argument(p, default=9, quick=6, what="repeats")
    p.add_argument("--steps", type=positive_int, default=6, help="solution lines per trajectory")


@cli.bench(arguments=_bench_arguments, devices=("cpu", "cuda"))
def bench(run: Run) -> Report:
    """Time of progress advantage over one confidence pass, paired per repeat."""
    from progress_advantage.bench import run_bench

    return run_bench(run)


# ----------------------------------------------------------------------------- models


def _load(name: str, device: str) -> tuple[Any, Any]:
    """A causal LM and its tokenizer from a folder or hub id (a peft adapter folder too)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paperstack.checkpoint import load_pretrained

    folder = Path(name).expanduser()
    if folder.is_dir() and (folder / "adapter_config.json").is_file():
        try:
            from peft import AutoPeftModelForCausalLM
        except ImportError:
            raise ProgressAdvantageError(
                f"{name}: is a peft adapter; scoring it needs the peft extra: "
                "pip install 'progress-advantage[peft]'"
            ) from None
        model = _load_adapter(folder, AutoPeftModelForCausalLM)
        # train-policy saves the tokenizer next to the adapter; else the base's is the one.
        base = model.peft_config[model.active_adapter].base_model_name_or_path
        if any(folder.glob("tokenizer*")):
            try:
                tok = AutoTokenizer.from_pretrained(str(folder))
            except (OSError, ValueError) as exc:
                raise ProgressAdvantageError(
                    f"{folder}: cannot load its tokenizer ({exc})"
                ) from None
        else:
            tok = load_pretrained(base, AutoTokenizer.from_pretrained)
    else:
        model = load_pretrained(name, AutoModelForCausalLM.from_pretrained)
        tok = load_pretrained(name, AutoTokenizer.from_pretrained)
    return model.to(device), tok


def _load_adapter(folder: Path, loader: Any) -> Any:
    """A peft adapter folder over its base model, the base checked first (the core's
    ``load_pretrained`` checks full model folders only): a missing or broken base is one line
    naming the adapter and the base, not a peft traceback."""
    from paperstack.checkpoint import check_model_dir

    try:
        config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
        base = str(config["base_model_name_or_path"] or "")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ProgressAdvantageError(
            f"{folder}: adapter_config.json unreadable or without 'base_model_name_or_path' ({exc})"
        ) from None
    if not base:
        raise ProgressAdvantageError(f"{folder}: the adapter names no base model")
    if Path(base).expanduser().is_dir():
        check_model_dir(Path(base).expanduser())
    elif base.startswith(("/", ".", "~")):
        raise ProgressAdvantageError(f"{folder}: its base model {base} does not exist")
    try:
        return loader.from_pretrained(str(folder))
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ProgressAdvantageError(f"{folder}: cannot load the adapter ({first})") from None


def _model_path(flag: str, value: str) -> str:
    """``value`` checked as the core checks ``--model`` (a missing local path fails at once
    instead of being retried as a hub id), with the error naming this command's ``flag``."""
    from paperstack.contract import check_model

    try:
        checked = check_model(value)
    except PaperstackError as exc:
        raise PaperstackError(str(exc).replace("--model", flag, 1)) from None
    assert checked is not None  # value is a string
    return checked


def _check_writable(path: Path, flag: str) -> None:
    """The first existing folder above ``path`` must be a folder we can write in, probed by
    creating (and removing) a temporary file there: ``os.access`` says yes to root on a
    read-only folder, and training or scoring for minutes before the write fails wastes it."""
    import tempfile

    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise PaperstackError(f"{flag} {path}: {parent} exists and is not a directory")
            try:
                with tempfile.TemporaryFile(dir=parent):
                    pass
            except OSError as exc:
                raise PaperstackError(
                    f"{flag} {path}: cannot write in {parent} ({exc.strerror or exc})"
                ) from None
            return


def _check_out_file(path: Path | None, flag: str = "--out") -> None:
    """Fail before any work when ``path`` cannot become a file (a directory, under a file, in
    a folder we cannot write): scoring a large file for minutes and then failing at the write
    wastes the run."""
    if path is None:
        return
    if path.is_dir():
        raise PaperstackError(f"{flag} {path}: is a directory; name a file to write")
    _check_writable(path, flag)


def _check_out_dir(path: Path, flag: str = "--out") -> None:
    """Fail before training when ``path`` cannot become the output folder."""
    if path.exists() and not path.is_dir():
        raise PaperstackError(f"{flag} {path}: exists and is not a directory")
    _check_writable(path / "probe", flag)


def _models(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--policy",
        "--model",
        dest="policy",
        required=True,
        help="RL policy: folder or hub id (or peft adapter)",
    )
    p.add_argument(
        "--reference",
        default=None,
        help="reference model: folder or hub id; omit when --policy is a peft adapter (the "
        "adapter is switched off for the reference)",
    )
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")


def _scorer(args: argparse.Namespace) -> Any:
    from paperstack.progress import quiet_libraries
    from progress_advantage.scoring import LogRatioScorer, check_same_tokenizer

    quiet_libraries()
    device = check_device(args.device)
    policy, tok = _load(_model_path("--policy", args.policy), device)
    reference = None
    if args.reference is not None:
        reference, ref_tok = _load(_model_path("--reference", args.reference), device)
        check_same_tokenizer(tok, ref_tok)
    return LogRatioScorer(policy, reference, tok, batch_size=getattr(args, "batch_size", 16))


def _score_arguments(p: argparse.ArgumentParser) -> None:
    _models(p)
    p.add_argument(
        "--in",
        "--trajectories",
        dest="inp",
        type=Path,
        required=True,
        help="trajectories JSONL: one {messages, steps} object a line (Trajectory.to_json)",
    )
    p.add_argument("--out", type=Path, required=True, help="scored trajectories JSONL")
    p.add_argument("--beta", type=positive_float, default=1.0, help="the policy's KL coefficient")
    p.add_argument("--step-agg", choices=STEP_AGGREGATIONS, default="sum")
    p.add_argument("--traj-agg", choices=TRAJECTORY_AGGREGATIONS, default="sum")
    p.add_argument("--batch-size", type=positive_int, default=16)


@cli.command("score", "step scores of JSONL trajectories", _score_arguments)
def score(args: argparse.Namespace) -> int:
    from progress_advantage.aggregate import aggregate_trajectory
    from progress_advantage.scoring import progress_advantage
    from progress_advantage.trajectory import read_trajectories, write_trajectories

    _check_out_file(args.out)
    trajs = read_trajectories(args.inp)
    scorer = _scorer(args)
    for i, t in enumerate(trajs, 1):
        # Rendering problems name the file and line before any forward pass runs.
        try:
            scorer.encode(t)
        except ProgressAdvantageError as exc:
            raise ProgressAdvantageError(f"{args.inp}: line {i}: {exc}") from None
    out = []
    for t, ts in zip(trajs, scorer.score(trajs), strict=True):
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
    """Scored trajectories; step scores must be one finite number per step."""
    from progress_advantage.trajectory import read_trajectories

    trajs = read_trajectories(path)
    for i, t in enumerate(trajs, 1):
        s = t.extra.get("step_scores")
        if not isinstance(s, list) or len(s) != t.n_steps:
            raise ProgressAdvantageError(
                f"{path}: line {i}: field 'step_scores' missing or not one number per step; run "
                f"`{PROG} score` first"
            )
        for k, x in enumerate(s):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                raise ProgressAdvantageError(
                    f"{path}: line {i}: field 'step_scores[{k}]' is {x!r}, not a finite number"
                )
    return trajs


def _trajectory_scores(path: Path, trajs: list[Any], how: str) -> list[float]:
    """Each trajectory's aggregate of its step scores; an overflow names the line."""
    from progress_advantage.aggregate import aggregate_trajectory

    scores = []
    for i, t in enumerate(trajs, 1):
        try:
            scores.append(aggregate_trajectory(t.extra["step_scores"], how))
        except ProgressAdvantageError as exc:
            raise ProgressAdvantageError(f"{path}: line {i}: {exc}") from None
    return scores


def _write_jsonl(path: Path | None, records: list[dict[str, Any]]) -> None:
    if path is None:
        return
    from paperstack.records import atomic_write

    atomic_write(path, "".join(json.dumps(r) + "\n" for r in records))


def _use_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--in", dest="inp", type=Path, required=True, help="scored JSONL")
    p.add_argument("--traj-agg", choices=TRAJECTORY_AGGREGATIONS, default="sum")
    p.add_argument("--out", type=Path, default=None, help="JSONL file of the decisions")


@cli.command("best-of-n", "pick the highest-scoring trajectory of each group", _use_arguments)
def best_of_n_command(args: argparse.Namespace) -> int:
    from progress_advantage.selection import best_of_n, group_indices

    _check_out_file(args.out)
    trajs = _scored(args.inp)
    scores = _trajectory_scores(args.inp, trajs, args.traj_agg)
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


@cli.command("uq", "AUROC of trajectory scores predicting success", _use_arguments)
def uq_command(args: argparse.Namespace) -> int:
    from progress_advantage.metrics import auroc

    _check_out_file(args.out)
    trajs = _scored(args.inp)
    labelled = [t for t in trajs if t.success is not None]
    if not labelled:
        raise ProgressAdvantageError(f"{args.inp}: no trajectory has a 'success' label")
    wins = sum(bool(t.success) for t in labelled)
    if wins in (0, len(labelled)):
        outcome = "succeeded" if wins else "failed"
        raise ProgressAdvantageError(
            f"{args.inp}: AUROC is undefined: all {len(labelled)} labelled trajectories "
            f"{outcome} (it needs successes and failures)"
        )
    every = _trajectory_scores(args.inp, trajs, args.traj_agg)
    scores = [x for x, t in zip(every, trajs, strict=True) if t.success is not None]
    value = auroc(scores, [bool(t.success) for t in labelled])
    _write_jsonl(
        args.out, [{"id": t.id, "score": s} for t, s in zip(labelled, scores, strict=True)]
    )
    print(
        f"{PROG}: AUROC {value:.3f} over {len(labelled)} trajectories "
        f"({wins} succeeded, {len(labelled) - wins} failed)"
    )
    return 0


def _attribute_arguments(p: argparse.ArgumentParser) -> None:
    from progress_advantage.attribution import ATTRIBUTION_RULES

    p.add_argument("--in", dest="inp", type=Path, required=True, help="scored JSONL")
    p.add_argument(
        "--rule",
        choices=ATTRIBUTION_RULES,
        default=ATTRIBUTION_RULES[0],
        help="which step to blame (default: the authors' argmin of the cumulative sum)",
    )
    p.add_argument("--out", type=Path, default=None, help="JSONL file of the decisions")


@cli.command("attribute", "blame one step of each failed trajectory", _attribute_arguments)
def attribute_command(args: argparse.Namespace) -> int:
    from progress_advantage.attribution import attribute_failure

    _check_out_file(args.out)
    trajs = _scored(args.inp)
    failed = [t for t in trajs if t.success is not True]
    if not failed:
        raise ProgressAdvantageError(f"{args.inp}: no failed (or unlabelled) trajectory to blame")
    decisions = [
        {
            "id": t.id,
            "step": attribute_failure(t.extra["step_scores"], args.rule),
            "first_error": t.first_error,
        }
        for t in failed
    ]
    _write_jsonl(args.out, decisions)
    labelled = [d for d in decisions if d["first_error"] is not None]
    msg = f"{PROG}: attributed {len(decisions)} trajectories ({args.rule})"
    if labelled:
        acc = sum(d["step"] == d["first_error"] for d in labelled) / len(labelled)
        msg += f"; top-1 accuracy {acc:.3f} over {len(labelled)} with a labelled first error"
    print(msg)
    return 0


def _beam_arguments(p: argparse.ArgumentParser) -> None:
    _models(p)
    p.add_argument("--prompts", type=Path, required=True, help="text file, one prompt a line")
    p.add_argument("--out", type=Path, required=True, help="trajectories JSONL")
    p.add_argument("--beam-width", type=positive_int, default=2)
    p.add_argument("--expansions", type=positive_int, default=4)
    p.add_argument("--max-steps", type=positive_int, default=8)
    p.add_argument("--beta", type=positive_float, default=1.0)
    p.add_argument("--seed", type=int, default=0)


@cli.command("beam", "step-level beam search guided by progress advantage", _beam_arguments)
def beam_command(args: argparse.Namespace) -> int:
    from progress_advantage.beam import BeamSettings, step_beam_search
    from progress_advantage.trajectory import write_trajectories

    try:
        prompts = [x for x in args.prompts.read_text(encoding="utf-8").splitlines() if x.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise ProgressAdvantageError(f"--prompts {args.prompts}: cannot read ({exc})") from None
    if not prompts:
        raise ProgressAdvantageError(f"--prompts {args.prompts}: holds no prompts")
    _check_out_file(args.out)
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
    print(f"{PROG}: beam search wrote {len(out)} trajectories -> {args.out}")
    return 0


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())

"""The reproduction: GRPO on Countdown without KL, with token-level KL (two betas), and with
MOSA, from one diverse SFT base, 3 seeds, every model evaluated on the same held-out problems.

The base is ``paperstack.tiny.pretrained("tiny", ("countdown",))``: the core's 1.29M-parameter
character-level model trained with ``Countdown(solution_choice="random")`` gold answers, so it
learned the whole solution set of each instance (measured while building this: 2.6 distinct
correct solutions per held-out problem among 16 samples at temperature 1, pass@1 0.44 against
pass@16 0.91 on 128 problems; the instances have 4.1 solutions on average). Every trained system
runs through :class:`~mosa_rl.trainer.MOSATrainer` (``mosa_beta = 0`` is plain trl GRPO), with
the same rollouts budget, learning rate and seeds; only the regulariser differs.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mosa_rl.errors import MosaError

__all__ = ["FULL", "QUICK", "DemoConfig", "System", "build_claims", "rows_for", "run_system"]


@dataclass(frozen=True)
class System:
    """One trained system: trl's token-level ``beta`` and MOSA's ``mosa_beta``."""

    name: str
    beta: float = 0.0
    mosa_beta: float = 0.0


@dataclass(frozen=True)
class DemoConfig:
    """Everything that shapes the demo's numbers (written into the manifest)."""

    preset: str = "tiny"
    #: SFT steps of the base (None: the core's Countdown recipe, 3000 steps, cached).
    sft_steps: int | None = None
    grpo_steps: int = 40
    prompts_per_step: int = 4
    num_generations: int = 8
    max_completion_length: int = 24
    learning_rate: float = 3e-4
    temperature: float = 1.0
    mosa_top_k: int = 8
    seeds: tuple[int, ...] = (0, 1, 2)
    eval_problems: int = 96
    eval_samples: int = 16
    ks: tuple[int, ...] = (1, 2, 4, 8, 16)
    systems: tuple[System, ...] = (
        System("grpo-nokl"),
        System("grpo-tokenkl-0.01", beta=0.01),
        System("grpo-tokenkl-0.04", beta=0.04),
        System("mosa", mosa_beta=1.0),
    )


FULL = DemoConfig()
#: The one-minute smoke run: the micro preset SFT'd for a few dozen steps (trained in
#: seconds if not cached), two GRPO steps per system, one seed, few problems. It exercises
#: the whole pipeline; its numbers mean nothing.
QUICK = DemoConfig(
    preset="micro",
    sft_steps=30,
    grpo_steps=2,
    prompts_per_step=4,
    num_generations=4,
    max_completion_length=16,
    seeds=(0,),
    eval_problems=8,
    eval_samples=16,
)

EVAL_SEED = 1234  # the held-out problems: the same for every system and seed


def base_model_path(config: DemoConfig, progress: bool) -> Path:
    """The SFT base in the core's cache (trained now if absent)."""
    from paperstack import tiny

    path = tiny.pretrained_path(config.preset, ("countdown",), config.sft_steps)
    if not path.exists():
        tiny.pretrained(config.preset, ("countdown",), config.sft_steps, progress=progress)
    return path


def _grpo_args(config: DemoConfig, system: System, seed: int, out: str, device: str) -> Any:
    from mosa_rl.trainer import MOSAConfig

    return MOSAConfig(
        output_dir=out,
        per_device_train_batch_size=config.prompts_per_step * config.num_generations,
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length,
        temperature=config.temperature,
        top_k=0,
        learning_rate=config.learning_rate,
        lr_scheduler_type="constant",
        max_steps=config.grpo_steps,
        beta=system.beta,
        mosa_beta=system.mosa_beta,
        mosa_top_k=config.mosa_top_k,
        loss_type="dapo",
        seed=seed,
        data_seed=seed,
        bf16=False,
        activation_checkpointing=False,
        use_cpu=device == "cpu",
        report_to="none",
        logging_steps=max(1, config.grpo_steps // 10),
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def run_system(
    config: DemoConfig,
    system: System,
    seed: int,
    base: str | Path,
    device: str = "cpu",
) -> tuple[Any, Any, dict[str, Any]]:
    """Train one system from the base with one seed; returns (model, tokenizer, log).

    The prompts are fresh training-split Countdown instances, drawn by ``seed``."""
    from transformers.trainer_callback import PrinterCallback

    from mosa_rl.trainer import MOSATrainer
    from paperstack import tasks, tiny

    loaded: tuple[Any, Any] = tiny.load(base)
    model, tokenizer = loaded
    model.to(device)
    task = tasks.get("countdown")
    n_prompts = config.grpo_steps * config.prompts_per_step
    train = task.generate(n_prompts, seed=1000 + seed, split="train")
    dataset = task.to_dataset(train, conversational=True)
    with tempfile.TemporaryDirectory(prefix="mosa-run-") as out:
        args = _grpo_args(config, system, seed, out, device)
        trainer = MOSATrainer(
            model,
            task.reward_function(),
            args,
            train_dataset=dataset,
            processing_class=tokenizer,
        )
        trainer.remove_callback(PrinterCallback)  # the demo has its own progress bar
        started, cpu = time.perf_counter(), time.process_time()
        trainer.train()
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    history = [h for h in trainer.state.log_history if "reward" in h]
    log = {"seconds": seconds, "cpu_seconds": cpu, "history": history}
    trained: Any = trainer.model
    trained.eval()
    return trained, tokenizer, log


def eval_problems(config: DemoConfig) -> list[Any]:
    """The held-out problems every model is scored on (fixed, whatever the seed)."""
    from paperstack import tasks

    return tasks.get("countdown").generate(config.eval_problems, seed=EVAL_SEED, split="test")


def evaluate_model(
    model: Any, tokenizer: Any, config: DemoConfig, seed: int, examples: Sequence[Any]
) -> dict[str, Any]:
    """Per-model scalars: pass@k for every k, distinct correct, top-1 mass, entropy, profile."""
    from mosa_rl.evaluation import sample_and_score
    from paperstack import tasks

    task = tasks.get("countdown")
    ev = sample_and_score(
        model,
        tokenizer,
        task,
        examples,
        n=config.eval_samples,
        max_new_tokens=config.max_completion_length,
        temperature=config.temperature,
        seed=10_000 + seed,
        top_k=config.mosa_top_k,
    )
    out: dict[str, float | list[float]] = {
        f"pass@{k}": float(ev.pass_at(k).mean()) for k in config.ks if k <= config.eval_samples
    }
    out["distinct_correct"] = float(ev.distinct.mean())
    out["top1_mass"] = ev.top1
    out["token_entropy"] = ev.entropy
    out["profile"] = ev.profile
    return out


METRICS = ("distinct_correct", "top1_mass", "token_entropy", "train_seconds", "train_cpu_seconds")


def rows_for(
    per_system: dict[str, list[dict[str, Any]]], config: DemoConfig, split: str = "test"
) -> list[Any]:
    """Rows: each metric's mean over seeds with a Student-t 95% interval (n = seeds)."""
    from paperstack.records import Row
    from paperstack.stats import mean_ci

    rows = []
    for system, runs in per_system.items():
        names = [f"pass@{k}" for k in config.ks if k <= config.eval_samples] + list(METRICS)
        for metric in names:
            values = [float(r[metric]) for r in runs if metric in r]
            if not values:
                continue
            mean, ci = mean_ci(values)
            timing = metric.startswith("train_")
            unit = "s" if timing else None
            rows.append(
                Row(
                    system=system,
                    metric=metric,
                    value=mean,
                    ci95=ci,
                    n=len(values),
                    split=None if timing else split,
                    unit=unit,
                )
            )
    return rows


def _strongest(
    rows: Sequence[Any], systems: Sequence[str], metric: str, best: Callable[..., Any]
) -> str:
    """The baseline with the best value of ``metric`` (the hardest one to beat)."""
    table = {r.system: r.value for r in rows if r.metric == metric}
    return str(best(systems, key=lambda s: table[s]))


def build_claims(
    rows: Sequence[Any], config: DemoConfig, k: int = 16, split: str = "test"
) -> list[Any]:
    """The issue's four claims, each against the strongest baseline on its metric."""
    from paperstack.records import Claim

    names = [s.name for s in config.systems]
    mosa = next(s.name for s in config.systems if s.mosa_beta > 0)
    nokl = next(s.name for s in config.systems if s.beta == 0 and s.mosa_beta == 0)
    tokenkl = [s.name for s in config.systems if s.beta > 0 and s.mosa_beta == 0]
    baselines = [n for n in names if n != mosa]
    k = min(k, config.eval_samples)
    passk = f"pass@{k}"
    best_kl_passk = _strongest(rows, tokenkl, passk, max)
    best_kl_pass1 = _strongest(rows, tokenkl, "pass@1", max)
    flattest = _strongest(rows, baselines, "top1_mass", min)
    return [
        Claim.compare(
            "mosa_passk_beats_tokenkl",
            f"MOSA's {passk} is higher than token-level KL's (the better of the two betas).",
            rows,
            (mosa, passk, split),
            "gt",
            (best_kl_passk, passk, split),
        ),
        Claim.compare(
            "mosa_passk_beats_nokl",
            f"MOSA's {passk} is higher than GRPO without KL.",
            rows,
            (mosa, passk, split),
            "gt",
            (nokl, passk, split),
        ),
        Claim.compare(
            "mosa_pass1_not_worse",
            "MOSA's pass@1 is no more than 2 points below token-level KL's (the better beta).",
            rows,
            (mosa, "pass@1", split),
            "ge",
            (best_kl_pass1, "pass@1", split),
            margin=-0.02,
        ),
        Claim.compare(
            "mosa_flatter_top1",
            "MOSA's mean top-1 probability mass is lower than every trained baseline's "
            "(compared with the flattest of them).",
            rows,
            (mosa, "top1_mass", split),
            "lt",
            (flattest, "top1_mass", split),
        ),
    ]


def config_dict(config: DemoConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def check_device(device: str) -> str:
    """``cpu`` or an available CUDA device, else a one-line error."""
    import torch

    if device == "cpu":
        return device
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise MosaError(f"--device {device}: CUDA is not available on this machine")
        return device
    raise MosaError(f"--device {device}: use 'cpu' or 'cuda[:N]'")


def profile_figure(profiles: dict[str, list[float]], path: Path) -> Path:
    """Mean order-statistic profile per system (log scale): where the mass sits by rank."""
    import io

    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from paperstack.records import atomic_write

    fig, ax = plt.subplots(figsize=(5.0, 3.2), dpi=120)
    for name, prof in profiles.items():
        ranks = np.arange(1, len(prof) + 1)
        ax.semilogy(ranks, np.maximum(prof, 1e-8), marker="o", label=name)
    ax.set_xlabel("rank r (last = tail bucket)")
    ax.set_ylabel("mean P(r) on own samples")
    ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return atomic_write(path, buf.getvalue())


def passk_figure(rows: Sequence[Any], config: DemoConfig, path: Path) -> Path:
    """pass@k against k per system, with the seed intervals."""
    import io

    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from paperstack.records import atomic_write

    ks = [k for k in config.ks if k <= config.eval_samples]
    fig, ax = plt.subplots(figsize=(5.0, 3.2), dpi=120)
    systems = list(dict.fromkeys(r.system for r in rows))
    for name in systems:
        vals = {r.metric: r for r in rows if r.system == name}
        if f"pass@{ks[0]}" not in vals:
            continue
        y = [vals[f"pass@{k}"].value for k in ks]
        ax.plot(ks, y, marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k")
    ax.set_ylabel("pass@k (held out)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return atomic_write(path, buf.getvalue())


def load_problems(path: Path) -> list[Any]:
    """Countdown problems from a JSONL file, one ``{"numbers": [...], "target": N}`` a line."""
    import json

    from paperstack import tasks
    from paperstack.tasks import TaskError

    task = tasks.get("countdown")
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise MosaError(f"--dataset {path}: cannot read ({exc.strerror or exc})") from None
    problems = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            numbers = [int(x) for x in obj["numbers"]]
            target = int(obj["target"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise MosaError(
                f'--dataset {path}:{i}: expected {{"numbers": [...], "target": N}} ({exc})'
            ) from None
        try:
            problems.append(task.make(numbers, target))  # type: ignore[attr-defined]
        except TaskError as exc:
            raise MosaError(f"--dataset {path}:{i}: {exc}") from None
    if not problems:
        raise MosaError(f"--dataset {path}: no problems in the file")
    return problems


def _cores() -> int:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def _quiet() -> None:
    """Library chatter off: the demo prints its own progress and summary."""
    import warnings

    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="trl")


def _worker_init() -> None:
    """One thread per worker: the workers already fill the cores, and more threads than free
    cores make OpenMP spin (the core's measurement: 3x slower)."""
    import torch

    torch.set_num_threads(1)
    _quiet()


def _job(payload: dict[str, Any], system: System | None, seed: int) -> dict[str, Any]:
    """One unit of the demo: evaluate the base (``system`` None) or train and evaluate."""
    from paperstack import tiny

    config: DemoConfig = payload["config"]
    device = payload["device"]
    if system is None:
        model, tokenizer = tiny.load(payload["base"])
        model.to(device)
        metrics = evaluate_model(model, tokenizer, config, seed, payload["examples"])
        return {"system": "base", "seed": seed, **metrics}
    trained, tokenizer, train_log = run_system(config, system, seed, payload["base"], device)
    metrics = evaluate_model(trained, tokenizer, config, seed, payload["examples"])
    metrics["train_seconds"] = train_log["seconds"]
    metrics["train_cpu_seconds"] = train_log["cpu_seconds"]
    rewards = [h["reward"] for h in train_log["history"]]
    return {"system": system.name, "seed": seed, **metrics, "rewards": rewards}


def run_demo(
    config: DemoConfig,
    out: Path,
    seed: int = 0,
    model: str | None = None,
    dataset: Path | None = None,
    device: str = "cpu",
    progress: bool = True,
    title: str = "",
    workers: int | None = None,
) -> Any:
    """The whole reproduction: base, every system x seed, rows, claims, report, figures.

    ``seed`` shifts the RL seeds (``seed, seed+1, ...``); ``model`` replaces the tiny base by
    a model id or path (it must take the chat template); ``dataset`` replaces the generated
    held-out problems by a JSONL file. The (system, seed) runs are independent, so they run
    in ``workers`` processes of one thread each (default: the cores this process may use).
    Returns the :class:`~paperstack.records.Results`.
    """

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from mosa_rl import __version__
    from paperstack import tiny
    from paperstack.records import (
        JsonlWriter,
        Manifest,
        Results,
        atomic_write_json,
        write_results,
    )
    from paperstack.report import bar_chart, write_report

    device = check_device(device)
    _quiet()
    seeds = tuple(seed + s for s in config.seeds)
    examples = load_problems(dataset) if dataset is not None else eval_problems(config)
    split = "test" if dataset is None else "dataset"
    manifest = Manifest.collect(
        "mosa-rl",
        __version__,
        seed=seed,
        config={
            **config_dict(config),
            "seeds": list(seeds),
            "model": model,
            "dataset": str(dataset) if dataset else None,
            "device": device,
        },
    )
    started = time.perf_counter()
    base: str | Path = model if model is not None else base_model_path(config, progress)
    if model is not None:
        try:
            tiny.load(model)
        except (OSError, ValueError) as exc:
            raise MosaError(f"--model {model}: cannot load ({str(exc).splitlines()[0]})") from None
    jobs: list[tuple[System | None, int]] = []
    for s in seeds:
        jobs.append((None, s))
        jobs.extend((system, s) for system in config.systems)
    workers = max(1, min(workers if workers is not None else _cores(), len(jobs)))
    payload = {"config": config, "base": str(base), "device": device, "examples": examples}
    per_system: dict[str, list[dict[str, Any]]] = {"base": []}
    profiles: dict[str, list[list[float]]] = {"base": []}
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    results_by_job: dict[int, dict[str, Any]] = {}
    with JsonlWriter(out / "runs.jsonl") as log, Progress(*columns, disable=not progress) as bar:
        task_id = bar.add_task(
            f"mosa demo ({workers} worker{'s' if workers > 1 else ''})", total=len(jobs)
        )

        def done(index: int, record: dict[str, Any]) -> None:
            results_by_job[index] = record
            log.write(record)
            bar.advance(task_id)

        if workers == 1:
            for index, (system, s) in enumerate(jobs):
                done(index, _job(payload, system, s))
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init) as pool:
                futures = {
                    pool.submit(_job, payload, system, s): index
                    for index, (system, s) in enumerate(jobs)
                }
                from concurrent.futures import as_completed

                for future in as_completed(futures):
                    done(futures[future], future.result())
    for index in sorted(results_by_job):
        record = dict(results_by_job[index])
        name = record.pop("system")
        record.pop("seed")
        record.pop("rewards", None)
        profiles.setdefault(name, []).append(record.pop("profile"))
        per_system.setdefault(name, []).append(record)
    rows = rows_for(per_system, config, split)
    claims = build_claims(rows, config, split=split)
    results = Results(manifest=manifest.finish(), rows=rows, claims=claims)
    write_results(out / "results.json", results)
    mean_profiles = {k: np.mean(np.array(v), axis=0).tolist() for k, v in profiles.items()}
    atomic_write_json(out / "profiles.json", mean_profiles)
    k = max(kk for kk in config.ks if kk <= config.eval_samples)
    figures = [
        passk_figure(rows, config, out / "pass_at_k.png"),
        bar_chart(rows, f"pass@{k}", out / f"pass_at_{k}.png", split=split),
        profile_figure(mean_profiles, out / "profile.png"),
    ]
    seconds = time.perf_counter() - started
    intro = title or (
        f"GRPO on Countdown from a diverse SFT base ({config.preset} preset), "
        f"{config.grpo_steps} steps x {config.prompts_per_step} prompts x "
        f"{config.num_generations} samples per system and seed; {len(seeds)} seeds; every "
        f"model sampled {config.eval_samples} times on {len(examples)} held-out problems at "
        f"temperature {config.temperature}. Values are means over seeds with Student-t 95% "
        f"intervals (n = seeds). Claims compare MOSA with the strongest baseline on each metric. "
        f"Wall time {seconds:.0f} s."
    )
    write_report(out, results, title=f"mosa-rl {__version__}: demo", intro=intro, figures=figures)
    return results

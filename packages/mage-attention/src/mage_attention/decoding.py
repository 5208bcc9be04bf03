"""KV-cached block-by-block decoding with confidence-based commitment (SDAR / Fast-dLLM style).

For a prompt of ``L`` tokens (a multiple of the block size ``B``) and ``A`` answer tokens:

1. Prefill: the prompt runs once under the block-causal mask; its keys and values fill a
   :class:`~mage_attention.modeling.BlockCache`.
2. Per block: ``B`` [MASK] tokens, ``T`` denoising steps over the frozen cache. Each step runs
   the block through the model (its queries attend over the prefix as the :class:`Policy`
   says, and over the whole block), and commits the ``≈ B/T`` still-masked positions whose
   predicted token is most confident (the model never predicts [MASK]).
3. The committed block runs once more with the cache unfrozen, appending its keys and values;
   the next block starts after it.

With ``probe=True`` every sparse step also runs the exact pass it replaces, to record
attention-mass recall per step, and every step records the exact top-``k`` per layer and KV
head (for the step-1 vs step-t overlap): measurement only, it does not change the tokens.
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
    top_k_overlap,
)
from mage_attention.errors import MageError
from mage_attention.modeling import BlockCache, block_causal_mask, check_block_size, forward_kwargs

__all__ = ["DecodeResult", "Probe", "SparseAttentionState", "generate", "sparse_step"]


@dataclass
class Probe:
    """Per step ``t`` (1-based): the policy's mass recall and the exact top-k overlap with
    step 1, each a list of per-(block, layer) means over the batch and KV heads."""

    recall: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    overlap: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    _first: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict)

    def mean_recall(self, steps: range | None = None) -> float:
        return _mean(self.recall, steps)

    def mean_overlap(self, steps: range | None = None) -> float:
        return _mean(self.overlap, steps)


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
        k_pre, v_pre = self.cache.prefix(layer)
        out, mass, chosen = sparse_step(
            self.policy, layer, self.step, q, k_pre, v_pre, k_blk, v_blk, s, self.backend
        )
        if self.probe is not None:
            if mass is None:
                _, mass = block_attention(q, k_pre, v_pre, k_blk, v_blk, s, with_mass=True)
                assert mass is not None
            self._record(layer, mass, chosen.idx if chosen is not None else None)
        return out

    def _record(self, layer: int, mass: torch.Tensor, idx: torch.Tensor | None) -> None:
        assert self.probe is not None
        t = self.step + 1
        if idx is not None:
            self.probe.recall[t].append(float(mass_recall(mass, idx).mean()))
        top = mass.topk(min(self.policy.budget.k, mass.shape[-1]), dim=-1).indices
        key = (self.block, layer)
        if self.step == 0:
            self.probe._first[key] = top
        elif key in self.probe._first:
            self.probe.overlap[t].append(float(top_k_overlap(top, self.probe._first[key]).mean()))


@dataclass
class DecodeResult:
    """``tokens[n, A]`` generated, and the probe (None unless asked for)."""

    tokens: torch.Tensor
    probe: Probe | None


def _commit_counts(block_size: int, steps: int) -> list[int]:
    """How many tokens each of ``steps`` steps commits: ``B`` spread as evenly as possible."""
    base, extra = divmod(block_size, steps)
    return [base + (1 if i < extra else 0) for i in range(steps)]


@torch.no_grad()
def generate(
    model: Any,
    prompt: torch.Tensor,
    answer_length: int,
    policy: Policy,
    steps: int | None = None,
    probe: bool = False,
    backend: str = "torch",
) -> DecodeResult:
    """Decode ``answer_length`` tokens after ``prompt[n, L]`` block by block (module doc)."""
    config = model.config
    block = int(getattr(config, "block_size", 0) or 0)
    mask_id = getattr(config, "mask_token_id", None)
    if mask_id is None:
        raise MageError("model config: no mask_token_id (not a block-diffusion model)")
    check_block_size(prompt.shape[1], block, "prompt")
    check_block_size(answer_length, block, "answer")
    steps = block if steps is None else steps
    if not 1 <= steps <= block:
        raise MageError(f"steps: must be in 1..block size {block}, got {steps}")
    if isinstance(policy.budget, Budget):
        policy.budget.check(prompt.shape[1])
    n, length = prompt.shape
    device = next(model.parameters()).device
    prompt = prompt.to(device)
    cache = BlockCache()
    kw = forward_kwargs(model, cache)
    state = SparseAttentionState(cache, policy, Probe() if probe else None, backend)
    model(
        input_ids=prompt,
        attention_mask=block_causal_mask(length, block, device),
        use_cache=True,
        **kw,
    )
    out = []
    for b in range(answer_length // block):
        x = torch.full((n, block), int(mask_id), dtype=torch.long, device=device)
        positions = torch.arange(length, length + block, device=device).expand(n, block)
        policy.start_block(b)
        state.block = b
        cache.frozen, state.active = True, True
        for t, count in enumerate(_commit_counts(block, steps)):
            state.step = t
            logits = model(
                input_ids=x, position_ids=positions, use_cache=True, mage_state=state, **kw
            ).logits.float()
            logits[..., int(mask_id)] = float("-inf")
            conf, pred = torch.softmax(logits, -1).max(-1)
            masked = x == mask_id
            conf = conf.masked_fill(~masked, float("-inf"))
            pick = conf.topk(count, dim=-1).indices
            x.scatter_(1, pick, pred.gather(1, pick))
        cache.frozen, state.active = False, False
        model(input_ids=x, position_ids=positions, use_cache=True, **kw)  # commit: append its KV
        out.append(x)
        length += block
    return DecodeResult(torch.cat(out, dim=1).cpu(), state.probe)

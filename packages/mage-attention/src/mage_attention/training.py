"""Training the toy block-diffusion LM: the masked-diffusion loss inside blocks.

For a clean sequence ``x`` (a prompt of ``L`` tokens and ``A`` answer tokens, both multiples of
``B``), a noise level ``τ`` per sequence masks every answer token with probability
``τ`` (``x_τ``). The masked-diffusion ELBO restricted to the answer blocks is

    ℒ = E_τ [ (1/τ) · (1/A) · Σ_{i : x_τ,i = [MASK]} -log p_θ(x_i | x_τ's block, x's earlier) ]

(``τ ~ U(0.1, 1]`` here, which bounds the weight); the demo trains on its unweighted form, the
mean cross-entropy over the masked tokens (:func:`diffusion_loss`). Every answer block is
scored in one forward pass (BD3-LM's vectorised form): the input is ``[x ; x_τ(answers)]``
with the noisy copy at the same positions as the clean answers, and the mask lets clean tokens
see clean blocks ``<=`` theirs (block-causal) and a noisy block see clean blocks ``<`` it and
itself. That is exactly what a noisy block sees when decoding over a KV
cache of committed blocks. Only answers are noised and scored: the prompt is the retrieval
context, not text to model.

:func:`pretrained` trains the demo's model once (a length curriculum, AdamW, cosine schedule)
and caches it under the paperstack cache with a file lock, one entry per prefix of the
curriculum: a curriculum that adds or changes only its last phase starts from the cached model
of the phases before it. Each phase draws its masking noise from its own generator (seeded by
the training seed and the phase's index), so training the phases in one call and resuming a
cached prefix give the same weights.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from mage_attention.errors import MageError
from mage_attention.modeling import ModelSpec, build_model, check_block_size, load_model
from mage_attention.task import MASK, RetrievalTask

__all__ = ["Phase", "diffusion_inputs", "diffusion_loss", "pretrained", "train"]


@dataclass(frozen=True)
class Phase:
    """``steps`` optimizer steps on prompts of ``prompt_length`` tokens.

    ``sharpen``: the weight of an attention-sharpness term added to the loss (:class:`_Sharpen`):
    the mean entropy of each answer-block query's attention over the prefix, in layers
    ``sharpen_from`` and up. 0 (the default) trains on the diffusion loss alone."""

    steps: int
    prompt_length: int
    batch_size: int = 16
    lr: float = 3e-3
    sharpen: float = 0.0
    sharpen_from: int = 1


class _Sharpen:
    """Training-time attention for the sharpness term: SDPA under the batch's mask (what the
    ``"mage"`` attention does without a decoding state), and, in layers ``>= first``, the
    entropy of every noisy-block query's attention over the clean prefix, normalised over the
    prefix (the distribution a shared top-``k`` of that prefix has to cover).

    Why: a tiny model trained on the diffusion loss alone answers the retrieval task with each
    query keeping 80-95% of its prefix mass in its own top-64 and a diffuse tail over the rest;
    the 16 queries of a KV group (8 block positions x 2 heads) then leave about 70% of their
    summed mass in one shared top-64 (validation seeds), below the premise's 90%. Real LLMs
    concentrate it (sinks, sharp retrieval heads); this term gives the toy that property.
    It is passed to the model as ``mage_state`` (the attention forward calls its
    :meth:`attend`), so the model code is the decoder's, unchanged."""

    active = True

    def __init__(self, mask: torch.Tensor, prefix: int, noisy: int, first: int) -> None:
        self.mask = mask
        self.prefix = prefix  # clean tokens before the first noisy block
        self.noisy = noisy  # the noisy copy: the last ``noisy`` rows
        self.first = first
        self.entropies: list[torch.Tensor] = []

    def attend(
        self,
        layer: int,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        scaling: float | None,
    ) -> torch.Tensor:
        s = q.shape[-1] ** -0.5 if scaling is None else float(scaling)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask, scale=s, enable_gqa=True)
        if layer >= self.first and self.prefix > 0:
            rows = q[:, :, -self.noisy :]  # [b, H_q, A, d]
            keys = k[:, :, : self.prefix].repeat_interleave(q.shape[1] // k.shape[1], dim=1)
            logp = torch.log_softmax((rows @ keys.transpose(-1, -2)).float() * s, dim=-1)
            self.entropies.append(-(logp.exp() * logp).sum(-1).mean())
        return out


def diffusion_inputs(
    sequences: torch.Tensor, prompt_length: int, block_size: int, g: torch.Generator
) -> dict[str, torch.Tensor]:
    """``input_ids``, ``position_ids``, ``attention_mask`` (4-D bool), ``labels`` and per-row
    ``weight = 1/τ`` for one masked-diffusion step on ``sequences[n, L + A]``.

    A prompt that ends inside a block (``L mod B != 0``, the demo's questions) puts its tail in
    the noisy copy of that block unmasked, as decoding sees it: the copy starts at the block
    boundary ``⌊L/B⌋·B``, and only positions from ``L`` on are ever masked and scored."""
    n, total = sequences.shape
    start = prompt_length // block_size * block_size  # a prompt tail shares the first block
    answers = total - start
    check_block_size(answers, block_size, "answer")
    tau = torch.rand(n, 1, generator=g).clamp_min(0.1)  # bounds the 1/τ weight's variance
    noisable = torch.arange(start, total) >= prompt_length  # the prompt tail is never noised
    masked = (torch.rand(n, answers, generator=g) < tau) & noisable
    none = ~masked.any(1)  # every row scores at least one token
    pick = (
        prompt_length
        - start
        + torch.randint(0, total - prompt_length, (int(none.sum()),), generator=g)
    )
    masked[none, pick] = True
    clean_answers = sequences[:, start:]
    noisy = clean_answers.masked_fill(masked, MASK)
    input_ids = torch.cat([sequences, noisy], dim=1)
    pos = torch.arange(total)
    position_ids = torch.cat([pos, pos[start:]]).expand(n, -1)
    blocks = pos // block_size
    noisy_blocks = blocks[start:]
    clean = blocks[None, :] <= blocks[:, None]  # [total, total]
    noisy_sees_clean = blocks[None, :] < noisy_blocks[:, None]  # [A, total]
    noisy_sees_noisy = noisy_blocks[None, :] == noisy_blocks[:, None]  # [A, A]
    mask = torch.cat(
        [
            torch.cat([clean, torch.zeros(total, answers, dtype=torch.bool)], 1),
            torch.cat([noisy_sees_clean, noisy_sees_noisy], 1),
        ],
        0,
    )
    labels = torch.full_like(input_ids, -100)
    labels[:, total:] = clean_answers.masked_fill(~masked, -100)
    return {
        "input_ids": input_ids,
        "position_ids": position_ids,
        "attention_mask": mask.view(1, 1, *mask.shape),
        "labels": labels,
        "weight": (1.0 / tau).squeeze(1),
    }


def diffusion_loss(
    model: Any, batch: dict[str, torch.Tensor], weighted: bool = False, **model_kwargs: Any
) -> torch.Tensor:
    """The masked-diffusion loss of one :func:`diffusion_inputs` batch: the mean cross-entropy
    over the masked tokens, or with ``weighted`` the ``1/τ``-weighted ELBO of the module doc.

    The demo trains unweighted (SDAR's choice): at the CPU's few hundred steps the ``1/τ``
    weights' variance (up to 10x on lightly masked rows) slowed learning down. ``model_kwargs``
    go to the model's forward (the sharpness term's attention, :class:`_Sharpen`)."""
    logits = model(
        input_ids=batch["input_ids"],
        position_ids=batch["position_ids"],
        attention_mask=batch["attention_mask"],
        use_cache=False,
        **model_kwargs,
    ).logits
    labels = batch["labels"]
    answers = labels.shape[1] - int(batch["position_ids"][0].max()) - 1  # the noisy copy's width
    ce = F.cross_entropy(logits.float().transpose(1, 2), labels, reduction="none")  # [n, T]
    if weighted:
        return (ce.sum(1) * batch["weight"] / max(answers, 1)).mean()
    return ce.sum() / (labels != -100).sum().clamp_min(1)


def train(
    model: Any,
    task: RetrievalTask,
    phases: Sequence[Phase],
    seed: int = 0,
    progress: Callable[[float], None] | None = None,
    first_phase: int = 0,
) -> list[float]:
    """AdamW over ``phases`` (warmup then cosine per phase); returns the loss per step.

    ``first_phase``: the index of ``phases[0]`` in its curriculum, when resuming a model
    trained on the phases before it (data and masking noise are seeded by that index, so the
    resumed run equals the uninterrupted one)."""
    block = int(model.config.block_size)
    losses: list[float] = []
    model.train()
    for p_i, phase in enumerate(phases, start=first_phase):
        g = torch.Generator().manual_seed(seed * 1_000_003 + p_i)
        phase_task = task.at_length(phase.prompt_length)
        opt = torch.optim.AdamW(model.parameters(), lr=phase.lr, weight_decay=0.01)
        warm = max(1, phase.steps // 10)

        def lr_at(step: int, phase: Phase = phase, warm: int = warm) -> float:
            if step < warm:
                return (step + 1) / warm
            return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, phase.steps - warm)))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
        for step in range(phase.steps):
            data = phase_task.generate(
                phase.batch_size, seed=seed * 1_000_003 + p_i * 10_007 + step
            )
            batch = diffusion_inputs(data.sequences, data.prompt.shape[1], block, g)
            if phase.sharpen > 0:
                prefix = data.prompt.shape[1] // block * block
                sharp = _Sharpen(batch["attention_mask"], prefix,
                                 data.sequences.shape[1] - prefix, phase.sharpen_from)  # fmt: skip
                loss = diffusion_loss(model, batch, mage_state=sharp)
                loss = loss + phase.sharpen * torch.stack(sharp.entropies).mean()
            else:
                loss = diffusion_loss(model, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            if progress is not None:
                progress(losses[-1])
    model.eval()
    return losses


def _key(spec: ModelSpec, task: RetrievalTask, phases: Sequence[Phase], seed: int) -> str:
    code = "".join(
        Path(__file__).with_name(name).read_text()
        for name in ("training.py", "task.py", "modeling.py")
    )
    blob = json.dumps(
        [asdict(spec), asdict(task), [asdict(p) for p in phases], seed], sort_keys=True
    )
    return hashlib.sha256((blob + code).encode()).hexdigest()[:16]


def pretrained(
    spec: ModelSpec,
    task: RetrievalTask,
    phases: Sequence[Phase],
    seed: int = 0,
    cache_dir: str | Path | None = None,
    progress: Callable[[float], None] | None = None,
) -> Any:
    """The demo's trained model: trained once per (spec, task, phases, seed, code), then loaded
    from ``<paperstack cache>/mage-attention/bd-<digest>`` (file-locked: two processes train
    once; written to a temporary folder and renamed, so a killed run leaves no entry).

    A curriculum of several phases resumes the cached model of ``phases[:-1]`` (trained first,
    and cached, when absent) and trains only the last phase: lengthening or adding a final
    phase costs that phase alone."""
    from paperstack.cache import build_once, cache_root

    if not phases:
        raise MageError("training: needs at least one phase")
    path = cache_root(cache_dir) / "mage-attention" / f"bd-{_key(spec, task, phases, seed)}"

    def build(tmp: Path) -> None:
        if len(phases) > 1:
            model = pretrained(spec, task, phases[:-1], seed, cache_dir, progress)
        else:
            model = build_model(spec, task.vocab_size, MASK, seed)
        train(model, task, phases[-1:], seed, progress, first_phase=len(phases) - 1)
        model.save_pretrained(tmp)  # writes config.json, the entry's marker

    build_once(path, build, marker="config.json")
    return load_model(path)

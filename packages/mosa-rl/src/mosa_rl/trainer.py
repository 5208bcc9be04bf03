"""``MOSATrainer``: trl's ``GRPOTrainer`` plus the MOSA term, and its config ``MOSAConfig``.

The smallest change that carries the method, in two overrides of trl 1.16's private methods:

- ``_generate_and_score_completions``: after trl has sampled and scored a generation batch,
  the base model's per-sequence order-statistic sums ``Σ_t q_t^{(r)}`` (``[B, K+1]``, no
  gradient) are added to the batch as ``mosa_ref_profile``. trl shuffles and splits that
  batch into micro-batches along the first axis, so every micro-batch carries exactly the
  reference sums of its own tokens. The base model is the policy with its peft adapter
  disabled (no second copy), else trl's own reference model when ``beta > 0``, else a frozen
  copy made once at construction (or a ``ref_model`` the caller passes).
- ``_compute_loss``: trl's loss runs unchanged (GRPO clip objective, and token-level k3 KL
  when ``beta > 0``, so both regularisers stay available side by side); a forward hook on the
  backbone keeps the final hidden states of that same forward, and the policy profile is
  computed from them through the LM head (chunked and checkpointed) — no second forward.
  ``loss += mosa_beta · KL(P̄ ‖ Q̄)`` (or ``KL(Q̄ ‖ P̄)``), with ``P̄, Q̄`` pooled over the
  micro-batch's completion tokens.

Under data parallelism (``accelerate launch``, DDP) the profile is pooled over every rank's
tokens: the per-rank sums are all-reduced, so ``P̄`` and the objective are those of the whole
batch, whatever the world size (:func:`~mosa_rl.loss.pooled_profile`). DeepSpeed ZeRO-3 and FSDP
partition the LM head, whose full weight the profile needs; they are refused with one error
rather than run wrong. ZeRO-1/2 keep whole parameters and prepare the frozen base as trl
prepares its reference (``prepare_deepspeed``).

These overrides are written against trl 1.16 (pinned ``trl>=1.16,<1.17``);
``tests/test_trl_api.py`` fails loudly when trl changes the signatures or the batch keys
they rely on.

With ``mosa_beta = 0`` the trainer is exactly ``GRPOTrainer``, which is how the demo runs its
baselines in the same harness.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch
from accelerate.utils import is_peft_model
from transformers import PreTrainedModel
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import use_adapter

from mosa_rl.errors import MosaError
from mosa_rl.loss import check_top_k, pooled_profile, profile_kl, profile_sums_from_hidden

__all__ = ["MOSAConfig", "MOSATrainer", "check_sharding"]

REF_KEY = "mosa_ref_profile"


@dataclass
class MOSAConfig(GRPOConfig):
    """``GRPOConfig`` plus MOSA's four knobs.

    Defaults follow the research notes (K in 16-64 for real vocabularies, ``β_M`` 0.05-1,
    reverse KL, token-level KL off: trl's ``beta`` defaults to 0). The demo, with a
    103-token character vocabulary, uses a smaller K (see its config).
    """

    mosa_beta: float = field(
        default=0.1, metadata={"help": "Weight β_M of KL(P̄‖Q̄); 0 turns MOSA off (plain GRPO)."}
    )
    mosa_top_k: int = field(
        default=16,
        metadata={"help": "Ranks K kept exactly; the rest of the mass is one tail bucket."},
    )
    mosa_kl: str = field(
        default="reverse",
        metadata={"help": "'reverse' = KL(P̄‖Q̄) (policy profile first), 'forward' = KL(Q̄‖P̄)."},
    )
    mosa_chunk_size: int = field(
        default=4096,
        metadata={"help": "Tokens per checkpointed LM-head chunk when computing the profile."},
    )

    def __post_init__(self) -> None:
        if not self.mosa_beta >= 0.0:
            raise MosaError(f"mosa_beta={self.mosa_beta!r}: must be >= 0")
        if isinstance(self.mosa_top_k, bool) or not isinstance(self.mosa_top_k, int):
            raise MosaError(f"mosa_top_k={self.mosa_top_k!r}: must be a positive integer")
        if self.mosa_top_k < 1:
            raise MosaError(f"mosa_top_k={self.mosa_top_k}: must be a positive integer")
        if self.mosa_kl not in ("reverse", "forward"):
            raise MosaError(f"mosa_kl={self.mosa_kl!r}: must be 'reverse' or 'forward'")
        if self.mosa_chunk_size < 1:
            raise MosaError(f"mosa_chunk_size={self.mosa_chunk_size}: must be >= 1")
        super().__post_init__()


def check_sharding(deepspeed_plugin: Any, fsdp_enabled: bool) -> None:
    """Refuse the parallel setups that partition parameters: the profile needs the whole LM head.

    DeepSpeed ZeRO-3 and FSDP shard every weight across ranks (a rank's head reads shape 0 outside
    the wrapped forward), and the rollout-time base profile would come from a sharded copy.
    Gathering the head for a second matmul outside the wrapped forward is not implemented, so
    these configurations get one clear error instead of a silent wrong loss. ZeRO-1/2 (sharded
    optimizer state and gradients, whole parameters) and plain DDP are supported.
    """
    if fsdp_enabled:
        raise MosaError(
            "FSDP: not supported with mosa_beta > 0 (FSDP shards the LM head the order-statistic "
            "profile needs); use DDP or DeepSpeed ZeRO-1/2, or mosa_beta=0 for plain GRPO"
        )
    if deepspeed_plugin is not None:
        stage = int(getattr(deepspeed_plugin, "zero_stage", 0) or 0)
        if stage >= 3:
            raise MosaError(
                "DeepSpeed ZeRO-3: not supported with mosa_beta > 0 (ZeRO-3 partitions the LM "
                "head the order-statistic profile needs); use ZeRO-1/2 or DDP, or mosa_beta=0"
            )


def _causal_lm(model: Any) -> Any:
    """The ``*ForCausalLM`` under accelerate / peft wrappers."""
    while hasattr(model, "module") and not isinstance(model, PreTrainedModel):
        model = model.module  # DDP / DataParallel wrappers
    if is_peft_model(model):
        model = model.get_base_model()
    return model


def _head(model: Any) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor | None, float | None]:
    """(backbone, LM-head weight, bias, final logit soft-cap) of a causal LM."""
    lm = _causal_lm(model)
    head = lm.get_output_embeddings()
    if head is None:
        raise MosaError(f"{type(lm).__name__}: has no output embeddings (LM head)")
    softcap = getattr(lm.config.get_text_config(), "final_logit_softcapping", None)
    return lm.base_model, head.weight, getattr(head, "bias", None), softcap


def _vocab(model: Any) -> int:
    return int(_head(model)[1].shape[0])


def _last_hidden(output: Any) -> torch.Tensor:
    hidden = getattr(output, "last_hidden_state", None)
    return output[0] if hidden is None else hidden


class MOSATrainer(GRPOTrainer):
    """GRPO with the MOSA regulariser (see the module docstring for what is overridden).

    Takes ``GRPOTrainer``'s arguments, an ``args`` of :class:`MOSAConfig`, and optionally
    ``ref_model``: the base model whose profile the policy is held to (default: the policy
    as it is at construction, through its disabled peft adapter when it has one).
    """

    args: MOSAConfig

    def __init__(
        self,
        model: Any,
        reward_funcs: Any = None,
        args: MOSAConfig | None = None,
        *more: Any,
        ref_model: PreTrainedModel | None = None,
        **kwargs: Any,
    ) -> None:
        if args is not None and not isinstance(args, MOSAConfig):
            raise MosaError(f"args: expected a MOSAConfig, got {type(args).__name__}")
        if args is None:
            args = MOSAConfig(output_dir="mosa-output")
        super().__init__(model, reward_funcs, args, *more, **kwargs)
        self.mosa_beta = float(args.mosa_beta)
        self.mosa_top_k = check_top_k(args.mosa_top_k, _vocab(self.model))
        self._mosa_ref: Any = None
        if self.mosa_beta == 0.0:
            return
        check_sharding(getattr(self.accelerator.state, "deepspeed_plugin", None),
                       bool(self.is_fsdp_enabled))  # fmt: skip
        if ref_model is not None:
            if _vocab(ref_model) != _vocab(self.model):
                raise MosaError(
                    f"ref_model: vocabulary of {_vocab(ref_model)} tokens, but the policy has "
                    f"{_vocab(self.model)}; the order-statistic profiles must rank one vocabulary"
                )
            self._mosa_ref = self._prepare_ref(ref_model)
        elif is_peft_model(self.accelerator.unwrap_model(self.model)):
            self._mosa_ref = None  # the policy with its adapter disabled is the base model
        elif self.ref_model is not None:
            self._mosa_ref = self.ref_model  # trl loaded one for its token-level KL: share it
        else:
            frozen = copy.deepcopy(_causal_lm(self.model))
            # trl patched the policy's forward (fused head) and, with cast_lm_head_to_fp32, its
            # head's forward; the copy keeps those closures, which point at the policy's own
            # modules. The profile needs neither (it applies the copy's head weight itself).
            frozen.__dict__.pop("forward", None)
            head = frozen.get_output_embeddings()
            if head is not None:
                head.__dict__.pop("forward", None)
            self._mosa_ref = self._prepare_ref(frozen)

    def _prepare_ref(self, model: PreTrainedModel) -> Any:
        """Frozen, in eval mode, and prepared as trl prepares its own reference model."""
        model.eval()
        model.requires_grad_(False)
        if self.is_deepspeed_enabled:
            from trl.models import prepare_deepspeed

            return prepare_deepspeed(model, self.accelerator)
        return self.accelerator.prepare_model(model, evaluation_mode=True)

    # ------------------------------------------------------------------ rollout side

    def _profile_sums(
        self, model: Any, inputs: dict[str, Any], *, grad: bool, hidden: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-sequence order-statistic sums ``[B, K+1]`` over the completion tokens, and the
        token mask. Runs the backbone unless its final ``hidden`` states are given."""
        prompt_ids, completion_ids = inputs["prompt_ids"], inputs["completion_ids"]
        mask = inputs["completion_mask"]
        if "tool_mask" in inputs:
            mask = mask * inputs["tool_mask"]
        mask = mask.bool()
        backbone, weight, bias, softcap = _head(model)
        if hidden is None:
            input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
            attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
            with torch.set_grad_enabled(grad):
                hidden = _last_hidden(backbone(input_ids=input_ids, attention_mask=attention))
        width = completion_ids.size(1)
        states = hidden[:, -width - 1 : -1]  # position t predicts token t + 1
        seq = mask.nonzero(as_tuple=True)[0]
        with torch.set_grad_enabled(grad):
            sums = profile_sums_from_hidden(
                states[mask],
                weight,
                bias,
                seq,
                completion_ids.size(0),
                self.mosa_top_k,
                temperature=self.temperature,
                softcap=softcap,
                chunk_size=self.args.mosa_chunk_size,
            )
        return sums, mask

    @torch.no_grad()
    def _reference_profile_sums(self, batch: dict[str, Any]) -> torch.Tensor:
        size = self.args.per_device_train_batch_size
        parts = []
        for start in range(0, batch["completion_ids"].size(0), size):
            chunk = {k: v[start : start + size] for k, v in batch.items() if k in _SEQ_KEYS}
            if not bool(chunk["completion_mask"].any()):
                rows = chunk["completion_ids"].size(0)
                parts.append(torch.zeros(rows, self.mosa_top_k + 1, device=self.accelerator.device))
                continue
            if self._mosa_ref is not None:
                sums, _ = self._profile_sums(self._mosa_ref, chunk, grad=False)
            else:
                unwrapped = self.accelerator.unwrap_model(self.model)
                name = "ref" if "ref" in unwrapped.peft_config else None
                with use_adapter(unwrapped, adapter_name=name):
                    sums, _ = self._profile_sums(self.model, chunk, grad=False)
            parts.append(sums)
        return torch.cat(parts, dim=0)

    def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        batch = super()._generate_and_score_completions(inputs)
        if self.mosa_beta > 0.0:
            batch[REF_KEY] = self._reference_profile_sums(batch)
        return batch

    # ------------------------------------------------------------------ loss side

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        if self.mosa_beta == 0.0:
            return super()._compute_loss(model, inputs)
        captured: list[torch.Tensor] = []
        backbone = _head(model)[0]
        handle = backbone.register_forward_hook(
            lambda _module, _args, output: captured.append(_last_hidden(output))
        )
        try:
            loss = super()._compute_loss(model, inputs)
        finally:
            handle.remove()
        mode = "train" if model.training else "eval"
        mask = inputs["completion_mask"].bool()
        if "tool_mask" in inputs:
            mask = mask & inputs["tool_mask"].bool()
        width = self.mosa_top_k + 1
        if bool(mask.any()):
            hidden = torch.cat(captured, dim=0)
            sums, _ = self._profile_sums(model, inputs, grad=True, hidden=hidden)
            local = sums.sum(0)
        else:  # every completion masked (e.g. all truncated): this rank adds nothing
            local = torch.zeros(width, dtype=torch.float32, device=loss.device)
        ref_local = inputs[REF_KEY].sum(0).to(local)
        tokens = mask.sum().to(local).reshape(1)
        # Pool over every rank: all ranks take part in this all-reduce, even one whose tokens
        # are all masked, so the collective never deadlocks.
        stats = torch.cat([local.detach(), ref_local, tokens])
        world = self.accelerator.num_processes
        if world > 1:
            stats = self.accelerator.reduce(stats, reduction="sum")
        n_total = stats[-1]
        if not bool(n_total > 0):
            return loss
        p = pooled_profile(local, stats[:width], n_total)
        q = stats[width : 2 * width] / n_total
        kl = profile_kl(p, q, self.args.mosa_kl)  # type: ignore[arg-type]
        normalizer = self.current_gradient_accumulation_steps if mode == "train" else 1.0
        self._metrics[mode]["mosa/kl"].append(float(kl.detach()))
        self._metrics[mode]["mosa/top1_policy"].append(float(p[0].detach()))
        self._metrics[mode]["mosa/top1_ref"].append(float(q[0]))
        # DDP averages the ranks' gradients; each rank holds the gradient of its own tokens'
        # share of KL(P̄‖Q̄), so the world size restores the gradient of the pooled objective.
        return loss + self.mosa_beta * world * kl / normalizer


_SEQ_KEYS = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "tool_mask")

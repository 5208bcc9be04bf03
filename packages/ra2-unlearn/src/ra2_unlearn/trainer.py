"""``UnlearnTrainer``: one ``transformers.Trainer`` subclass running RA^2 and every baseline.

Each batch carries a forget half and a retain half (``forget_input_ids``, ``retain_labels``...,
from :class:`ra2_unlearn.data.ForgetRetainCollator`); :meth:`UnlearnTrainer.compute_loss`
gathers what the configured method needs (logits, or layer hidden states through forward
hooks, from the model and from a frozen reference copy) and calls the pure loss functions in
:mod:`ra2_unlearn.losses`. Everything else (optimiser, clipping, accelerate/DDP, logging) is
the Trainer's, so the same code runs on a laptop CPU or several GPUs, and every method gets
the same steps, batch and optimiser (the "same harness and budget").
"""

from __future__ import annotations

import copy
import glob
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel, Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_callback import PrinterCallback, ProgressCallback

from paperstack.progress import Progress
from paperstack.tasks import Example
from ra2_unlearn import losses
from ra2_unlearn.anchors import AnchorBank, carrying_positions
from ra2_unlearn.config import UnlearnConfig
from ra2_unlearn.data import (
    ForgetRetainCollator,
    ForgetRetainDataset,
    check_vocabulary_overlap,
    encode,
    pad_batch,
)
from ra2_unlearn.errors import UnlearnError
from ra2_unlearn.modules import (
    capture_layers,
    decoder_layers,
    select_trainable,
    trainable_module_names,
)

__all__ = [
    "UnlearnResult",
    "UnlearnTrainer",
    "build_anchor_bank",
    "load_model",
    "ra2_positions",
    "training_arguments",
    "unlearn",
]


def _side(inputs: dict[str, torch.Tensor], side: str) -> dict[str, torch.Tensor]:
    return {k[len(side) + 1 :]: v for k, v in inputs.items() if k.startswith(side + "_")}


class UnlearnTrainer(Trainer):
    """A Trainer whose loss is an unlearning objective over paired forget/retain batches.

    ``ref_model`` is the frozen copy theta_0 (NPO's reference, RMU's and RA^2's retain
    targets, RA^2's forget anchors); ``anchors`` is RA^2's :class:`AnchorBank`. Only the
    parameters the config selects train (RMU/RA^2: MLP down-projections of
    ``trained_layers``), so the Trainer's optimiser sees only those.
    """

    def __init__(
        self,
        model: PreTrainedModel | nn.Module,
        ref_model: PreTrainedModel | nn.Module,
        config: UnlearnConfig,
        args: TrainingArguments,
        train_dataset: ForgetRetainDataset,
        data_collator: ForgetRetainCollator,
        anchors: AnchorBank | None = None,
        **kwargs: Any,
    ) -> None:
        # The layer is resolved from the model's depth when not given, and checked only where
        # the method uses it (GA on the whole model has no layer to be out of range).
        config = config.for_model(model)
        self.config = config
        n_layers = len(decoder_layers(model))
        assert config.layer is not None
        # Remember every flag this trainer changes, so train() can hand the caller's modules
        # back as they were (select_trainable freezes most of the model, the reference is
        # frozen whole).
        self._saved_flags = [
            (p, p.requires_grad) for m in (model, ref_model) for p in m.parameters()
        ]
        select_trainable(model, config.resolved_trainable(), config.resolved_trained_layers())
        if config.method == "ra2" and anchors is None:
            raise UnlearnError("method 'ra2' needs an anchor bank (see build_anchor_bank)")
        if anchors is not None and anchors.layer != config.layer:
            raise UnlearnError(
                f"anchor bank is for layer {anchors.layer}, config.layer is {config.layer}"
            )
        super().__init__(
            model=model,
            args=args,
            train_dataset=train_dataset,
            data_collator=data_collator,
            **kwargs,
        )
        self.loss_is_scaled_for_ga = False  # our loss is a per-batch mean
        ref: Any = ref_model
        self.ref_model: nn.Module = ref.to(self.args.device).eval()
        for p in self.ref_model.parameters():
            p.requires_grad_(False)
        self.anchors = anchors.to(self.args.device) if anchors is not None else None
        self.retain_layers = list(range(config.layer, n_layers)) if config.latent else []
        self.control_vector: torch.Tensor | None = None
        if config.method == "rmu":
            # WMDP: u ~ U[0,1)^d normalised, scaled by the steering coefficient; fixed per run.
            d = int(getattr(getattr(model, "config", None), "hidden_size", 0)) or self._width()
            g = torch.Generator().manual_seed(int(args.seed))
            u = torch.rand(d, generator=g)
            self.control_vector = (config.steering_coeff * u / u.norm()).to(self.args.device)
        self.loss_parts: list[dict[str, float]] = []
        #: Tokens whose prediction is not forgotten content (the end of an answer).
        eos = getattr(getattr(model, "config", None), "eos_token_id", None)
        self.stop_ids: list[int] = (
            [] if eos is None else list(eos if isinstance(eos, list) else [eos])
        )

    def train(self, *args: Any, **kwargs: Any) -> Any:
        """``Trainer.train``, then every ``requires_grad`` flag restored as the caller had it."""
        try:
            return super().train(*args, **kwargs)
        finally:
            self.restore_flags()

    def restore_flags(self) -> None:
        """Put back the ``requires_grad`` flags the model and the reference had at init."""
        for p, flag in self._saved_flags:
            p.requires_grad_(flag)

    def _width(self) -> int:
        ell = self._ell()
        with torch.no_grad(), capture_layers(self.ref_model, [ell]) as store:
            self.ref_model(input_ids=torch.zeros((1, 1), dtype=torch.long, device=self.args.device))
        return int(store[ell].shape[-1])

    def _ell(self) -> int:
        """The hooked layer l (always resolved by ``for_model`` in ``__init__``)."""
        assert self.config.layer is not None
        return self.config.layer

    def _forget_mask(self, side: dict[str, torch.Tensor]) -> torch.Tensor:
        mask = side["attention_mask"].bool()
        if self.config.forget_tokens == "answer":
            pos = torch.arange(mask.shape[1], device=mask.device)[None, :]
            mask = mask & (pos >= (side["prompt_len"][:, None] - 1))
        return mask

    def compute_loss(  # type: ignore[override]
        self,
        model: nn.Module,
        inputs: dict[str, torch.Tensor],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        """The configured method's loss on one forget+retain batch (see :mod:`.losses`)."""
        f, r = _side(inputs, "forget"), _side(inputs, "retain")
        method = self.config.method
        parts: dict[str, float]
        if method in ("ga", "graddiff", "npo", "simnpo"):
            loss, parts = self._likelihood_loss(model, f, r)
        elif method == "rmu":
            loss, parts = self._rmu_loss(model, f, r)
        else:
            loss, parts = self._ra2_loss(model, f, r)
        self.loss_parts.append({"loss": float(loss.detach()), **parts})
        return (loss, None) if return_outputs else loss

    def _nll(self, model: nn.Module, side: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        logits = model(input_ids=side["input_ids"], attention_mask=side["attention_mask"]).logits
        return losses.sequence_nll(logits, side["labels"])

    def _likelihood_loss(
        self, model: nn.Module, f: dict[str, torch.Tensor], r: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        cfg = self.config
        nll_f, n_f = self._nll(model, f)
        if cfg.method == "ga":
            loss = losses.ga_loss(nll_f, n_f)
            return loss, {"forget_nll": float((nll_f.sum() / n_f.sum()).detach())}
        nll_r, n_r = self._nll(model, r)
        retain = nll_r.sum() / n_r.sum().clamp_min(1)
        if cfg.method == "graddiff":
            loss = losses.graddiff_loss(nll_f, n_f, nll_r, n_r, cfg.alpha)
        elif cfg.method == "npo":
            with torch.no_grad():
                ref_nll, _ = self._nll(self.ref_model, f)
            loss = losses.npo_loss(nll_f, ref_nll, cfg.npo_beta) + cfg.alpha * retain
        else:
            loss = losses.simnpo_loss(nll_f, n_f, cfg.simnpo_beta, cfg.simnpo_delta)
            loss = loss + cfg.alpha * retain
        return loss, {
            "forget_nll": float((nll_f.sum() / n_f.sum()).detach()),
            "retain_nll": float(retain.detach()),
        }

    def _hidden(
        self, model: nn.Module, side: dict[str, torch.Tensor], layers: Sequence[int]
    ) -> tuple[dict[int, torch.Tensor], torch.Tensor]:
        with capture_layers(model, layers) as store:
            out = model(input_ids=side["input_ids"], attention_mask=side["attention_mask"])
        return dict(store), out.logits

    def _rmu_loss(
        self, model: nn.Module, f: dict[str, torch.Tensor], r: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        ell = self._ell()
        assert self.control_vector is not None
        hf, _ = self._hidden(model, f, [ell])
        hr, _ = self._hidden(model, r, [ell])
        with torch.no_grad():
            hr0, _ = self._hidden(self.ref_model, r, [ell])
        fmask, rmask = self._forget_mask(f), r["attention_mask"].bool()
        loss = losses.rmu_loss(
            hf[ell], fmask, self.control_vector, hr[ell], hr0[ell], rmask, self.config.alpha
        )
        with torch.no_grad():
            target = self.control_vector.expand_as(hf[ell])
            forget = float(losses.masked_mse(hf[ell], target, fmask))
        return loss, {
            "forget": forget,
            "retain": (float(loss.detach()) - forget) / max(self.config.alpha, 1e-12),
        }

    def _ra2_loss(
        self, model: nn.Module, f: dict[str, torch.Tensor], r: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        cfg, ell = self.config, self._ell()
        assert self.anchors is not None
        rmask = r["attention_mask"].bool()
        hf, _ = self._hidden(model, f, [ell])
        hr, logits_r = self._hidden(model, r, self.retain_layers)
        with torch.no_grad():
            hf0, logits_f0 = self._hidden(self.ref_model, f, [ell])
            hr0, logits_r0 = self._hidden(self.ref_model, r, self.retain_layers)
            fmask, exclude = self.ra2_positions(hf0[ell], logits_f0, f)
            targets = torch.zeros_like(hf0[ell])
            if bool(fmask.any()):
                targets[fmask] = self.anchors.targets(
                    hf0[ell][fmask], cfg.k, cfg.tau, cfg.target, exclude
                )
        forget = losses.ra2_forget_loss(hf[ell], targets, fmask)
        retain = losses.ra2_retain_loss(
            [hr[i] for i in self.retain_layers],
            [hr0[i] for i in self.retain_layers],
            rmask,
            logits_r,
            logits_r0,
            cfg.retain_kl,
        )
        loss = forget + cfg.alpha * retain
        return loss, {
            "forget": float(forget.detach()),
            "retain": float(retain.detach()),
            "attracted": float(fmask.sum()),
        }

    @torch.no_grad()
    def ra2_positions(
        self, ref_states: torch.Tensor, ref_logits: torch.Tensor, side: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """RA^2's attracted forget positions ``[B, T]`` and, per attracted position, the token
        its anchors must not support (None when the config keeps 0.1's unfiltered kNN)."""
        return ra2_positions(self.config, self.anchors, ref_states, ref_logits, side,
                             self.stop_ids)  # fmt: skip


def ra2_positions(
    config: UnlearnConfig,
    anchors: AnchorBank | None,
    ref_states: torch.Tensor,
    ref_logits: torch.Tensor,
    side: dict[str, torch.Tensor],
    stop_ids: Sequence[int] = (),
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Which forget positions RA^2 attracts, and the forgotten token each one predicts.

    ``attract="carrying"``: positions whose frozen prediction is the labelled next token
    (:func:`ra2_unlearn.anchors.carrying_positions`), minus exact twins of an anchor;
    ``attract="value"``: those of them whose next token is in the example's value span
    (``side["value_mask"]``); ``attract="all"``: every ``forget_tokens`` position (0.1). The
    excluded support is the next label at each attracted position (with ``exclude_support``).
    """
    mask = side["attention_mask"].bool()
    labels = side["labels"]
    if config.attract in ("carrying", "value"):
        mask = mask & carrying_positions(ref_logits, labels, stop_ids)
        if config.attract == "value":
            value = side.get("value_mask")
            if value is None:
                raise UnlearnError("attract='value': the batch has no value_mask (pad_batch)")
            before_value = torch.zeros_like(mask)
            before_value[:, :-1] = value[:, 1:]
            mask = mask & before_value
        if anchors is not None and bool(mask.any()):
            twins = anchors.twins(ref_states[mask])
            idx = mask.nonzero(as_tuple=True)
            mask[idx[0][twins], idx[1][twins]] = False
    elif config.forget_tokens == "answer":
        pos = torch.arange(mask.shape[1], device=mask.device)[None, :]
        mask = mask & (pos >= (side["prompt_len"][:, None] - 1))
    if not config.exclude_support:
        return mask, None
    nxt = torch.full_like(labels, -1)
    nxt[:, :-1] = labels[:, 1:]
    return mask, nxt[mask]


def build_anchor_bank(
    ref_model: nn.Module,
    tokenizer: Any,
    retain: Sequence[Example],
    config: UnlearnConfig,
    batch_size: int = 64,
    seed: int = 0,
) -> AnchorBank:
    """RA^2's anchor bank from the frozen model's layer-``config.layer`` states on ``retain``."""
    if not retain:
        raise UnlearnError("retain set is empty: RA^2 needs retain tokens for its anchors")
    config = config.for_model(ref_model)
    assert config.layer is not None
    enc = encode(tokenizer, retain)
    device = next(ref_model.parameters()).device
    batches = []
    for s in range(0, len(enc), batch_size):
        b = pad_batch(enc[s : s + batch_size], int(tokenizer.pad_token_id or 0))
        batches.append((b["input_ids"].to(device), b["attention_mask"].to(device)))
    return AnchorBank.build(
        ref_model, batches, config.layer, config.max_anchors, config.pca_rank, seed
    )


@dataclass
class UnlearnResult:
    """What :func:`unlearn` returns: the updated model and the per-step loss parts."""

    model: nn.Module
    log: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0


class _Progress(TrainerCallback):
    """Advance a :class:`paperstack.progress.Progress` once per optimiser step."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.bar.advance()


def training_arguments(
    steps: int,
    lr: float,
    batch_size: int,
    seed: int,
    device: str = "cpu",
    output_dir: str | None = None,
) -> TrainingArguments:
    """The harness's optimiser settings, shared by every method: AdamW at a constant ``lr``
    (the WMDP RMU recipe has no schedule), no weight decay, gradients clipped at 1, no
    checkpoints or logging integrations (the demo records its own rows)."""
    import tempfile

    return TrainingArguments(
        output_dir=output_dir or tempfile.mkdtemp(prefix="ra2-"),
        max_steps=steps,
        per_device_train_batch_size=batch_size,
        learning_rate=lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        seed=seed,
        data_seed=seed,
        logging_strategy="no",
        save_strategy="no",
        report_to=[],
        remove_unused_columns=False,
        disable_tqdm=True,
        use_cpu=device == "cpu",
        dataloader_num_workers=0,
    )


def unlearn(
    model: PreTrainedModel,
    tokenizer: Any,
    forget: Sequence[Example],
    retain: Sequence[Example],
    config: UnlearnConfig,
    steps: int = 100,
    lr: float = 5e-5,
    batch_size: int = 4,
    seed: int = 0,
    ref_model: nn.Module | None = None,
    lora_r: int | None = None,
    device: str = "cpu",
    output_dir: str | None = None,
    progress: bool = False,
    inplace: bool = False,
    callbacks: Sequence[TrainerCallback] = (),
) -> UnlearnResult:
    """Unlearn ``forget`` from ``model`` while keeping ``retain``, with ``config``.

    The defaults are the WMDP RMU recipe's optimiser settings (AdamW, constant lr 5e-5,
    batch 4). Training runs on a copy of ``model`` (``inplace=True`` trains ``model`` itself),
    so the caller's model, its weights and its ``requires_grad`` flags, is left as it was.
    ``callbacks``: extra ``TrainerCallback`` objects (the demo's calibration evaluates the forget
    accuracy every few steps and stops at the matched level).
    ``ref_model`` (the frozen theta_0) defaults to the untouched ``model``; ``lora_r`` wraps
    the copy in a peft LoRA adapter of that rank on the trained modules.
    """
    import math
    import time

    if steps < 1:
        raise UnlearnError(f"steps {steps}: must be >= 1")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise UnlearnError(f"lr {lr}: must be a finite number > 0")
    if batch_size < 1:
        raise UnlearnError(f"batch_size {batch_size}: must be >= 1")
    check_vocabulary_overlap(tokenizer, forget, "forget")
    check_vocabulary_overlap(tokenizer, retain, "retain")
    forget_enc = encode(tokenizer, forget)
    if (
        config.method == "ra2"
        and config.attract == "value"
        and all(e.value is None for e in forget_enc)
    ):
        raise UnlearnError(
            "attract='value': no forget example has a value span (meta['value'] and a fast "
            "tokenizer are needed)"
        )
    dataset = ForgetRetainDataset(forget_enc, encode(tokenizer, retain))
    config = config.for_model(model)  # layer from depth; checked only where it is used
    # The caller's model stays as it was: training runs on a copy (unless ``inplace``), and the
    # untouched original serves as the frozen reference when none is given.
    ref = ref_model if ref_model is not None else (copy.deepcopy(model) if inplace else model)
    if not inplace:
        model = copy.deepcopy(model)
    anchors = (
        build_anchor_bank(ref, tokenizer, retain, config, seed=seed)
        if (config.method == "ra2")
        else None
    )
    if lora_r is not None:
        model = _with_lora(model, config, lora_r)
    args = training_arguments(steps, lr, batch_size, seed, device, output_dir)
    try:
        trainer = UnlearnTrainer(
            model,
            ref,
            config,
            args,
            dataset,
            ForgetRetainCollator(int(tokenizer.pad_token_id or 0)),
            anchors=anchors,
        )
        trainer.remove_callback(PrinterCallback)  # the demo prints its own lines
        trainer.remove_callback(ProgressCallback)
        start = time.perf_counter()
        with Progress(steps, f"unlearning ({config.method})", enabled=progress) as bar:
            trainer.add_callback(_Progress(bar))
            for callback in callbacks:
                trainer.add_callback(callback)
            trainer.train()
    finally:
        if output_dir is None and args.output_dir:
            # The trainer's folder was our temporary one (nothing is saved there:
            # save_strategy "no"); the demo's calibration alone makes hundreds of runs.
            shutil.rmtree(args.output_dir, ignore_errors=True)
    trained: Any = trainer.model
    if lora_r is not None:
        trained = trained.merge_and_unload()
    trained.eval()
    return UnlearnResult(trained, trainer.loss_parts, time.perf_counter() - start)


def _with_lora(model: PreTrainedModel, config: UnlearnConfig, r: int) -> Any:
    """Wrap ``model`` in a LoRA adapter on the modules the config would train."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise UnlearnError("lora_r needs peft: pip install 'ra2-unlearn[peft]'") from None
    which = config.resolved_trainable()
    layers = config.resolved_trained_layers() if which != "all" else ()
    # The exact module names of this architecture (Llama's down_proj, GPT-2's Conv1D c_proj
    # ...), so one code path puts the adapter where the config would train.
    targets = trainable_module_names(model, which, layers)
    lora = LoraConfig(r=r, lora_alpha=2 * r, target_modules=targets, lora_dropout=0.0)
    return get_peft_model(model, lora)


def load_model(name_or_path: str, device: str = "cpu") -> tuple[PreTrainedModel, Any]:
    """A causal LM and its tokenizer by hub id or local folder (``from_pretrained``).

    A local folder is checked first by :func:`paperstack.checkpoint.load_pretrained` (a
    truncated ``model.safetensors``, a ``config.json`` that is not JSON, a missing shard: one
    line naming the file); a model without decoder layers is one line too.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paperstack.checkpoint import load_pretrained

    tok = load_pretrained(name_or_path, AutoTokenizer.from_pretrained)
    loaded: Any = load_pretrained(name_or_path, AutoModelForCausalLM.from_pretrained)
    model = loaded.to(device)
    decoder_layers(model)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return model, tok


#: Suffix of the temporary folder :func:`save_model` writes into (beside the destination).
_SAVING = ".saving"


def save_model(model: Any, tokenizer: Any, out: str | os.PathLike[str]) -> Path:
    """Save ``model`` and ``tokenizer`` (``save_pretrained``) as the folder ``out``, so that a
    failure leaves nothing half-written there.

    ``save_pretrained`` writes ``config.json``, the weights and the tokenizer files straight
    into its folder; a full disk (or a kill) in between left a 0-byte ``config.json`` that the
    next ``from_pretrained`` trips over (issue #46). Here everything is written into a
    temporary folder beside ``out`` (the same file system), each file fsynced, and moved into
    place only when all are complete: a missing or empty ``out`` is replaced by one rename of
    the folder; an ``out`` that already holds files gets each saved file by ``os.replace``
    (the user's other files stay). A failure, Ctrl-C or SIGTERM removes the temporary folder
    and leaves ``out`` as it was; temporaries of killed runs (``.<name>.<pid>.*.saving`` whose
    process is gone) are removed by the next save to the same place.
    """
    out = Path(out)
    parent = out.parent
    parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_saves(parent, out.name)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.{os.getpid()}.", suffix=_SAVING, dir=parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        for item in tmp.rglob("*"):
            if item.is_file():
                with open(item, "rb") as fh:
                    os.fsync(fh.fileno())
        if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
            out.rmdir()
        if not out.exists():
            os.rename(tmp, out)
        else:
            for item in sorted(tmp.iterdir()):
                dest = out / item.name
                if dest.is_dir() and not dest.is_symlink():
                    shutil.rmtree(dest)
                os.replace(item, dest)
            tmp.rmdir()
        _fsync_dir(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _remove_stale_saves(parent: Path, name: str) -> None:
    """Remove ``parent/.<name>.<pid>.*.saving`` folders whose process no longer runs (a save
    killed with SIGKILL, which no handler sees); a live run's folder is left alone."""
    for stale in parent.glob(f".{glob.escape(name)}.*{_SAVING}"):
        pid_text = stale.name[len(name) + 2 :].split(".", 1)[0]
        if not pid_text.isdigit() or not stale.is_dir():
            continue
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            shutil.rmtree(stale, ignore_errors=True)
        except OSError:  # PermissionError: another user's live process
            continue


def _fsync_dir(directory: Path) -> None:
    """Make the renames in ``directory`` durable (where the platform allows a directory fsync)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

"""``opct train``: OPCT on a user's own model and contrastive pairs, saved as a model folder.

The pairs file is JSONL, one pair a line (:func:`opct.load_pairs`)::

    {"prompt": "I'm sure it's Lyon. What is the capital of France?",
     "clean": "What is the capital of France?", "kind": "sycophancy"}

- ``prompt`` (required): the wrapped or cued prompt, what the model answers (on-policy);
- ``clean`` (required): the same request without the wrapper or cue, what the teacher reads;
- ``kind`` (optional, default ``"custom"``) and ``meta`` (optional object): carried along.

Both prompts are single user turns rendered with the model's chat template (a checkpoint
without one gets the core's ``"User: ...\\nAssistant:"`` fallback, one without a pad token
pads with EOS: :func:`opct.tokens.ready_tokenizer`). A bad line is one error naming the file,
line and field; the CLI exits with status 2.

What reaches trl (``OPCTConfig``, a ``DistillationConfig``): steps, batch size, gradient
accumulation, learning rate, bf16 mixed precision, the sampling temperature and response
length; LoRA through peft (``lora_r``; the teacher is then the adapter-disabled model, and the
adapter is merged before saving, so the folder loads with ``from_pretrained`` without peft).
Of trl's SDFT options, the EMA teacher applies (``teacher="ema"``, full fine-tuning only);
importance-sampling clipping does not: OPCT generates a fresh batch for every optimiser step
and its micro-batches all come from the policy before that step, so the importance ratio is 1.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opct.errors import OPCTError
from opct.pairs import Pair

__all__ = ["TrainOptions", "train"]

#: The learning rate when none is given: the research notes' 1e-5 to 5e-5 range is for LoRA on
#: real models; full fine-tuning of a pretrained model wants the low end.
DEFAULT_LR = {"full": 1e-5, "lora": 5e-5}


@dataclass(frozen=True)
class TrainOptions:
    """Everything ``opct train`` passes on (see the module docstring)."""

    steps: int = 100
    batch_size: int = 8
    grad_accum: int = 1
    learning_rate: float | None = None  # None: DEFAULT_LR for full or LoRA training
    max_completion_length: int = 64
    temperature: float = 1.0
    divergence: str = "reverse"
    top_k: int | None = None
    bf16: bool = False
    lora_r: int | None = None  # None: full fine-tuning
    lora_alpha: int | None = None  # None: 2 * lora_r
    teacher: str = "initial"
    teacher_update_rate: float = 0.05
    teacher_sync_steps: int = 1
    seed: int = 0
    device: str = "cpu"

    def lr(self) -> float:
        if self.learning_rate is not None:
            return self.learning_rate
        return DEFAULT_LR["lora" if self.lora_r is not None else "full"]


def command(args: Any) -> int:
    """``opct train`` (parsed ``args``): options and pairs first, the model last, so that bad
    input is refused in one line before anything heavy loads; prints the loss and the folder."""
    from opct.pairs import load_pairs
    from paperstack.contract import check_device, check_model
    from paperstack.progress import quiet_libraries
    from paperstack.records import output_dir

    quiet_libraries()
    names = {f.name for f in dataclasses.fields(TrainOptions)}
    given = {k: v for k, v in vars(args).items() if k in names}
    options = TrainOptions(**(given | {"device": check_device(args.device)}))
    pairs = load_pairs(args.pairs)
    name = str(check_model(args.model))
    with output_dir(args.out) as out:
        losses = train(name, pairs, out, options)["losses"]
    if losses:
        print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {len(losses)} logged steps")
    print(out)
    return 0


def check_bf16(device: str) -> None:
    """Refuse ``--bf16`` in one line where this torch cannot run bf16 on ``device``."""
    import torch

    if device.startswith("cuda"):
        if not torch.cuda.is_bf16_supported():
            raise OPCTError(f"--bf16: the GPU of {device} does not support bf16; drop --bf16")
        return
    try:  # the CPU path: a bf16 matmul under autocast, as the trainer will run it
        with torch.autocast("cpu", dtype=torch.bfloat16):
            torch.ones(2, 2) @ torch.ones(2, 2)
    except RuntimeError as exc:
        raise OPCTError(
            f"--bf16: this build of torch cannot run bf16 on {device} ({exc})"
        ) from None


def _lora(options: TrainOptions) -> Any:
    if options.lora_r is None:
        return None
    try:
        from peft import LoraConfig
    except ImportError:
        raise OPCTError(
            "--lora-r needs peft, which is not installed: pip install 'opct[peft]'"
        ) from None
    return LoraConfig(
        r=options.lora_r,
        lora_alpha=options.lora_alpha or 2 * options.lora_r,
        lora_dropout=0.0,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )


def train(
    model_name: str, pairs: Sequence[Pair], out: Path, options: TrainOptions
) -> dict[str, Any]:
    """Train ``model_name`` with OPCT on ``pairs`` and save it to ``out`` (model, tokenizer,
    ``train.json`` with the options, the loss curve and the time taken). Returns that record."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from opct.harness import TrainSettings, _quiet, _run, opct_config, pairs_dataset
    from opct.tokens import ready_tokenizer
    from opct.trainer import OPCTTrainer
    from paperstack.checkpoint import load_pretrained
    from paperstack.records import atomic_write_json

    if options.bf16:
        check_bf16(options.device)
    peft_config = _lora(options)
    settings = TrainSettings(
        steps=options.steps,
        batch_size=options.batch_size,
        grad_accum=options.grad_accum,
        learning_rate=options.lr(),
        max_completion_length=options.max_completion_length,
        temperature=options.temperature,
        seed=options.seed,
        divergence=options.divergence,
        top_k=options.top_k,
        device=options.device,
        logging_steps=1,
        bf16=options.bf16,
    )
    dataset = pairs_dataset(pairs)
    model: Any = load_pretrained(model_name, AutoModelForCausalLM.from_pretrained)
    tokenizer = ready_tokenizer(load_pretrained(model_name, AutoTokenizer.from_pretrained),
                                model_name)  # fmt: skip
    model.to(options.device)
    teacher = {f"opct_teacher{k}": getattr(options, f"teacher{k}")
               for k in ("", "_update_rate", "_sync_steps")}  # fmt: skip
    args = opct_config(settings, str(out / "trainer"), **teacher)
    trainer = OPCTTrainer(model, args=args, train_dataset=dataset, processing_class=tokenizer,
                          peft_config=peft_config)  # fmt: skip
    start = time.perf_counter()
    result = _run(_quiet(trainer), "opct", "loss")
    trained = trainer.accelerator.unwrap_model(trainer.model)
    if peft_config is not None:
        trained = trained.merge_and_unload()  # a plain model: loads without peft
    trained.float().save_pretrained(out)  # fp32 weights whether or not bf16 autocast ran
    tokenizer.save_pretrained(out)  # the fallback chat template, if any, goes with it
    record = {
        "model": model_name,
        "pairs": len(pairs),
        "options": dataclasses.asdict(options) | {"learning_rate": options.lr()},
        "steps_taken": result.steps,
        "losses": result.losses,
        "divergence": [
            h["opct/divergence"] for h in trainer.state.log_history if "opct/divergence" in h
        ],
        "seconds": time.perf_counter() - start,
    }
    atomic_write_json(out / "train.json", record)
    shutil.rmtree(out / "trainer", ignore_errors=True)  # save_strategy "no": only logs there
    return record

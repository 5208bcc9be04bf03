"""PALL's selector: a causal language model fine-tuned on hindsight-oracle trajectories.

Each hindsight-oracle record (:mod:`pall_lns.oracle`) is one state of an LNS run, serialised as
text by :meth:`Context.text` (instance features, the search phase, each operator's use count and
mean reward, the last ``h`` operators with their rewards) together with the operator whose forked
sub-MIP earned the most reward there, ``o* = argmax_o r_o``. The model is fine-tuned with trl's
``SFTTrainer`` on the conversational prompt-completion pairs ``(text, "OP=<o*>")``, the loss on
the completion only:

    L(theta) = -(1/N) sum_n log p_theta("OP=<o*_n>" <eos> | chat(text_n))

over the informative states (some operator improved: where every reward is 0 the oracle has no
preference and its argmax is arbitrary). At deployment the answer is constrained to the
ensemble: one forward pass of ``chat(text) + "OP="`` and ``o = argmax_{o < K} logit(digit o)``,
so the model cannot answer outside it and never needs a fallback for a bad reply.

The default model is the toy world's tiny Llama (:func:`paperstack.tiny.build_model`, trained
from its random initialisation: it has no language to forget); ``base`` takes any Hugging Face
causal LM folder instead (loaded through :func:`paperstack.checkpoint.load_pretrained`, so a
truncated or corrupt folder is one line naming the file). The trained model is cached under the
paperstack cache, keyed by its data, recipe, base and code, so ``pall demo`` rebuilds it once.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pall_lns.context import Context, context_from_json
from pall_lns.errors import PallError
from paperstack.cache import read_record

__all__ = ["QUICK_RECIPE", "RECIPE", "LMRecipe", "LMSelector", "sft_examples", "train_lm"]

#: Training recipe of the shipped selector, fixed from the size of the training set before any
#: held-out evaluation was run: lr and warmup follow paperstack.tiny's recipes for this preset;
#: 100 steps of 16 are ~40 epochs of the 39 informative training states (of 177: in most states
#: no operator improved within its 0.3 s sub-MIP budget).


@dataclass(frozen=True)
class LMRecipe:
    preset: str = "tiny"  # paperstack.tiny preset, unless a base model folder is given
    steps: int = 100
    batch_size: int = 16
    lr: float = 3e-3
    warmup_ratio: float = 0.05
    weight_decay: float = 0.01
    seed: int = 0


RECIPE = LMRecipe()
#: The record of a trained selector folder (its build_once marker): n_ops, recipe, losses.
MARKER = "pall-lm.json"
#: ``demo --quick``: the micro preset and a few steps exercise the pipeline; it learns little.
QUICK_RECIPE = LMRecipe(preset="micro", steps=20, batch_size=8)


def _text(record: dict[str, Any]) -> str:
    if "context" in record:
        return context_from_json(record["context"]).text()
    if "text" in record:
        return str(record["text"])
    raise PallError("oracle record: neither 'context' nor 'text' is present")


def sft_examples(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prompt-completion chat examples of the informative records (trl's conversational
    prompt-completion format: the loss is on the completion only)."""
    out = []
    for r in records:
        rewards = np.asarray(r["rewards"], dtype=float)
        if not np.any(rewards > 0):
            continue
        out.append(
            {
                "prompt": [{"role": "user", "content": _text(r)}],
                "completion": [{"role": "assistant", "content": f"OP={int(r['label'])}"}],
            }
        )
    if not out:
        raise PallError("oracle records: no informative state (no operator ever improved)")
    return out


def _code_digest() -> str:
    from paperstack.tiny import code_digest

    here = Path(__file__).parent
    return code_digest([here / "lm.py", here / "context.py"])


def _cache_dir(
    records: Sequence[dict[str, Any]], recipe: LMRecipe, base: str | None, n_ops: int
) -> Path:
    import transformers
    import trl

    from paperstack.cache import cache_root

    key = {
        "data": hashlib.sha256(
            json.dumps([(_text(r), r["label"], r["rewards"]) for r in records]).encode()
        ).hexdigest(),
        "recipe": asdict(recipe),
        "base": base,
        "n_ops": n_ops,
        "code": _code_digest(),
        "versions": {"transformers": transformers.__version__, "trl": trl.__version__},
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    name = Path(base).name if base else recipe.preset
    return cache_root() / "pall-lns" / f"lm-{name}-{recipe.steps}-{digest}"


def train_lm(
    records: Sequence[dict[str, Any]],
    n_ops: int,
    recipe: LMRecipe = RECIPE,
    *,
    base: str | None = None,
    out: str | Path | None = None,
    device: str = "cpu",
    log: Any = None,
) -> Path:
    """Fine-tune the selector LM on oracle ``records`` with trl's SFTTrainer; return its folder.

    Without ``out`` the model goes to (and is reused from) the paperstack cache; with ``out`` it
    is trained now into that folder, replacing a model already there. Both go through
    :func:`paperstack.cache.build_once`: two processes asking at once train it once (a file
    lock), and a killed run leaves no half-written folder (``pall-lm.json``, the entry's
    record, marks it complete)."""
    from paperstack.cache import build_once

    target = Path(out) if out is not None else _cache_dir(records, recipe, base, n_ops)
    if out is not None:
        (target / MARKER).unlink(missing_ok=True)  # an explicit --out is retrained, not reused

    def build(tmp: Path) -> dict[str, Any]:
        return _train_into(tmp, records, n_ops, recipe, base, device, log)

    return build_once(target, build, marker=MARKER)


def _train_into(
    tmp: Path,
    records: Sequence[dict[str, Any]],
    n_ops: int,
    recipe: LMRecipe,
    base: str | None,
    device: str,
    log: Any,
) -> dict[str, Any]:
    """Train into the empty folder ``tmp`` (build_once moves it into place); returns the
    record written as ``pall-lm.json``."""
    import torch
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl import SFTConfig, SFTTrainer

    from paperstack import tiny
    from paperstack.progress import quiet_libraries

    quiet_libraries()
    # trl's config sets a transformers argument that transformers 5 renames; not ours to fix.
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)
    examples = sft_examples(records)
    if base is not None:
        model, tokenizer = _load(base)
    else:
        tokenizer = tiny.build_tokenizer()
        model = tiny.build_model(recipe.preset, tokenizer, seed=recipe.seed)
    _digit_ids(tokenizer, n_ops)  # fail before training if the answer cannot be scored
    start = time.perf_counter()
    config = SFTConfig(
        output_dir=str(tmp / "trainer"),
        max_steps=recipe.steps,
        per_device_train_batch_size=recipe.batch_size,
        learning_rate=recipe.lr,
        lr_scheduler_type="cosine",
        warmup_steps=max(1, round(recipe.warmup_ratio * recipe.steps)),
        weight_decay=recipe.weight_decay,
        max_length=512,
        completion_only_loss=True,
        logging_steps=max(1, recipe.steps // 10),
        save_strategy="no",
        report_to="none",
        seed=recipe.seed,
        use_cpu=device == "cpu",
        dataloader_num_workers=0,
        disable_tqdm=True,
        bf16=False,
        fp16=False,
    )
    with _threads(1 if device == "cpu" else None):
        trainer = SFTTrainer(
            model=model,
            args=config,
            train_dataset=Dataset.from_list(examples),
            processing_class=tokenizer,
        )
        # The losses go to trainer.state.log_history, not to stdout (kept for results).
        trainer.remove_callback(PrinterCallback)
        out = trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(tmp / "trainer", ignore_errors=True)
    meta = {
        "n_ops": n_ops,
        "examples": len(examples),
        "records": len(records),
        "recipe": asdict(recipe),
        "base": base,
        "train_seconds": time.perf_counter() - start,
        "train_loss": float(out.training_loss),
        "losses": losses,
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "torch": torch.__version__,
    }
    if log:
        log(
            f"selector LM: {meta['parameters']:,} parameters fine-tuned on "
            f"{len(examples)} oracle states in {meta['train_seconds']:.0f} s "
            f"(loss {losses[0] if losses else float('nan'):.3f} -> {meta['train_loss']:.3f})"
        )
    return meta


class _threads:
    """torch threads for a block (one on a shared CPU: more threads than free cores is slower)."""

    def __init__(self, n: int | None) -> None:
        self.n = n
        self.before = 0

    def __enter__(self) -> None:
        import torch

        self.before = torch.get_num_threads()
        if self.n is not None:
            torch.set_num_threads(self.n)

    def __exit__(self, *exc: object) -> None:
        import torch

        torch.set_num_threads(self.before)


def _load(path: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paperstack.checkpoint import load_pretrained
    from paperstack.llm import prepare_tokenizer

    if not Path(path).is_dir():
        raise PallError(f"--model {path}: no such model folder")
    model = load_pretrained(path, AutoModelForCausalLM.from_pretrained)
    tokenizer = load_pretrained(path, AutoTokenizer.from_pretrained)
    # A base model (GPT-2) has no chat template and no pad token: the selector's prompts are
    # then rendered as "User: ...\nAssistant:" transcripts (the core's fallback template, saved
    # with the fine-tuned model) and EOS pads.
    prepare_tokenizer(tokenizer, need_chat_template=True, name=path, chat_template="fallback")
    return model, tokenizer


def _digit_ids(tokenizer: Any, n_ops: int) -> list[int]:
    if not 1 <= n_ops <= 10:
        raise PallError(f"the LM selector answers one digit: {n_ops} operators (at most 10)")
    ids = []
    for i in range(n_ops):
        enc = tokenizer.encode(str(i), add_special_tokens=False)
        if len(enc) != 1:
            raise PallError(f"tokenizer: the digit {i} is not a single token")
        ids.append(int(enc[0]))
    return ids


_LOADED: dict[tuple[str, int, str], LMSelector] = {}


class LMSelector:
    """The fine-tuned LM as a selector: ``argmax_{o < K} logit(o | chat(ctx.text()) + "OP=")``.

    Decision latency is measured per call (:attr:`latencies`); deployed asynchronously
    (:class:`pall_lns.async_select.AsyncSelector`) the worker loads the model from ``path``.
    """

    name = "lm"

    def __init__(
        self, model: Any, tokenizer: Any, n_ops: int, *, path: str | Path, device: str = "cpu"
    ) -> None:
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.n_ops = n_ops
        self.path = Path(path)
        self.device = device
        self.digits = _digit_ids(tokenizer, n_ops)
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": "\x00"}], add_generation_prompt=True, tokenize=False
        )
        head, _, tail = str(rendered).partition("\x00")
        self._head, self._tail = head, tail + "OP="
        self.latencies: list[float] = []

    @classmethod
    def load(cls, path: str | Path, n_ops: int | None = None, device: str = "cpu") -> LMSelector:
        meta = read_record(path, MARKER, PallError) if (Path(path) / MARKER).is_file() else {}
        k = int(n_ops if n_ops is not None else meta.get("n_ops", 0))
        if not k:
            raise PallError(f"{path}: no pall-lm.json; give the number of operators")
        model, tokenizer = _load(str(path))
        return cls(model, tokenizer, k, path=path, device=device)

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> LMSelector:
        """The selector of a spec; a worker reset reuses the model already loaded (the LM is
        stateless between decisions)."""
        import torch

        torch.set_num_threads(int(spec.get("threads", 1)))
        key = (str(spec["path"]), int(spec["n_ops"]), str(spec.get("device", "cpu")))
        if key not in _LOADED:
            _LOADED[key] = cls.load(*key)
        return _LOADED[key]

    def to_spec(self) -> dict[str, Any]:
        return {"kind": "lm", "path": str(self.path), "n_ops": self.n_ops, "device": self.device}

    def scores(self, ctx: Context) -> np.ndarray:
        import torch

        if ctx.n_ops != self.n_ops:
            raise PallError(f"LM selector trained for {self.n_ops} operators, run has {ctx.n_ops}")
        text = self._head + ctx.text() + self._tail
        ids = self.tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            logits = self.model(input_ids=ids.to(self.device)).logits[0, -1]
        return np.asarray(logits[self.digits].float().cpu().numpy(), dtype=float)

    def select(self, ctx: Context) -> int:
        t = time.perf_counter()
        op = int(np.argmax(self.scores(ctx)))
        self.latencies.append(time.perf_counter() - t)
        return op

    def update(self, ctx: Context, op: int, reward: float) -> None:
        return None

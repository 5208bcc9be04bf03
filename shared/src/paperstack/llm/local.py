"""A local Hugging Face transformers model as a :class:`~paperstack.llm.base.ChatModel`.

The same class runs the tiny random Llama of the toy world on a laptop CPU and a real checkpoint
on a GPU: everything goes through ``from_pretrained``, batched generation and one batched forward
pass for scoring. torch and transformers are imported when a model is built, not when this module
is imported (extra ``torch``).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from paperstack.llm.base import (
    Completion,
    GenerationConfig,
    LLMError,
    Messages,
    Prompt,
    check_pairs,
    check_prompts,
    require,
    truncate_at_stop,
)

if TYPE_CHECKING:
    import torch

__all__ = [
    "FALLBACK_CHAT_TEMPLATE",
    "FALLBACK_STOP",
    "FALLBACK_TURNS",
    "ChatTemplatePolicy",
    "TransformersChat",
    "cut_fallback_turn",
    "ensure_chat_template",
    "fallback_chat_prompt",
    "model_max_positions",
    "prepare_tokenizer",
]

log = logging.getLogger("paperstack.llm")

#: What :class:`TransformersChat` does with message prompts when the tokenizer has no chat
#: template: ``"fallback"`` renders them with :func:`fallback_chat_prompt` (logged once per
#: model), ``"require"`` refuses them with one :class:`LLMError` line.
ChatTemplatePolicy = Literal["fallback", "require"]

#: The config attributes that give a model's number of positions, in the order they are read:
#: Llama/Qwen/Mistral (``max_position_embeddings``), GPT-2 (``n_positions``), MPT
#: (``max_seq_len``), and older GPT-style configs (``n_ctx``, ``seq_length``).
POSITION_ATTRIBUTES = (
    "max_position_embeddings", "n_positions", "max_seq_len", "n_ctx", "seq_length",
)  # fmt: skip

#: Models whose missing chat template was already reported, so the warning comes once each.
_FALLBACK_REPORTED: set[str] = set()


def fallback_chat_prompt(messages: Messages) -> str:
    """The plain rendering of a conversation for a tokenizer with no chat template.

    One line per message, the role capitalised as a speaker label, then ``"Assistant:"`` with no
    trailing space, as a transcript a base model (GPT-2 and friends) has seen in its training
    text and continues with the assistant's turn::

        System: You are terse.
        User: What is 2+2?
        Assistant:

    It is text, not a template: tokenized like a string prompt (the tokenizer's usual special
    tokens, e.g. BOS, are added). A base model may go on to write the next ``"\\nUser:"`` turn
    itself; pass ``stop=["\\nUser:"]`` to end the answer there.
    """
    lines = [f"{str(m['role']).capitalize()}: {m['content']}" for m in messages]
    return "\n".join([*lines, "Assistant:"])


#: :func:`fallback_chat_prompt` as a Jinja chat template, for code that goes through
#: ``tokenizer.apply_chat_template`` (trl's trainers, a package's own prompt rendering). With
#: ``add_generation_prompt=True`` it renders exactly what :func:`fallback_chat_prompt` returns;
#: without, each message ends in a newline, so a rendered prompt is a prefix of the rendered
#: prompt plus completion (what trl's prompt-completion datasets check).
FALLBACK_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if not loop.first %}{{ '\\n' }}{% endif %}"
    "{{- message['role'] | capitalize }}: {{ message['content'] }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{%- if messages %}{{ '\\n' }}{% endif %}Assistant:"
    "{%- elif messages %}{{ '\\n' }}"
    "{%- endif %}"
)


#: Where a base model prompted through :data:`FALLBACK_CHAT_TEMPLATE` starts writing the next
#: turn of the transcript itself (it does not stop after its answer): generation stops there.
FALLBACK_STOP = "\nUser:"
#: Every turn label :func:`cut_fallback_turn` cuts at.
FALLBACK_TURNS = ("\nUser:", "\nSystem:")


def cut_fallback_turn(text: str, tokenizer: Any | None = None) -> str:
    """``text`` up to the first turn a base model writes itself on the fallback transcript
    (``"\\nUser:"`` or ``"\\nSystem:"``), all of it when there is none, so a made-up next
    turn is not read as part of the answer. With ``tokenizer``, only when it renders with
    :data:`FALLBACK_CHAT_TEMPLATE` (a model with its own template ends its turn itself)."""
    if tokenizer is not None and getattr(tokenizer, "chat_template", None) != (
        FALLBACK_CHAT_TEMPLATE
    ):
        return text
    cut = min((i for i in (text.find(m) for m in FALLBACK_TURNS) if i >= 0), default=len(text))
    return text[:cut]


def ensure_chat_template(tokenizer: Any, *, name: str) -> bool:
    """Give a tokenizer without a chat template (GPT-2 and other base models)
    :data:`FALLBACK_CHAT_TEMPLATE`, so conversations render as ``"User: ...\\nAssistant:"``
    transcripts everywhere (trl trainers included) instead of failing with transformers'
    "tokenizer.chat_template is not set" traceback.

    Returns True when the template was installed (a warning names ``name`` once per model),
    False when the tokenizer already had one (left alone). The template is saved with the
    tokenizer by ``save_pretrained``, so a model fine-tuned on this format keeps it.
    """
    if getattr(tokenizer, "chat_template", None):
        return False
    tokenizer.chat_template = FALLBACK_CHAT_TEMPLATE
    if name not in _FALLBACK_REPORTED:
        _FALLBACK_REPORTED.add(name)
        log.warning(
            "tokenizer of %s has no chat template: conversations are rendered as 'Role: content' "
            "lines ending in 'Assistant:' (paperstack's fallback template)",
            name,
        )
    return True


def model_max_positions(model_or_config: Any) -> tuple[int, str] | None:
    """The number of positions a model can attend over and the config attribute that says so
    (``(1024, "n_positions")`` for GPT-2), or None when its config declares none.

    Takes a model (its ``config`` is read) or a config; a composite config (vision-language)
    is read through ``get_text_config()``.
    """
    config = getattr(model_or_config, "config", model_or_config)
    get_text = getattr(config, "get_text_config", None)
    if callable(get_text):
        with contextlib.suppress(Exception):
            config = get_text()
    aliases = getattr(config, "attribute_map", None) or {}
    for attr in POSITION_ATTRIBUTES:
        value = getattr(config, attr, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, str(aliases.get(attr, attr))  # GPT-2 maps the first to n_positions
    return None


def prepare_tokenizer(
    tokenizer: Any,
    *,
    need_chat_template: bool,
    name: str,
    chat_template: ChatTemplatePolicy = "require",
) -> Any:
    """Make a tokenizer fit for training and batched generation, or say in one line why not.

    Call it before building a trainer (trl's ``SFTTrainer``, ``GRPOTrainer``, ``DPOTrainer``...),
    whose own errors for these cases are tracebacks deep inside trl:

    - no pad token: the EOS token becomes the pad token (``tokenizer.pad_token = eos``), the
      usual choice for causal LMs; padded positions are masked, so the id does not matter.
      Logged once at INFO level;
    - neither a pad nor an EOS token: :class:`LLMError` naming ``name``;
    - ``need_chat_template=True`` (the trainer is given conversations) and the tokenizer has no
      chat template: with ``chat_template="require"`` (the default) :class:`LLMError` naming
      ``name``; with ``chat_template="fallback"`` :func:`ensure_chat_template` installs
      :data:`FALLBACK_CHAT_TEMPLATE` (a warning says so once).

    Returns the same tokenizer (changed in place). ``name`` is the model id or path, for the
    message.
    """
    if getattr(tokenizer, "pad_token", None) is None:
        eos = getattr(tokenizer, "eos_token", None)
        if eos is None:
            raise LLMError(
                f"tokenizer of {name} has neither a pad token nor an EOS token: set "
                "tokenizer.pad_token before training or batched generation"
            )
        tokenizer.pad_token = eos
        log.info("tokenizer of %s has no pad token: using its EOS token %r for padding", name, eos)
    if chat_template not in ("fallback", "require"):
        raise LLMError(f"chat_template must be 'fallback' or 'require', got {chat_template!r}")
    if need_chat_template and chat_template == "fallback":
        ensure_chat_template(tokenizer, name=name)
    if need_chat_template and not getattr(tokenizer, "chat_template", None):
        raise LLMError(
            f"tokenizer of {name} has no chat template, which this needs for conversations: "
            "use an instruct model's tokenizer or set tokenizer.chat_template"
        )
    return tokenizer


class TransformersChat:
    """Batched generation and continuation scoring with a transformers causal LM.

    ``model`` is any ``AutoModelForCausalLM``-style model and ``tokenizer`` its tokenizer. Message
    prompts go through the tokenizer's chat template (with the generation prompt added); string
    prompts are tokenized as they are, with the tokenizer's usual special tokens (e.g. BOS).
    Prompts are processed in chunks of ``batch_size``, longest first, so padding stays small.

    Checkpoints without the usual trimmings are handled, not crashed on:

    - no chat template (base models such as GPT-2): with ``chat_template="fallback"`` (the
      default) message prompts are rendered by :func:`fallback_chat_prompt`
      (``"System: ...\\nUser: ...\\nAssistant:"``), and a warning says so once per model;
      ``chat_template="require"`` refuses them with one :class:`LLMError` line instead;
    - no pad token: the EOS token pads (padded positions are masked out);
    - a prompt that, with ``max_new_tokens`` (or with its continuation, in :meth:`logprobs`),
      does not fit in the model's positions (:attr:`max_positions`): one :class:`LLMError` line
      naming the prompt, its token count and the limit, before anything runs (GPT-2 would
      fail with an IndexError past 1024; RoPE models would go on silently past what they were
      trained for).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        device: str | None = None,
        batch_size: int = 8,
        name: str | None = None,
        chat_template: ChatTemplatePolicy = "fallback",
    ) -> None:
        require("torch", extra="torch", feature="TransformersChat")
        require("transformers", extra="torch", feature="TransformersChat")
        if batch_size < 1:
            raise LLMError(f"batch_size must be >= 1, got {batch_size}")
        if chat_template not in ("fallback", "require"):
            raise LLMError(f"chat_template must be 'fallback' or 'require', got {chat_template!r}")
        self.chat_template: ChatTemplatePolicy = chat_template
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        if device is not None:
            self.model.to(device)
        self.device: torch.device = next(model.parameters()).device
        self.model.eval()
        self.name: str = name or str(getattr(model, "name_or_path", "") or type(model).__name__)
        # Causal LMs often ship without a pad token; any id works because padded positions are
        # masked out, and EOS is the conventional choice.
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = tokenizer.eos_token_id
        if pad is None:
            raise LLMError(f"tokenizer of {self.name} has neither a pad nor an EOS token")
        self.pad_token_id: int = int(pad)
        eos = tokenizer.eos_token_id
        self.eos_token_id: int | None = None if eos is None else int(eos)
        self._forward_params = frozenset(inspect.signature(model.forward).parameters)
        limit = model_max_positions(model)
        self._positions_attr = limit[1] if limit else None
        #: How many positions (prompt plus new tokens) the model takes: its config's
        #: ``max_position_embeddings``, ``n_positions``, ``max_seq_len``... None when the config
        #: declares none (then nothing is checked).
        self.max_positions: int | None = limit[0] if limit else None

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str,
        *,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int = 8,
        local_files_only: bool = False,
        chat_template: ChatTemplatePolicy = "fallback",
        **model_kwargs: Any,
    ) -> TransformersChat:
        """Load a model and its tokenizer by hub id or local path.

        ``dtype`` is e.g. ``"bfloat16"`` (default: the checkpoint's). ``device=None`` picks CUDA
        when it is available, so the same call serves a laptop and a GPU machine; a
        ``device_map`` in ``model_kwargs`` (accelerate placement) is left alone.
        """
        torch = require("torch", extra="torch", feature="TransformersChat")
        transformers = require("transformers", extra="torch", feature="TransformersChat")
        if dtype is not None:
            model_kwargs["dtype"] = dtype
        if device is None and "device_map" not in model_kwargs:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        from paperstack.checkpoint import load_pretrained

        tokenizer = load_pretrained(
            name_or_path, transformers.AutoTokenizer.from_pretrained,
            local_files_only=local_files_only,
        )  # fmt: skip
        model = load_pretrained(
            name_or_path, transformers.AutoModelForCausalLM.from_pretrained,
            local_files_only=local_files_only, **model_kwargs,
        )  # fmt: skip
        return cls(
            model, tokenizer, device=device, batch_size=batch_size, name=name_or_path,
            chat_template=chat_template,
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"TransformersChat(name={self.name!r}, device='{self.device}')"

    # ------------------------------------------------------------------ tokenization

    def _prompt_ids(self, prompt: Prompt) -> list[int]:
        if isinstance(prompt, str):
            return list(self.tokenizer(prompt)["input_ids"])
        if not getattr(self.tokenizer, "chat_template", None):
            if self.chat_template == "require":
                raise LLMError(
                    f"tokenizer of {self.name} has no chat template and chat_template='require': "
                    "pass string prompts, or use a model whose tokenizer has a chat template"
                )
            if self.name not in _FALLBACK_REPORTED:
                _FALLBACK_REPORTED.add(self.name)
                log.warning(
                    "tokenizer of %s has no chat template: message prompts are rendered as "
                    "'Role: content' lines ending in 'Assistant:' (chat_template='require' "
                    "refuses them instead)",
                    self.name,
                )
            return list(self.tokenizer(fallback_chat_prompt(prompt))["input_ids"])
        text = self.tokenizer.apply_chat_template(
            [dict(m) for m in prompt], tokenize=False, add_generation_prompt=True
        )
        # The template already wrote BOS and friends; adding them again would double them.
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _check_fits(self, ids: Sequence[Sequence[int]], max_new_tokens: int) -> None:
        """One LLMError line, before anything runs, for the first prompt whose tokens plus
        ``max_new_tokens`` exceed the model's positions (the whole sequence must fit, as
        with transformers' ``max_length``)."""
        limit = self.max_positions
        if limit is None:
            return
        for i, row in enumerate(ids):
            if len(row) + max_new_tokens > limit:
                raise LLMError(
                    f"{self.name}: prompts[{i}] has {len(row)} tokens and max_new_tokens is "
                    f"{max_new_tokens}: {len(row) + max_new_tokens} exceeds the model's {limit} "
                    f"positions (config.{self._positions_attr}); shorten the prompt or lower "
                    "max_new_tokens"
                )

    def _chunks(self, lengths: Sequence[int]) -> Iterator[list[int]]:
        """Indices in chunks of ``batch_size``, longest first, so each chunk pads little."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        for start in range(0, len(order), self.batch_size):
            yield order[start : start + self.batch_size]

    def _seeded(self, seed: int | None) -> contextlib.AbstractContextManager[Any]:
        """Seed torch's generator for one call without disturbing the caller's random state."""
        import torch

        if seed is None:
            return contextlib.nullcontext()
        devices = [self.device] if self.device.type == "cuda" else []
        stack = contextlib.ExitStack()
        stack.enter_context(torch.random.fork_rng(devices=devices))
        torch.manual_seed(seed)
        return stack

    # ------------------------------------------------------------------ generate

    def generate(
        self,
        prompts: Sequence[Prompt],
        *,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        n: int = 1,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
    ) -> list[list[str]]:
        """``n`` completions per prompt; see :meth:`ChatModel.generate`.

        Prompts are left-padded so every row's last real token sits at the end of the batch and
        new tokens are appended in step; transformers derives position ids from the attention
        mask, so padding does not change the result. With ``seed`` the whole call is
        reproducible (for the same batch composition and device).
        """
        import torch

        cfg = GenerationConfig(
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            n=n,
            seed=seed,
            stop=tuple(stop) if stop else None,
        )
        checked = check_prompts(prompts)
        ids = [self._prompt_ids(p) for p in checked]
        self._check_fits(ids, cfg.max_new_tokens)
        results: list[list[str]] = [[] for _ in checked]
        if cfg.max_new_tokens == 0:
            return [[""] * cfg.n for _ in checked]
        kwargs: dict[str, Any] = {
            "max_new_tokens": cfg.max_new_tokens,
            "num_return_sequences": cfg.n,
            "pad_token_id": self.pad_token_id,
            "do_sample": not cfg.greedy,
        }
        if cfg.greedy:
            # Override sampling defaults a checkpoint's generation_config may carry, which would
            # otherwise trigger "flag has no effect" warnings under greedy decoding.
            kwargs.update(temperature=None, top_p=None, top_k=None)
        else:
            kwargs.update(temperature=cfg.temperature, top_p=cfg.top_p, top_k=0)
        if cfg.stop:
            kwargs.update(stop_strings=list(cfg.stop), tokenizer=self.tokenizer)
        with self._seeded(cfg.seed), torch.inference_mode():
            for chunk in self._chunks([len(x) for x in ids]):
                input_ids, attention = self._pad([ids[i] for i in chunk], left=True)
                out = self.model.generate(input_ids=input_ids, attention_mask=attention, **kwargs)
                new = out[:, input_ids.shape[1] :]
                texts = self.tokenizer.batch_decode(new, skip_special_tokens=True)
                ended = (new == self.eos_token_id) if self.eos_token_id is not None else None
                for k, i in enumerate(chunk):
                    prompt_tokens = len(ids[i])
                    samples: list[str] = []
                    for r in range(k * cfg.n, (k + 1) * cfg.n):
                        text = texts[r]
                        cut = truncate_at_stop(text, cfg.stop)
                        stopped = ended is not None and bool(ended[r].any())
                        count = new.shape[1]
                        if ended is not None and stopped:
                            count = int(ended[r].int().argmax()) + 1
                        samples.append(
                            Completion(
                                cut,
                                finish_reason="stop" if stopped or cut != text else "length",
                                prompt_tokens=prompt_tokens,
                                completion_tokens=count,
                            )
                        )
                    results[i] = samples
        return results

    def _pad(
        self, rows: Sequence[Sequence[int]], *, left: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        width = max(len(r) for r in rows)
        input_ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for k, row in enumerate(rows):
            if not row:
                continue
            sl = slice(width - len(row), width) if left else slice(0, len(row))
            input_ids[k, sl] = torch.tensor(row, dtype=torch.long)
            attention[k, sl] = 1
        return input_ids.to(self.device), attention.to(self.device)

    # ------------------------------------------------------------------ logprobs

    def logprobs(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[np.ndarray]:
        """Per-token log-probabilities of each continuation given its prompt.

        The continuation is tokenized on its own (no special tokens) and appended to the prompt's
        tokens, so the scored tokens are exactly the continuation's. Each chunk is one forward
        pass over left-padded rows, so every continuation ends at the last position: the model is
        asked for the logits of the last ``max continuation length + 1`` positions only
        (``logits_to_keep``; a full ``batch x length x vocabulary`` logit tensor for long prompts
        is what exhausts GPU memory), and one log-softmax plus one gather scores every token of
        every row at once (no loop over tokens). Position ids follow the attention mask, so
        padding does not shift positions. Returns float32 arrays, one value per token.
        """
        import torch

        checked = check_pairs(prompts, continuations)
        prompt_ids = [self._prompt_ids(p) for p in checked]
        cont_ids = [
            list(self.tokenizer(c, add_special_tokens=False)["input_ids"]) for c in continuations
        ]
        for i, p in enumerate(prompt_ids):
            if not p and cont_ids[i]:
                raise LLMError(
                    f"prompts[{i}] is empty: the first continuation token has no context to be "
                    "scored against"
                )
        results: list[np.ndarray] = [np.zeros(0, dtype=np.float32) for _ in checked]
        rows = [p + c for p, c in zip(prompt_ids, cont_ids, strict=True)]
        limit = self.max_positions
        for i, (p, c) in enumerate(zip(prompt_ids, cont_ids, strict=True)):
            if limit is not None and len(p) + len(c) > limit:
                raise LLMError(
                    f"{self.name}: prompts[{i}] has {len(p)} tokens and continuations[{i}] "
                    f"{len(c)}: {len(p) + len(c)} exceeds the model's {limit} positions "
                    f"(config.{self._positions_attr}); shorten them"
                )
        with torch.inference_mode():
            for chunk in self._chunks([len(r) for r in rows]):
                chunk = [i for i in chunk if cont_ids[i]]
                if not chunk:
                    continue
                input_ids, attention = self._pad([rows[i] for i in chunk], left=True)
                width = max(len(cont_ids[i]) for i in chunk)
                kwargs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention}
                if "position_ids" in self._forward_params:
                    kwargs["position_ids"] = (attention.cumsum(-1) - 1).clamp(min=0)
                if "logits_to_keep" in self._forward_params:
                    kwargs["logits_to_keep"] = width + 1
                logits = self.model(**kwargs).logits[:, -(width + 1) : -1]
                targets = input_ids[:, -width:]
                logp = torch.log_softmax(logits.float(), dim=-1)
                token_lp = logp.gather(-1, targets[..., None]).squeeze(-1).cpu().numpy()
                for k, i in enumerate(chunk):
                    results[i] = token_lp[k, width - len(cont_ids[i]) :].astype(np.float32)
        return results

"""Any causal LM's tokenizer made fit for OPCT: a pad token and a chat template.

OPCT renders every prompt as a conversation (the wrapped prompt for the student, the clean one
for the teacher, through trl's trainers and the evaluation alike) and pads batches. A base
checkpoint often has neither: GPT-2 has no chat template and no pad token, Mistral has no pad
token. :func:`ready_tokenizer` gives it both from the core (:func:`paperstack.llm.
prepare_tokenizer`): EOS pads (padded positions are masked, so the id does not matter), and a
missing chat template becomes the core's fallback transcript ``"User: ...\\nAssistant:"``.

A base model then goes on past its answer and writes the next ``"\\nUser:"`` turn itself: the
harness trims a decoded answer there with the core's :func:`paperstack.llm.cut_fallback_turn`.
"""

from __future__ import annotations

from typing import Any

from opct.errors import OPCTError

__all__ = ["ready_tokenizer"]


def ready_tokenizer(tokenizer: Any, name: str | None = None) -> Any:
    """``tokenizer`` with a pad token (EOS) and a chat template (the core's fallback where it
    has none), changed in place and returned; idempotent, so every entry point calls it.

    A tokenizer with neither pad nor EOS token is one :class:`OPCTError` line naming ``name``.
    """
    from paperstack.llm import LLMError, prepare_tokenizer

    label = name or str(getattr(tokenizer, "name_or_path", "") or "the model")
    try:
        return prepare_tokenizer(
            tokenizer, need_chat_template=True, name=label, chat_template="fallback"
        )
    except LLMError as exc:
        raise OPCTError(str(exc)) from None

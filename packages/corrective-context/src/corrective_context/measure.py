"""Correction vectors of context items on any transformers causal LM, from its hidden states.

For a query ``q``, an answer ``a`` and candidate items ``I_1..I_M`` (demonstrations, passages,
memories), the model reads the prompt ``[I_i + sep] + q`` and its state at the last prompt
position (the one that predicts the answer's first token) is the answer vector:

- in answer-probability space: ``ŷ = softmax(logits)`` over the vocabulary, with ``y*`` the
  one-hot vector of the answer's first token, so ``e = ŷ₀ - y*`` is the error that cross-entropy
  descends, and :func:`corrective_context.correction.decompose` classifies each item's
  correction ``c_i = ŷ_i - ŷ₀`` as under / proper / over in direction and magnitude. In this
  space ``ρ <= 1`` for every pair of distributions (proved in :mod:`corrective_context.spaces`):
  an item can be over-corrective here only off the error axis (direction), never in
  magnitude. For magnitude, measure in centred-logit or value space
  (:mod:`corrective_context.spaces`, :mod:`corrective_context.real`);
- in hidden-state space: the final hidden state ``h`` (``output_hidden_states=True``); its
  correction ``c_h = h_i - h₀`` is projected on the corrective direction ``g = W_Uᵀ(y* - ŷ₀)``
  (the gradient of the answer's log-probability with respect to the final state, through the
  unembedding ``W_U``).

The attention mass of each item is the share of attention the answer position puts on the
item's tokens with every item in the prompt, averaged over layers and heads (eager attention,
``output_attentions=True``). Prompts are built from token ids piece by piece, so each item's
span is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from corrective_context.baselines import check_method, rank_texts
from corrective_context.correction import TOLERANCE, Correction, decompose
from corrective_context.errors import CorrectiveContextError
from corrective_context.selector import Selection, SelectorConfig, select

__all__ = ["ItemCorrection", "Measurement", "measure", "select_items"]


@dataclass(frozen=True)
class ItemCorrection:
    index: int
    probability: Correction  #: decomposition in answer-probability space
    hidden_norm: float  #: ‖c_h‖
    hidden_projection: float  #: ⟨c_h, g/‖g‖⟩
    answer_logprob: float  #: log p(answer's first token) with the item
    attention_mass: float | None  #: share of the answer position's attention on the item

    def to_json(self) -> dict[str, Any]:
        p = self.probability
        return {
            "index": self.index,
            "regime": p.regime,
            "direction": p.direction,
            "magnitude": p.magnitude,
            "ratio": p.ratio,
            "off_axis": p.off_axis,
            "error_norm": p.error_norm,
            "error_after": p.error_after,
            "hidden_norm": self.hidden_norm,
            "hidden_projection": self.hidden_projection,
            "answer_logprob": self.answer_logprob,
            "attention_mass": self.attention_mass,
        }


@dataclass(frozen=True)
class Measurement:
    base_logprob: float  #: log p(answer's first token) without context
    items: list[ItemCorrection]

    def to_json(self) -> dict[str, Any]:
        return {"base_logprob": self.base_logprob, "items": [i.to_json() for i in self.items]}


def _context_limit(model: Any, tokenizer: Any) -> int | None:
    limits = [getattr(model.config, "max_position_embeddings", None)]
    tok_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_max, int) and tok_max < 10**8:
        limits.append(tok_max)
    found = [int(x) for x in limits if isinstance(x, int) and x > 0]
    return min(found) if found else None


def _ids(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _forward(model: Any, ids: list[int], attentions: bool = False) -> Any:
    import torch

    name = type(model).__name__
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor([ids]),
            output_hidden_states=True,
            output_attentions=attentions,
            return_dict=True,
        )
    hidden = getattr(out, "hidden_states", None)
    if not hidden:
        raise CorrectiveContextError(
            f"model {name} does not expose hidden states (output_hidden_states=True returned "
            "none): corrections are measured on the final hidden state"
        )
    if getattr(out, "logits", None) is None:
        raise CorrectiveContextError(f"model {name} returns no logits: it is not a causal LM")
    return out


def measure(
    model: Any,
    tokenizer: Any,
    query: str,
    items: Sequence[str],
    answer: str,
    *,
    separator: str = "\n",
    tolerance: float = TOLERANCE,
) -> Measurement:
    """Every item's correction of the answer (module docstring). ``model`` is a transformers
    causal LM (any ``from_pretrained`` model whose forward takes ``output_hidden_states``)."""
    import torch

    if not items:
        raise CorrectiveContextError("the candidate pool is empty: no items to measure")
    answer_ids = _ids(tokenizer, answer)
    if not answer_ids:
        raise CorrectiveContextError(f"answer {answer!r}: tokenizes to nothing")
    target = answer_ids[0]
    prefix = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    q_ids = _ids(tokenizer, query)
    pieces = [_ids(tokenizer, item + separator) for item in items]
    limit = _context_limit(model, tokenizer)
    if limit is not None:
        base_len = len(prefix) + len(q_ids)
        if base_len > limit:
            raise CorrectiveContextError(
                f"the query is {base_len} tokens, longer than the model's context ({limit})"
            )
        for i, piece in enumerate(pieces):
            if base_len + len(piece) > limit:
                raise CorrectiveContextError(
                    f"item {i}: {base_len + len(piece)} tokens with the query, longer than the "
                    f"model's context ({limit})"
                )
    model.eval()

    def state(ids: list[int], attentions: bool = False) -> tuple[np.ndarray, np.ndarray, Any]:
        out = _forward(model, ids, attentions)
        h = out.hidden_states[-1][0, -1].double().numpy()
        p = torch.softmax(out.logits[0, -1].double(), dim=-1).numpy()
        return h, p, out

    h0, p0, _ = state(prefix + q_ids)
    y_star = np.zeros_like(p0)
    y_star[target] = 1.0
    unembed = model.get_output_embeddings()
    w_u = unembed.weight.detach().double().numpy()  # (V, H)
    g = w_u.T @ (y_star - p0)
    g_hat = g / max(float(np.linalg.norm(g)), 1e-12)
    masses = _attention_masses(model, prefix, pieces, q_ids, limit)
    results = []
    for i, piece in enumerate(pieces):
        h, p, _ = state(prefix + piece + q_ids)
        ch = h - h0
        results.append(ItemCorrection(
            index=i,
            probability=decompose(p0, p, y_star, tolerance),
            hidden_norm=float(np.linalg.norm(ch)),
            hidden_projection=float(ch @ g_hat),
            answer_logprob=float(np.log(max(p[target], 1e-300))),
            attention_mass=None if masses is None else masses[i],
        ))  # fmt: skip
    return Measurement(float(np.log(max(p0[target], 1e-300))), results)


def _attention_masses(
    model: Any, prefix: list[int], pieces: list[list[int]], q_ids: list[int], limit: int | None
) -> list[float] | None:
    """Share of the answer position's attention on each item, with every item in the prompt
    (``None`` when the items together do not fit the context or the model returns no
    attention weights)."""
    ids = list(prefix)
    spans = []
    for piece in pieces:
        spans.append((len(ids), len(ids) + len(piece)))
        ids += piece
    ids += q_ids
    if limit is not None and len(ids) > limit:
        return None
    config = getattr(model, "config", None)
    previous = getattr(config, "_attn_implementation", None)
    switch = previous not in (None, "eager") and hasattr(model, "set_attn_implementation")
    if switch:  # fused kernels (sdpa, flash) return no attention weights
        model.set_attn_implementation("eager")
    try:
        out = _forward(model, ids, attentions=True)
    finally:
        if switch:
            model.set_attn_implementation(previous)
    attn = getattr(out, "attentions", None)
    if not attn or any(a is None for a in attn):
        return None
    last = np.stack([a[0, :, -1].double().numpy() for a in attn])  # (layers, heads, seq)
    mean = last.mean(axis=(0, 1))
    return [float(mean[a:b].sum()) for a, b in spans]


def _answer_state(model: Any, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Final hidden state and next-token probabilities at the last position of ``ids``."""
    import torch

    out = _forward(model, ids)
    h = out.hidden_states[-1][0, -1].double().numpy()
    return h, torch.softmax(out.logits[0, -1].double(), dim=-1).numpy()


def select_items(
    model: Any,
    tokenizer: Any,
    query: str,
    items: Sequence[str],
    item_inputs: Sequence[str] | None = None,
    item_answers: Sequence[str] | None = None,
    *,
    method: str = "corrective",
    keys: np.ndarray | None = None,
    query_key: np.ndarray | None = None,
    config: SelectorConfig | None = None,
    separator: str = "\n",
    seed: int = 0,
) -> Selection:
    """Select context items for the query on a transformers causal LM by the method named
    ``method`` (:data:`corrective_context.baselines.METHODS`): a drop-in for demonstration,
    passage or memory selection, with the baselines in the same harness.

    ``items`` are the texts that go into the prompt (e.g. ``"Q: ... A: Paris"``), before the
    query in the order chosen. ``"corrective"`` is the theory-guided selector
    (:mod:`corrective_context.selector`): ``item_inputs``/``item_answers`` split each item into
    the input the model answers and its known answer, which give the model's zero-shot error on
    the item in answer-probability space (``softmax - one-hot`` of the answer's first token);
    keys default to the model's own final hidden states of the item inputs and of the query
    (complementarity in the model's own states); pass MiniLM keys
    (:func:`corrective_context.baselines.embed_texts`) instead if you like. The baselines rank
    the item texts against the query text (:func:`corrective_context.baselines.rank_texts`:
    ``top-k`` and ``dpp`` over MiniLM, extra ``embed``; ``bm25`` over words; ``random`` with
    ``seed``; ``all-items``) up to ``config.budget`` items, and keep the longest prefix of that
    ranking that fits the model's context with the query.

    Every method refuses an unknown name, an empty pool and an item that does not fit the
    context with the query, with one line.
    """
    check_method(method)
    if not items:
        raise CorrectiveContextError("the candidate pool is empty: nothing to select from")
    prefix = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    q_ids = _ids(tokenizer, query)
    pieces = [_ids(tokenizer, item + separator) for item in items]
    limit = _context_limit(model, tokenizer)
    if limit is not None:
        for i, piece in enumerate(pieces):
            if len(prefix) + len(piece) + len(q_ids) > limit:
                raise CorrectiveContextError(
                    f"item {i}: {len(prefix) + len(piece) + len(q_ids)} tokens with the query, "
                    f"longer than the model's context ({limit})"
                )
    config = config or SelectorConfig()
    if method != "corrective":
        ranking = rank_texts(method, query, items, config.budget, seed)
        chosen: list[int] = []
        used = len(prefix) + len(q_ids)
        for i in ranking:
            if limit is not None and used + len(pieces[i]) > limit:
                break
            chosen.append(i)
            used += len(pieces[i])
        return Selection(chosen, np.zeros(0), ranking, method=method)
    if item_inputs is None or item_answers is None:
        raise CorrectiveContextError(
            "method 'corrective' needs each item's input and known answer (item_inputs, "
            "item_answers)"
        )
    if not len(items) == len(item_inputs) == len(item_answers):
        raise CorrectiveContextError(
            f"items, item_inputs and item_answers differ in length: {len(items)}, "
            f"{len(item_inputs)}, {len(item_answers)}"
        )
    model.eval()
    own_keys, errors = [], []
    for i, (inp, ans) in enumerate(zip(item_inputs, item_answers, strict=True)):
        answer_ids = _ids(tokenizer, ans)
        if not answer_ids:
            raise CorrectiveContextError(f"item {i}: answer {ans!r} tokenizes to nothing")
        h, p = _answer_state(model, prefix + _ids(tokenizer, inp))
        onehot = np.zeros_like(p)
        onehot[answer_ids[0]] = 1.0
        own_keys.append(h)
        errors.append(p - onehot)
    if keys is None or query_key is None:
        keys = np.stack(own_keys)
        query_key = _answer_state(model, prefix + q_ids)[0]

    def answer(subsets: list[list[int]]) -> np.ndarray:
        rows = []
        for subset in subsets:
            ids = list(prefix)
            for i in subset:
                ids += pieces[i]
            if limit is not None and len(ids) + len(q_ids) > limit:
                rows.append(np.full(len(errors[0]), np.nan))  # does not fit: never chosen
                continue
            rows.append(_answer_state(model, ids + q_ids)[1])
        return np.stack(rows)

    return select(np.asarray(query_key), np.asarray(keys), np.stack(errors), answer, config)

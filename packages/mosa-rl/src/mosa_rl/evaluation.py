"""Exploration metrics: pass@1, unbiased pass@k, distinct correct solutions, top-1 mass, entropy,
and the KL to the base model.

All of them come from one set of samples per model: ``n`` completions per held-out problem at
the sampling temperature, checked by the task's verifier. The sharpness metrics (mean top-1
probability mass ``P̄(1)`` and token entropy) are measured teacher-forced on those same
samples, i.e. on the model's own distribution, where RL's collapse shows. So is the token-level
``KL(π ‖ π_base)`` (exact, over the whole vocabulary, averaged over the sampled completion
tokens): the common currency in which regularisers of different kinds are matched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from mosa_rl.errors import MosaError
from paperstack.llm import cut_fallback_turn

__all__ = [
    "SampleEval",
    "cut_reward",
    "distinct_correct",
    "pass_at_k",
    "sample_and_score",
]


def cut_reward(reward: Any) -> Any:
    """A trl reward function that scores each completion cut at the core's
    :func:`~paperstack.llm.cut_fallback_turn` (the same answer the evaluation scores: a base
    model on the fallback transcript writes the next turn itself), keeping ``reward``'s name
    for trl's logs."""
    from paperstack.tasks.base import completion_text

    def cut(prompts: Any, completions: Sequence[Any], **kwargs: Any) -> Any:
        return reward(
            prompts, [cut_fallback_turn(completion_text(c)) for c in completions], **kwargs
        )

    cut.__name__ = getattr(reward, "__name__", "reward")
    return cut


def pass_at_k(n: ArrayLike, c: ArrayLike, k: int) -> np.ndarray:
    """Unbiased pass@k per problem (Chen et al., 2021): ``1 - C(n-c, k) / C(n, k)``.

    ``n`` samples of which ``c`` are correct; computed as ``1 - Π_{i=n-c+1}^{n} (1 - k/i)``
    in log space, vectorised over problems. Needs ``k <= n``.
    """
    n_arr = np.broadcast_to(np.asarray(n, dtype=np.int64), np.shape(c))
    c_arr = np.asarray(c, dtype=np.int64)
    if k < 1:
        raise MosaError(f"k={k}: must be >= 1")
    if np.any(n_arr < k):
        raise MosaError(f"k={k}: larger than the number of samples per problem ({n_arr.min()})")
    if np.any((c_arr < 0) | (c_arr > n_arr)):
        raise MosaError("c: correct counts must lie between 0 and n")
    i = np.arange(1, int(n_arr.max()) + 1)
    # term i contributes when n - c < i <= n
    active = (i[None, :] > (n_arr - c_arr).reshape(-1, 1)) & (i[None, :] <= n_arr.reshape(-1, 1))
    # where some term would be log(0) (i == k, reached only when n - c < k) the answer is 1
    safe = active & (i[None, :] > k)
    ratio = np.where(safe, k / np.maximum(i[None, :], 1), 0.0)
    logs = np.log1p(-ratio)
    fail = np.exp(logs.sum(axis=1))
    out = np.where((n_arr - c_arr).reshape(-1) < k, 1.0, 1.0 - fail)
    return out.reshape(np.shape(c))


def distinct_correct(correct: np.ndarray, answers: Sequence[Sequence[str]]) -> np.ndarray:
    """Number of distinct correct final answers per problem (``correct [P, n]`` booleans)."""
    return np.array(
        [
            len({a for a, ok in zip(row, oks, strict=True) if ok})
            for row, oks in zip(answers, correct, strict=True)
        ],
        dtype=np.float64,
    )


def _final_answer(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return "".join(lines[-1].split()) if lines else ""


@dataclass
class SampleEval:
    """Per-problem metrics of one model: arrays of length ``P`` (problems)."""

    correct: np.ndarray  # [P, n] booleans
    distinct: np.ndarray  # [P]
    top1: float  # mean top-1 probability over all sampled completion tokens
    entropy: float  # mean token entropy (nats) over the same tokens
    profile: list[float] = field(default_factory=list)  # P̄(1..K) and the tail
    kl_to_base: float | None = None  # mean token KL(π ‖ π_base) on the same tokens (nats)

    def pass_at(self, k: int) -> np.ndarray:
        n = self.correct.shape[1]
        return pass_at_k(n, self.correct.sum(1), k)


def sample_and_score(
    model: Any,
    tokenizer: Any,
    task: Any,
    examples: Sequence[Any],
    n: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    seed: int = 0,
    top_k: int = 8,
    batch_size: int = 512,
    base: Any = None,
) -> SampleEval:
    """Sample ``n`` completions per example and measure everything :class:`SampleEval` holds.

    Prompts are grouped by token length so no batch needs padding (results do not depend
    on a model family's left-padding handling); sampling is seeded by ``seed``. With ``base``
    (the model RL started from) the token KL to it is measured on the same samples.
    """
    import torch

    from paperstack.llm import ensure_chat_template

    if n < 1:
        raise MosaError(f"samples per problem n={n}: must be >= 1")
    ensure_chat_template(tokenizer, name=str(getattr(tokenizer, "name_or_path", "model")))
    texts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": e.prompt}], add_generation_prompt=True, tokenize=False
        )
        for e in examples
    ]
    encoded = tokenizer(texts, add_special_tokens=False)["input_ids"]
    groups: dict[int, list[int]] = {}
    for i, ids in enumerate(encoded):
        groups.setdefault(len(ids), []).append(i)
    answers: list[list[str]] = [[] for _ in examples]
    top1_sum = ent_sum = kl_sum = 0.0
    prof_sum = torch.zeros(top_k + 1, dtype=torch.float64)
    tokens = 0
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    per_batch = max(1, batch_size // n)
    model.eval()
    if base is not None:
        base.eval()
    generator_seed = seed
    with torch.no_grad():
        for length, idxs in groups.items():
            for s in range(0, len(idxs), per_batch):
                chunk = idxs[s : s + per_batch]
                x = torch.tensor([encoded[i] for i in chunk], device=model.device)
                torch.manual_seed(generator_seed)
                generator_seed += 1
                out = model.generate(
                    input_ids=x,
                    attention_mask=torch.ones_like(x),
                    do_sample=True,
                    temperature=temperature,
                    top_p=1.0,
                    top_k=0,
                    max_new_tokens=max_new_tokens,
                    num_return_sequences=n,
                    pad_token_id=pad,
                    eos_token_id=eos,
                )
                comp = out[:, length:]
                # completion mask: tokens up to and including the first EOS
                is_eos = comp == eos
                after = (is_eos.cumsum(1) - is_eos.long()) > 0
                mask = ~after
                logits = model(input_ids=out, attention_mask=torch.ones_like(out)).logits
                logits = logits[:, length - 1 : -1].float() / temperature
                logp = logits.log_softmax(-1)[mask]
                probs = logp.exp()
                if base is not None:
                    ref = base(input_ids=out, attention_mask=torch.ones_like(out)).logits
                    ref_logp = (ref[:, length - 1 : -1].float() / temperature).log_softmax(-1)
                    kl_sum += float((probs * (logp - ref_logp[mask])).sum())
                top1_sum += float(probs.max(-1).values.sum())
                ent_sum += float(-(probs * logp).sum())
                top = probs.topk(top_k, dim=-1).values
                prof_sum[:top_k] += top.sum(0).double()
                prof_sum[top_k] += float((1.0 - top.sum(-1)).clamp_min(0).sum())
                tokens += int(mask.sum())
                decoded = [
                    cut_fallback_turn(t)
                    for t in tokenizer.batch_decode(comp, skip_special_tokens=True)
                ]
                for j, i in enumerate(chunk):
                    answers[i] = decoded[j * n : (j + 1) * n]
    correct = np.array(
        [[task.verify(e, a) for a in answers[i]] for i, e in enumerate(examples)], dtype=bool
    )
    finals = [[_final_answer(a) for a in row] for row in answers]
    return SampleEval(
        correct=correct,
        distinct=distinct_correct(correct, finals),
        top1=top1_sum / max(tokens, 1),
        entropy=ent_sum / max(tokens, 1),
        profile=(prof_sum / max(tokens, 1)).tolist(),
        kl_to_base=kl_sum / max(tokens, 1) if base is not None else None,
    )

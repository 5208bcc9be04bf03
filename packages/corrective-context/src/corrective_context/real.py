"""The real-model arm: in-context demonstrations for single-digit arithmetic on a real LM.

Why this task: the earlier text benchmark had no headroom (the model answered with no context
almost perfectly) and measured in probability space against a one-hot target, where
over-correction cannot occur (:mod:`corrective_context.spaces`). Here the answer is a number,
so the error is measured in **value space**: the model's expected answer
``ŷ = Σ_d softmax(l)_d·d`` over the ten digit tokens at the answer position, against the true
result ``y*`` (a regression target, where a demonstration can push the expected answer past
the truth: ``ρ > 1``). SmolLM2-135M-Instruct, prompted with ``"a + b = "`` and no context,
puts little mass on the right digit (it does not expect a bare number there), so the
no-context error is far from zero; one demonstration ``"c + d = r"`` shows the format and moves
the answer a lot, sometimes past the truth.

Protocol (fixed before any reported query was run; the validation split, stream 1, was used
only to check that the no-context error is well above zero):

- problems: ``a + b`` (``a + b <= 9``) and ``a - b`` (``a >= b``), ``a, b`` in 0-9: 110
  problems with single-digit results; a prompt is the chosen demonstrations, one per line
  (``"c - d = r\\n"``), then ``"a + b = "``;
- per seed, ``queries`` test queries (stream 2), each with a pool of ``pool`` candidate
  demonstrations drawn from the other 109 problems; rows are per query (``seed:index``), all
  comparisons paired over queries;
- premise: the share of a query's single demonstrations that over-correct in value space
  (τ = 0.5, :mod:`corrective_context.correction`), mean over queries, above ``PREMISE_SHARE``;
- systems: no context; ``random-1`` and ``random-4`` demonstrations; all ``pool``
  demonstrations; the theory-guided selector (:func:`corrective_context.selector.select`,
  budget 4, keys = the model's final hidden state at the answer position of each problem,
  errors = the model's zero-shot value-space errors on the candidates); the error-probe
  control ``ŷ₀ - ê`` (no context, the selector's own error estimate): whatever the selector
  gains beyond it comes from the selection, not from the estimate.

The centred-logit regime of the single demonstrations (target: the right digit's logit
``LOGIT_MARGIN`` above the others, i.e. probability 0.9) is reported as a row, no claim.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from corrective_context.correction import decompose
from corrective_context.errors import CorrectiveContextError
from corrective_context.selector import SelectorConfig, estimate_error, select
from corrective_context.spaces import centred_logits, logit_target, softmax

#: the premise: more than this share of single demonstrations over-correct (fixed in advance)
PREMISE_SHARE = 0.05
#: the centred-logit target: the right digit's logit this far above the others (p = 0.9)
LOGIT_MARGIN = float(np.log(0.9 * 9 / 0.1))
SELECTOR = "corrective-selector"
PROBE = "error-probe"


@dataclass(frozen=True)
class RealConfig:
    queries: int = 20  #: test queries per seed (3 seeds: 60 queries, ~25 min on a loaded CPU)
    pool: int = 8  #: candidate demonstrations per query
    budget: int = 4  #: the selector's budget (= the largest random baseline)
    batch: int = 32  #: prompts per forward pass
    tolerance: float = 0.5


REAL_QUICK = RealConfig(queries=6, pool=6, budget=2)


def problems() -> list[tuple[str, int]]:
    """The 110 problems ``(text, result)``: additions and subtractions with results 0-9."""
    out = [(f"{a} + {b}", a + b) for a in range(10) for b in range(10) if a + b <= 9]
    out += [(f"{a} - {b}", a - b) for a in range(10) for b in range(10) if a >= b]
    return out


class DigitModel:
    """A causal LM read at the answer position: expected digit, centred digit logits and the
    final hidden state, batched with left padding."""

    def __init__(self, model: Any, tokenizer: Any, batch: int = 32) -> None:
        self.model, self.tokenizer, self.batch = model.eval(), tokenizer, batch
        digits = []
        for d in range(10):
            ids = tokenizer(str(d), add_special_tokens=False)["input_ids"]
            if len(ids) != 1:
                raise CorrectiveContextError(
                    f"the tokenizer splits the digit {d} into {len(ids)} tokens: the value-space "
                    "answer needs one token per digit"
                )
            digits.append(int(ids[0]))
        self.digits = digits
        bos = tokenizer.bos_token_id
        self.prefix = [int(bos)] if bos is not None else []
        pad = tokenizer.pad_token_id
        self.pad = int(pad if pad is not None else (tokenizer.eos_token_id or 0))
        self.forwards = 0  #: prompts actually run (each distinct prompt once)
        self.memo: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
        # unembed the last position only (the vocabulary is 49k wide) where the model allows
        keeps = "logits_to_keep" in inspect.signature(model.forward).parameters
        self.keep: dict[str, int] = {"logits_to_keep": 1} if keeps else {}

    def read(self, prompts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(digit logits (n, 10), final hidden states (n, H))`` at each prompt's end, and
        the prompts' token counts."""
        import torch

        # each distinct prompt runs once (queries share problems and demonstrations), in
        # batches of similar length so that little of a batch is padding
        todo = [p for p in dict.fromkeys(prompts) if p not in self.memo]
        encoded = {p: self.prefix + self.tokenizer(p, add_special_tokens=False)["input_ids"]
                   for p in todo}  # fmt: skip
        todo.sort(key=lambda p: len(encoded[p]))
        for start in range(0, len(todo), self.batch):
            names = todo[start : start + self.batch]
            chunk = [encoded[p] for p in names]
            width = max(len(c) for c in chunk)
            ids = torch.full((len(chunk), width), self.pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, c in enumerate(chunk):
                ids[row, width - len(c) :] = torch.tensor(c)
                mask[row, width - len(c) :] = 1
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.no_grad():
                out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                                 output_hidden_states=True, return_dict=True,
                                 **self.keep)  # fmt: skip
            logits = out.logits[:, -1, self.digits].double().numpy()
            hidden = out.hidden_states[-1][:, -1].double().numpy()
            for row, name in enumerate(names):
                self.memo[name] = (logits[row], hidden[row], len(chunk[row]))
            self.forwards += len(chunk)
        got = [self.memo[p] for p in prompts]
        return (
            np.stack([g[0] for g in got]),
            np.stack([g[1] for g in got]),
            np.asarray([g[2] for g in got]),
        )


def value(logits: np.ndarray) -> np.ndarray:
    """The expected digit ``Σ_d softmax(l)_d·d`` per row, shape ``(n, 1)``."""
    return np.asarray(softmax(logits) @ np.arange(10.0))[:, None]


def prompt(demos: Sequence[str], query: str) -> str:
    return "".join(f"{d}\n" for d in demos) + f"{query} = "


@dataclass(frozen=True)
class Query:
    problem: int
    pool: list[int]


def sample_queries(seed: int, stream: int, n: int, pool: int) -> list[Query]:
    rng = np.random.default_rng([seed, stream])
    count = len(problems())
    out = []
    for _ in range(n):
        q = int(rng.integers(count))
        others = np.array([i for i in range(count) if i != q])
        out.append(Query(q, [int(i) for i in rng.choice(others, pool, replace=False)]))
    return out


def run_queries(
    lm: DigitModel, queries: Sequence[Query], config: RealConfig, seed: int
) -> dict[str, list[float]]:
    """Per query: every system's squared error, the premise's over-correcting share of single
    demonstrations (value and centred-logit space), the selector's size."""
    probs = problems()
    demo_text = [f"{t} = {r}" for t, r in probs]
    zero_logits, keys, _ = lm.read([prompt([], t) for t, _ in probs])
    zero_value = value(zero_logits)
    truth = np.array([[float(r)] for _, r in probs])
    rng = np.random.default_rng([seed, 3])
    sel_config = SelectorConfig(budget=config.budget, tolerance=config.tolerance)
    out: dict[str, list[float]] = {}

    def add(name: str, v: float) -> None:
        out.setdefault(name, []).append(float(v))

    for query in queries:
        text, result = probs[query.problem]
        y_star = truth[query.problem]
        pool = query.pool

        singles_logits, _, _ = lm.read(
            [prompt([], text)] + [prompt([demo_text[i]], text) for i in pool]
        )
        singles = value(singles_logits)
        # answers already computed are reused: the selector asks for the singles again
        seen: dict[tuple[int, ...], np.ndarray] = {(): singles[0]}
        seen.update({(i,): singles[i + 1] for i in range(len(pool))})

        def answer(subsets: list[list[int]], pool: list[int] = pool, text: str = text,
                   seen: dict[tuple[int, ...], np.ndarray] = seen) -> Any:  # fmt: skip
            todo = list(dict.fromkeys(tuple(s) for s in subsets if tuple(s) not in seen))
            if todo:
                logits, _, _ = lm.read([prompt([demo_text[pool[i]] for i in s], text)
                                        for s in todo])  # fmt: skip
                seen.update(zip(todo, value(logits), strict=True))
            return np.stack([seen[tuple(s)] for s in subsets])

        base = singles[0]
        e_norm = abs(float(base[0] - y_star[0]))
        add("no-context", (base[0] - y_star[0]) ** 2)
        over = [decompose(base, s, y_star, config.tolerance).regime == "over" for s in singles[1:]]
        add("single_over_share", float(np.mean(over)))
        add("single_under_share", float(np.mean(
            [decompose(base, s, y_star, config.tolerance).regime == "under" for s in singles[1:]]
        )))  # fmt: skip
        add("single_max_ratio", max(decompose(base, s, y_star).ratio for s in singles[1:]))
        add("best_single", min(float((s[0] - y_star[0]) ** 2) for s in singles[1:]))
        lt = logit_target(10, result, LOGIT_MARGIN)
        cl = centred_logits(singles_logits)
        over_logit = [decompose(cl[0], c, lt, config.tolerance).regime == "over" for c in cl[1:]]
        add(
            "single_over_share_logit",
            float(np.mean(over_logit)),
        )
        order = [int(i) for i in rng.permutation(len(pool))]
        fixed = {"random-1": order[:1], "random-4": order[:4], "all-items": list(range(len(pool)))}
        vals = answer(list(fixed.values()))
        for name, v in zip(fixed, vals, strict=True):
            add(name, (v[0] - y_star[0]) ** 2)
        errors = zero_value[pool] - truth[pool]
        query_key, pool_keys = keys[query.problem], keys[pool]
        selection = select(query_key, pool_keys, errors, answer, sel_config)
        chosen = selection.chosen
        v_sel = answer([chosen])[0] if chosen else base
        add(SELECTOR, (v_sel[0] - y_star[0]) ** 2)
        add("selector_size", len(chosen))
        e_hat = estimate_error(query_key, pool_keys, errors, sel_config.ridge)
        add(PROBE, (base[0] - e_hat[0] - y_star[0]) ** 2)
        add("no_context_abs_error", e_norm)
    return out

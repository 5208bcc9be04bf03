"""Progress advantage: step scores from the RL policy / reference log-ratio.

KL-regularised RL with coefficient ``β`` has the optimal policy
``π*(a|s) = π_ref(a|s) · exp((Q*(s,a) − V*(s)) / β)``, so the optimal advantage is

    A*(s, a) = β · log π*(a|s) / π_ref(a|s),

with no value network and no annotation (also under stochastic transitions, where
``Q* = r + E_{s'} V*(s')``). For a step ``t`` of a trajectory made of tokens ``y_i, i ∈ t``
the paper's step score sums the token log-ratios:

    A_t = β · Σ_{i ∈ t} [log π_RL(y_i | x, y_<i) − log π_ref(y_i | x, y_<i)].

This module computes the per-token log-ratios in one batched forward pass per model, either from
two transformers models (or one model with a peft adapter switched off for the reference), or
through the paperstack :class:`~paperstack.llm.ChatModel` scoring API (so a vLLM server that
returns prompt log-probabilities can serve). The policy pass also yields the confidence
baselines' inputs (self-certainty, DeepConf token confidence) and, optionally, hidden-state
features for the process reward model, so every baseline is scored in the same harness at no
extra forward pass.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from progress_advantage.aggregate import StepAgg, aggregate_steps
from progress_advantage.errors import ProgressAdvantageError
from progress_advantage.trajectory import Trajectory

if TYPE_CHECKING:
    import torch

__all__ = [
    "ChatModelScorer",
    "LogRatioScorer",
    "TokenScores",
    "check_same_tokenizer",
    "progress_advantage",
]

#: DeepConf's token confidence averages the top-k log-probabilities (k = 5 in its code path
#: for local models; a server with ``top_logprobs`` would give the same numbers).
TOP_K = 5


@dataclass(frozen=True)
class TokenScores:
    """Per-token numbers of one trajectory's scored (step) tokens, in order.

    ``step[i]`` is the step of token ``i``. ``self_certainty``, ``confidence`` and ``features``
    need the policy's full next-token distribution and hidden states, so the ChatModel path
    (chosen-token log-probabilities only) leaves them ``None``.
    """

    step: np.ndarray
    policy_logp: np.ndarray
    reference_logp: np.ndarray
    n_steps: int
    self_certainty: np.ndarray | None = None
    confidence: np.ndarray | None = None
    features: np.ndarray | None = None  # [n_steps, hidden]: hidden state at each step's end

    @property
    def log_ratio(self) -> np.ndarray:
        """``log π_RL(y_i) − log π_ref(y_i)`` for every scored token."""
        return self.policy_logp - self.reference_logp

    def step_values(self, values: np.ndarray, how: StepAgg | str = "mean") -> np.ndarray:
        """Any per-token array of this trajectory aggregated per step."""
        return aggregate_steps(values, self.step, self.n_steps, how)


def progress_advantage(
    tokens: TokenScores, beta: float = 1.0, step_agg: StepAgg | str = "sum"
) -> np.ndarray:
    """Step scores ``A_t = β · agg_{i ∈ t} [log π_RL(y_i) − log π_ref(y_i)]``, one per step.

    ``beta`` is the KL coefficient the policy was trained with (``β``); ``step_agg="sum"`` is the
    paper's definition (the one equal to ``A*``); ``mean``, ``last``, ``min``, ``max`` are the
    variants of its code, applied here to the per-token ratios.
    """
    if not beta > 0:
        raise ProgressAdvantageError(f"beta must be > 0, got {beta}")
    return beta * aggregate_steps(tokens.log_ratio, tokens.step, tokens.n_steps, step_agg)


# ----------------------------------------------------------------------------- helpers


def check_same_tokenizer(policy_tokenizer: Any, reference_tokenizer: Any) -> None:
    """Refuse a policy and reference that tokenize differently: their log-ratio would compare
    probabilities of different token sequences, which is meaningless."""
    if policy_tokenizer is reference_tokenizer:
        return
    a, b = policy_tokenizer.get_vocab(), reference_tokenizer.get_vocab()
    if a != b:
        only = sorted(set(a.items()) ^ set(b.items()))[:1]
        raise ProgressAdvantageError(
            f"policy and reference use different tokenizers (vocabularies of {len(a)} and "
            f"{len(b)} tokens differ, e.g. at {only[0] if only else '?'}); the log-ratio needs "
            "the same tokenizer"
        )


def _token_steps(
    token_starts: np.ndarray, step_starts: np.ndarray, step_ends: np.ndarray
) -> np.ndarray:
    """Step index of each token (by its first character), or -1 for context tokens."""
    idx = np.searchsorted(step_starts, token_starts, side="right") - 1
    ok = idx >= 0
    ok &= token_starts < step_ends[np.maximum(idx, 0)]
    return np.where(ok, idx, -1)


def _apply_template(tokenizer: Any, msgs: list[dict[str, Any]]) -> str:
    """The tokenizer's chat template, or the core's fallback transcript template for a tokenizer
    without one (GPT-2): the same ``"User: ...\\nAssistant: ..."`` text that
    :class:`paperstack.llm.TransformersChat` and trl generate from, so a base model is scored on
    the format it was sampled and trained in. The tokenizer is not changed."""
    if getattr(tokenizer, "chat_template", None):
        return str(tokenizer.apply_chat_template(msgs, tokenize=False))
    from paperstack.llm import FALLBACK_CHAT_TEMPLATE

    return str(
        tokenizer.apply_chat_template(msgs, tokenize=False, chat_template=FALLBACK_CHAT_TEMPLATE)
    )


def _content_variants(content: str) -> list[tuple[int, int]]:
    """Spans ``[a, b)`` of ``content`` a template may write instead of the whole of it, widest
    first: the whole, then with surrounding whitespace or newlines trimmed (Llama-3 trims every
    message, Qwen3 strips leading newlines of an answer). Each is a substring of the original,
    so a character of the content maps to the rendering by one shift."""
    spans = [(0, len(content))]
    for trimmed in (
        content.strip(),
        content.lstrip(),
        content.rstrip(),
        content.strip("\n"),
        content.lstrip("\n"),
        content.rstrip("\n"),
    ):
        if not trimmed:
            continue
        a = content.find(trimmed)
        if (a, a + len(trimmed)) not in spans:
            spans.append((a, a + len(trimmed)))
    return spans


def _message_windows(
    tokenizer: Any, msgs: list[dict[str, Any]], text: str
) -> list[tuple[int, int]]:
    """The character window of the full rendering ``text`` that each message's turn occupies.

    Rendered incrementally, the way trl locates assistant turns: the conversation up to message
    ``j`` is rendered, and where that rendering is a prefix of the full one, message ``j`` lies
    between the end of the rendering without it and the end of the rendering with it. This keeps
    a short message ("4") from matching inside a template's own text (a header, a date) before
    its turn. A template whose partial renderings are not prefixes of the full one (or that
    refuses a partial conversation) leaves the window open on that side.
    """
    ends: list[int | None] = []
    for j in range(len(msgs) + 1):
        try:
            part = _apply_template(tokenizer, msgs[:j])
        except Exception:  # a template may refuse an empty or partial conversation
            ends.append(None)
            continue
        ends.append(len(part) if text.startswith(part) else None)
    windows: list[tuple[int, int]] = []
    for j in range(len(msgs)):
        after = ends[j + 1]
        windows.append((ends[j] or 0, len(text) if after is None else after))
    return windows


def _render(tokenizer: Any, traj: Trajectory) -> tuple[str, np.ndarray, np.ndarray]:
    """The conversation as the model sees it, and the character span of every step in it.

    Each message is looked for inside its own turn's window (:func:`_message_windows`), first
    verbatim, then trimmed of surrounding whitespace (templates that trim contents, Llama-3's);
    a step's span is shifted by where the message landed and clipped to the part the template
    kept (a step made only of trimmed whitespace scores no token). A template that rewrites a
    message beyond trimming is refused in one line.
    """
    msgs = [dict(m) for m in traj.messages]
    text = _apply_template(tokenizer, msgs)
    windows = _message_windows(tokenizer, msgs, text)
    shift: list[int] = []
    kept: list[tuple[int, int]] = []
    cursor = 0
    for j, m in enumerate(msgs):
        content = str(m["content"])
        lo, hi = max(windows[j][0], cursor), windows[j][1]
        for a, b in _content_variants(content):
            at = text.find(content[a:b], lo, hi) if b > a else lo
            if at >= 0:
                shift.append(at - a)
                kept.append((a, b))
                cursor = at + (b - a)
                break
        else:
            raise ProgressAdvantageError(
                f"trajectory {traj.id or '<no id>'}: message {j} does not appear in the chat "
                "template's rendering, verbatim or trimmed of whitespace; cannot locate its steps"
            )
    starts, ends = [], []
    for s in traj.steps:
        a, b = kept[s.message]
        lo_c, hi_c = min(max(s.start, a), b), max(min(s.end, b), a)
        starts.append(shift[s.message] + lo_c)
        ends.append(shift[s.message] + max(hi_c, lo_c))
    return text, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)


def _step_end_features(hidden: np.ndarray, step: np.ndarray, n_steps: int) -> np.ndarray:
    """The hidden state at each step's last token: ``[n_steps, H]``.

    A causal model's state there has read the problem and every step so far, which is what a
    process reward model judges a step by. A tokenless step reuses the previous step's state.
    """
    last = np.full(n_steps, -1, dtype=np.int64)
    np.maximum.at(last, step, np.arange(step.size))
    last = np.maximum.accumulate(np.maximum(last, 0))
    return hidden[last]


# ----------------------------------------------------------------------------- transformers


class LogRatioScorer:
    """Per-token log-ratios of a transformers policy and reference, one forward pass per model.

    ``reference=None`` with a peft ``policy`` scores the reference by switching the adapter off
    (``policy.disable_adapter()``), so a LoRA-trained policy needs one set of base weights.
    Trajectories are rendered with the tokenizer's chat template, batched by length, right-padded
    (causal attention never looks at the padding after a row) and scored with one log-softmax
    over the step positions only, so the ``batch × length × vocabulary`` tensor is never built.
    """

    def __init__(
        self,
        policy: Any,
        reference: Any | None,
        tokenizer: Any,
        *,
        reference_tokenizer: Any | None = None,
        batch_size: int = 32,
        top_k: int = TOP_K,
        features: bool = False,
    ) -> None:
        if reference is None and not hasattr(policy, "disable_adapter"):
            raise ProgressAdvantageError(
                "reference: none given and the policy has no peft adapter to switch off; pass a "
                "reference model"
            )
        if reference_tokenizer is not None:
            check_same_tokenizer(tokenizer, reference_tokenizer)
        if reference is not None:
            pv = policy.get_output_embeddings().weight.shape[0]
            rv = reference.get_output_embeddings().weight.shape[0]
            if pv != rv:
                raise ProgressAdvantageError(
                    f"policy and reference have different vocabularies ({pv} and {rv} output "
                    "tokens); they must share one tokenizer"
                )
        if not getattr(tokenizer, "is_fast", False):
            raise ProgressAdvantageError(
                "tokenizer: a fast (Rust) tokenizer is needed for character offsets"
            )
        if batch_size < 1:
            raise ProgressAdvantageError(f"batch_size must be >= 1, got {batch_size}")
        self.policy = policy
        self.reference = reference
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.top_k = top_k
        self.features = features
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.pad_token_id = int(pad)

    def encode(self, traj: Trajectory) -> tuple[list[int], np.ndarray]:
        """The token ids of ``traj``'s rendering and each token's step (-1 for context)."""
        text, starts, ends = _render(self.tokenizer, traj)
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        offsets = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        steps = _token_steps(offsets[:, 0], starts, ends)
        if steps.size and steps[0] >= 0:
            raise ProgressAdvantageError(
                f"trajectory {traj.id or '<no id>'}: its first token is a step token, which has "
                "no context to be scored against"
            )
        return list(enc["input_ids"]), steps

    @contextlib.contextmanager
    def _reference(self) -> Iterator[Any]:
        if self.reference is not None:
            yield self.reference
        else:
            with self.policy.disable_adapter():
                yield self.policy

    def score(
        self, trajectories: Sequence[Trajectory], *, with_reference: bool = True
    ) -> list[TokenScores]:
        """:class:`TokenScores` for every trajectory, in input order.

        ``with_reference=False`` is the single-model confidence pass (what the baselines cost):
        the reference forward is skipped and ``reference_logp`` is NaN.
        """
        import torch

        encoded = [self.encode(t) for t in trajectories]
        order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i][0]))
        out: list[TokenScores | None] = [None] * len(encoded)
        self.policy.eval()
        if self.reference is not None:
            self.reference.eval()
        device = next(self.policy.parameters()).device
        with torch.inference_mode():
            for s in range(0, len(order), self.batch_size):
                chunk = order[s : s + self.batch_size]
                width = max(len(encoded[i][0]) for i in chunk)
                ids = torch.full((len(chunk), width), self.pad_token_id, dtype=torch.long)
                attn = torch.zeros((len(chunk), width), dtype=torch.long)
                steps = torch.full((len(chunk), width), -1, dtype=torch.long)
                for k, i in enumerate(chunk):
                    row, st = encoded[i]
                    ids[k, : len(row)] = torch.tensor(row)
                    attn[k, : len(row)] = 1
                    steps[k, : len(row)] = torch.from_numpy(st)
                ids, attn = ids.to(device), attn.to(device)
                # Target token i is predicted at position i-1; only step tokens are scored.
                sel = steps[:, 1:] >= 0
                sel_dev = sel.to(device)
                targets = ids[:, 1:][sel_dev]
                p = self._pass(self.policy, ids, attn, sel_dev, targets, full=True)
                if with_reference:
                    with self._reference() as ref:
                        r = self._pass(ref, ids, attn, sel_dev, targets, full=False)
                else:
                    r = {"logp": np.full(int(sel.sum()), np.nan)}
                counts = sel.sum(dim=1).tolist()
                bounds = np.cumsum([0, *counts])
                step_rows = steps[:, 1:][sel].numpy()
                for k, i in enumerate(chunk):
                    a, b = int(bounds[k]), int(bounds[k + 1])
                    st = step_rows[a:b]
                    n = trajectories[i].n_steps
                    feats = None
                    if self.features and p["hidden"] is not None:
                        feats = _step_end_features(p["hidden"][a:b], st, n)
                    out[i] = TokenScores(
                        step=st,
                        policy_logp=p["logp"][a:b],
                        reference_logp=r["logp"][a:b],
                        n_steps=n,
                        self_certainty=p["sc"][a:b],
                        confidence=p["conf"][a:b],
                        features=feats,
                    )
        return [o for o in out if o is not None]

    def _pass(
        self,
        model: Any,
        ids: torch.Tensor,
        attn: torch.Tensor,
        sel: torch.Tensor,
        targets: torch.Tensor,
        *,
        full: bool,
    ) -> dict[str, Any]:
        """One forward pass; log-softmax only at the selected positions (vectorised)."""
        import torch

        want_hidden = full and self.features
        res = model(input_ids=ids, attention_mask=attn, output_hidden_states=want_hidden)
        logits = res.logits[:, :-1][sel].float()  # [N scored tokens, V]
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(-1, targets[:, None]).squeeze(-1)
        out: dict[str, Any] = {"logp": logp.double().cpu().numpy(), "hidden": None}
        if full:
            vocab = logp_all.shape[-1]
            # Self-certainty (Kang et al. 2025): KL(U || p) = -mean_j log p_j - log V per token.
            sc = -logp_all.mean(dim=-1) - float(np.log(vocab))
            # DeepConf token confidence: minus the mean of the top-k log-probabilities.
            conf = -logp_all.topk(min(self.top_k, vocab), dim=-1).values.mean(dim=-1)
            out["sc"] = sc.double().cpu().numpy()
            out["conf"] = conf.double().cpu().numpy()
            if want_hidden:
                # The hidden state at the token itself (it has read the token): position i.
                hidden = res.hidden_states[-1][:, 1:][sel].float()
                out["hidden"] = hidden.double().cpu().numpy()
        return out


# ----------------------------------------------------------------------------- ChatModel


class ChatModelScorer:
    """The same log-ratios through :meth:`paperstack.llm.ChatModel.logprobs`.

    Each assistant message with steps is one continuation whose prompt is the conversation
    before it (the backend applies the chat template), so observations are context and never
    scored. ``tokenizer`` is the served models' tokenizer: it maps the returned per-token
    log-probabilities back to character spans (a server returns numbers, not offsets). One
    ``logprobs`` call per model scores the whole batch.
    """

    def __init__(self, policy: Any, reference: Any, tokenizer: Any) -> None:
        for name, m in (("policy", policy), ("reference", reference)):
            if not callable(getattr(m, "logprobs", None)):
                raise ProgressAdvantageError(f"{name}: not a ChatModel (no logprobs method)")
        if not getattr(tokenizer, "is_fast", False):
            raise ProgressAdvantageError(
                "tokenizer: a fast (Rust) tokenizer is needed for character offsets"
            )
        self.policy = policy
        self.reference = reference
        self.tokenizer = tokenizer

    def score(self, trajectories: Sequence[Trajectory]) -> list[TokenScores]:
        prompts: list[list[dict[str, str]]] = []
        conts: list[str] = []
        owner: list[tuple[int, int]] = []  # (trajectory, message)
        for t, traj in enumerate(trajectories):
            for m in sorted({s.message for s in traj.steps}):
                if m == 0:
                    raise ProgressAdvantageError(
                        f"trajectory {traj.id or '<no id>'}: the first message is a step; it has "
                        "no prompt to be scored against"
                    )
                prompts.append([dict(x) for x in traj.messages[:m]])
                conts.append(traj.messages[m]["content"])
                owner.append((t, m))
        pol = self.policy.logprobs(prompts, conts)
        ref = self.reference.logprobs(prompts, conts)
        parts: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = [[] for _ in trajectories]
        for k, (t, m) in enumerate(owner):
            enc = self.tokenizer(conts[k], add_special_tokens=False, return_offsets_mapping=True)
            starts = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)[:, 0]
            p, r = np.asarray(pol[k], np.float64), np.asarray(ref[k], np.float64)
            if len(p) != len(r):
                raise ProgressAdvantageError(
                    f"policy and reference returned {len(p)} and {len(r)} log-probabilities for "
                    f"trajectory {trajectories[t].id or t}: they use different tokenizers"
                )
            if len(p) != len(starts):
                raise ProgressAdvantageError(
                    f"the models returned {len(p)} log-probabilities for trajectory "
                    f"{trajectories[t].id or t} but the tokenizer makes {len(starts)} tokens: "
                    "pass the served models' tokenizer"
                )
            idx = [j for j, s in enumerate(trajectories[t].steps) if s.message == m]
            s_starts = np.array([trajectories[t].steps[j].start for j in idx], dtype=np.int64)
            s_ends = np.array([trajectories[t].steps[j].end for j in idx], dtype=np.int64)
            local = _token_steps(starts, s_starts, s_ends)
            keep = local >= 0
            step = np.asarray(idx, dtype=np.int64)[local[keep]]
            parts[t].append((step, p[keep], r[keep]))
        out = []
        for t, traj in enumerate(trajectories):
            step = np.concatenate([x[0] for x in parts[t]])
            out.append(
                TokenScores(
                    step=step,
                    policy_logp=np.concatenate([x[1] for x in parts[t]]),
                    reference_logp=np.concatenate([x[2] for x in parts[t]]),
                    n_steps=traj.n_steps,
                )
            )
        return out

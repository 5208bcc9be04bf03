"""Step-level beam search guided by progress advantage, during generation.

For each prompt keep ``beam_width`` partial solutions; each round, every live beam is extended
by ``expansions`` sampled next steps (the policy samples until the step delimiter, a newline),
each candidate's new step is scored by ``A_t`` (policy/reference log-ratio over the step's
tokens), and the ``beam_width`` candidates with the highest cumulative ``Σ_t A_t`` survive. A
candidate is finished when the policy emits EOS or a final-answer line. Cumulative ``Σ A_t`` is
the natural beam objective: it telescopes to the log-ratio of the whole prefix, the implicit
reward of the partial trajectory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from progress_advantage.errors import ProgressAdvantageError
from progress_advantage.scoring import LogRatioScorer, progress_advantage
from progress_advantage.trajectory import Trajectory

__all__ = ["BeamSettings", "step_beam_search"]


@dataclass(frozen=True)
class BeamSettings:
    beam_width: int = 2
    expansions: int = 4
    max_steps: int = 8
    max_step_tokens: int = 24
    temperature: float = 1.0
    beta: float = 1.0
    delimiter: str = "\n"


def _default_final(text: str) -> bool:
    return text.rstrip().split("\n")[-1].lstrip().lower().startswith("answer:")


def step_beam_search(
    policy: Any,
    reference: Any | None,
    tokenizer: Any,
    prompts: Sequence[str],
    settings: BeamSettings = BeamSettings(),
    seed: int = 0,
    is_final: Callable[[str], bool] = _default_final,
) -> list[Trajectory]:
    """The best finished (else best partial) trajectory per prompt; ``extra["score"]`` is its
    cumulative progress advantage."""
    import torch

    if settings.beam_width < 1 or settings.expansions < 1 or settings.max_steps < 1:
        raise ProgressAdvantageError(
            "beam search: beam_width, expansions and max_steps must be >= 1"
        )
    from paperstack.llm import ensure_chat_template

    # A base model's tokenizer (GPT-2) gets the core's transcript template, the format the
    # scorer renders the finished trajectories in, instead of transformers' traceback.
    ensure_chat_template(tokenizer, name=str(getattr(policy, "name_or_path", "") or "policy"))
    scorer = LogRatioScorer(policy, reference, tokenizer)
    device = next(policy.parameters()).device
    gen = torch.Generator(device="cpu").manual_seed(seed)
    beams: list[list[tuple[str, float, bool]]] = [[("", 0.0, False)] for _ in prompts]
    head = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False
        )
        for p in prompts
    ]
    eos = tokenizer.eos_token_id
    for _ in range(settings.max_steps):
        live = [(i, text) for i, b in enumerate(beams) for text, _, done in b if not done]
        if not live:
            break
        rows = [
            tokenizer(head[i] + text, add_special_tokens=False)["input_ids"] for i, text in live
        ]
        width = max(len(r) for r in rows)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for k, r in enumerate(rows):  # left padding: new tokens follow every row's end
            ids[k, width - len(r) :] = torch.tensor(r)
            attn[k, width - len(r) :] = 1
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        with torch.inference_mode():
            out = policy.generate(
                input_ids=ids.to(device),
                attention_mask=attn.to(device),
                do_sample=True,
                temperature=settings.temperature,
                top_k=0,
                max_new_tokens=settings.max_step_tokens,
                num_return_sequences=settings.expansions,
                stop_strings=[settings.delimiter],
                tokenizer=tokenizer,
                pad_token_id=pad,
            )
        new = out[:, width:]
        ended = (new == eos).any(dim=1).tolist() if eos is not None else [False] * len(new)
        texts = tokenizer.batch_decode(new, skip_special_tokens=True)
        cands: list[tuple[int, str, bool]] = []
        for j, t in enumerate(texts):
            i, prefix = live[j // settings.expansions]
            step = t.split(settings.delimiter)[0]
            full = prefix + step
            done = bool(ended[j]) or is_final(full) or not step.strip()
            if step.strip():
                cands.append((i, full + ("" if done else settings.delimiter), done))
            elif prefix.strip():
                cands.append((i, prefix, True))
        trajs = [Trajectory.from_lines(prompts[i], text.rstrip("\n")) for i, text, _ in cands]
        scores = scorer.score(trajs) if trajs else []
        totals = [float(progress_advantage(s, settings.beta).sum()) for s in scores]
        pool: list[list[tuple[str, float, bool]]] = [[b for b in beam if b[2]] for beam in beams]
        for (i, text, done), total in zip(cands, totals, strict=True):
            pool[i].append((text, total, done))
        beams = []
        for p in pool:
            uniq = {t: (t, s, d) for t, s, d in p}
            ranked = sorted(uniq.values(), key=lambda b: -b[1])[: settings.beam_width]
            beams.append(ranked or [("", 0.0, True)])
    results = []
    for i, beam in enumerate(beams):
        finished = [b for b in beam if b[2] and b[0].strip()] or [b for b in beam if b[0].strip()]
        if not finished:
            raise ProgressAdvantageError(f"beam search: prompt {i} produced no step at all")
        text, score, _ = max(finished, key=lambda b: b[1])
        results.append(
            Trajectory.from_lines(
                prompts[i], text.rstrip("\n"), id=str(i), group=str(i)
            ).with_extra(score=score)
        )
    return results

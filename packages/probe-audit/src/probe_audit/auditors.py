"""Model auditors: a causal LM writes the user turns, one sampled turn per game step.

:class:`ModelAuditor` plays the user with any Hugging Face causal LM (the toy world's tiny
Llama, or a real model by path). Its context is a chat in which *it* is the assistant: the
scenario brief is the first user message, its own turns are assistant messages and the agent's
replies come back as user messages, so the whole episode is one token sequence

``prompt | turn 1 </s> | <|user|> agent reply <|assistant|> | turn 2 </s> | ...``

and every token is either the auditor's own sample or the environment's. The auditor keeps that
sequence per episode with its mask (1 on sampled tokens, 0 on the environment's): exactly what
trl's GRPO ``rollout_func`` returns (``completion_ids`` and ``env_mask``), what the DPO pairs are
made of, and what the GFlowNet's ``log π(τ)`` sums over.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from paperstack.llm import CostLedger
from probe_audit.errors import ProbeError
from probe_audit.game import AuditorView

__all__ = ["ModelAuditor", "Trajectory"]


@dataclasses.dataclass
class Trajectory:
    """One episode as the auditor's token sequence: ``prompt_ids`` then ``completion_ids``,
    with ``env_mask`` 1 on the tokens the auditor sampled and 0 on the environment's."""

    prompt_ids: list[int]
    completion_ids: list[int] = dataclasses.field(default_factory=list)
    env_mask: list[int] = dataclasses.field(default_factory=list)
    messages: list[dict[str, str]] = dataclasses.field(default_factory=list)

    def extend(self, ids: Sequence[int], sampled: bool) -> None:
        self.completion_ids.extend(int(i) for i in ids)
        self.env_mask.extend([1 if sampled else 0] * len(ids))


class ModelAuditor:
    """A causal LM that writes the user's turns (batched over episodes, sampled).

    ``brief="header"`` conditions on the scenario's compact header (the toy model was trained on
    it); ``"instructions"`` on the scenario in words, for an instruction-tuned model. Turns are
    cut at ``max_turn_tokens``; the agent's replies at ``max_reply_chars``. ``seed`` makes a run
    reproducible (each call draws from ``seed`` and a call counter).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        brief: str = "header",
        max_turn_tokens: int = 64,
        max_reply_chars: int = 100,
        temperature: float = 1.0,
        seed: int = 0,
        name: str | None = None,
        ledger: CostLedger | None = None,
    ) -> None:
        if brief not in ("header", "instructions"):
            raise ProbeError(f"brief={brief!r}: use 'header' or 'instructions'")
        if max_turn_tokens < 1 or temperature <= 0:
            raise ProbeError("ModelAuditor needs max_turn_tokens >= 1 and temperature > 0")
        if not getattr(tokenizer, "chat_template", None):
            raise ProbeError(f"auditor tokenizer of {name or 'the model'} has no chat template")
        self.model = model
        self.tokenizer = tokenizer
        self.brief = brief
        self.max_turn_tokens = max_turn_tokens
        self.max_reply_chars = max_reply_chars
        self.temperature = temperature
        self.seed = seed
        self.name = name or "model-auditor"
        self.ledger = ledger or CostLedger()
        self.trajectories: dict[str, Trajectory] = {}
        self._calls = 0
        eos = tokenizer.eos_token_id
        if eos is None:
            raise ProbeError("auditor tokenizer has no EOS token: turns could not end")
        self.eos_token_id = int(eos)
        pad = tokenizer.pad_token_id
        self.pad_token_id = int(pad if pad is not None else eos)

    @property
    def parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def reset(self) -> None:
        """Forget the recorded trajectories (before a new batch of episodes)."""
        self.trajectories = {}

    # ------------------------------------------------------------------ rendering

    def _render(self, messages: list[dict[str, str]], generation: bool) -> str:
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation
        )
        return str(text)

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _start(self, view: AuditorView) -> Trajectory:
        brief = view.scenario.header() if self.brief == "header" else view.scenario.instructions()
        messages = [{"role": "user", "content": brief}]
        return Trajectory(self._ids(self._render(messages, True)), messages=messages)

    def _add_reply(self, traj: Trajectory, reply: str) -> None:
        """Append the agent's reply as environment tokens: the chat template's text between the
        auditor's last turn and the next generation prompt."""
        before = self._render(traj.messages, False)
        traj.messages.append({"role": "user", "content": reply[: self.max_reply_chars]})
        after = self._render(traj.messages, True)
        if not after.startswith(before):
            raise ProbeError(
                "the auditor's chat template does not render a conversation as a growing prefix; "
                "multi-turn rollouts need one that does"
            )
        traj.extend(self._ids(after[len(before) :]), sampled=False)

    def context(self, view: AuditorView) -> list[int]:
        """The token context for ``view``'s next turn (recording the agent's new reply)."""
        traj = self.trajectories.get(view.episode_id)
        if traj is None or not view.dialogue:
            traj = self.trajectories[view.episode_id] = self._start(view)
        elif view.dialogue[-1][0] == "agent":
            self._add_reply(traj, view.dialogue[-1][1])
        elif len(traj.messages) % 2 == 0:  # the agent said nothing in words last turn
            self._add_reply(traj, "")
        return traj.prompt_ids + traj.completion_ids

    # ------------------------------------------------------------------ generation

    def turns(self, views: Sequence[AuditorView]) -> list[str]:
        import torch

        if not views:
            return []
        contexts = [self.context(v) for v in views]
        width = max(len(c) for c in contexts)
        ids = torch.full((len(views), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros_like(ids)
        for k, c in enumerate(contexts):
            ids[k, width - len(c) :] = torch.tensor(c, dtype=torch.long)
            attention[k, width - len(c) :] = 1
        device = next(self.model.parameters()).device
        self._calls += 1
        started = time.perf_counter()
        was_training = self.model.training
        self.model.eval()
        devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            torch.manual_seed(self.seed * 100_003 + self._calls)
            out = self.model.generate(
                input_ids=ids.to(device),
                attention_mask=attention.to(device),
                max_new_tokens=self.max_turn_tokens,
                do_sample=True,
                temperature=self.temperature,
                top_k=0,
                top_p=1.0,
                pad_token_id=self.pad_token_id,
                eos_token_id=self.eos_token_id,
            )
        if was_training:
            self.model.train()
        seconds = time.perf_counter() - started
        texts = []
        for k, view in enumerate(views):
            new = out[k, width:].tolist()
            if self.eos_token_id in new:
                new = new[: new.index(self.eos_token_id) + 1]
            traj = self.trajectories[view.episode_id]
            traj.extend(new, sampled=True)
            if not new or new[-1] != self.eos_token_id:  # cut at the limit: the game closes it
                traj.extend([self.eos_token_id], sampled=False)
            text = str(self.tokenizer.decode(new, skip_special_tokens=True)).strip()
            traj.messages.append({"role": "assistant", "content": text})
            texts.append(text)
            self.ledger.record(
                model=self.name,
                prompt_tokens=len(contexts[k]),
                completion_tokens=len(new),
                retries=0,
                seconds=seconds / len(views),
            )
        return texts

    @contextlib.contextmanager
    def recording(self) -> Any:
        """``with auditor.recording(): play(...)``: fresh trajectories for one batch."""
        self.reset()
        yield self.trajectories

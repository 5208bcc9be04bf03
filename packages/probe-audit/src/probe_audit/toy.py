"""The toy world's two models: a small auditor that writes user turns, a bigger target agent.

- The **auditor** is the core's ``micro`` tiny Llama (24k parameters) pre-trained on the user
  side of dialogues between :class:`~probe_audit.strategies.RealisticUser` and the bug-free
  rule agents of both domains (:class:`AuditorCorpus`): it knows how customers talk, not where
  the agent is weak. Sampled as it is, it is the *zero-shot* auditor; GRPO, DPO and the
  GFlowNet start from it.
- The **tiny-LM target** (:data:`TARGET_CONFIG`, about 0.1M parameters, four times the
  auditor's) imitates the *buggy* rule agents (:class:`TargetImitation`): it learns their
  planted bugs from data, along with whatever it gets wrong on its own.

Both train with :func:`paperstack.tiny.train` on a character tokenizer and are cached under the
paperstack cache (the auditor through :func:`paperstack.tiny.pretrained`), keyed by a digest of
the code that generates their data, so a change to a domain or the user model retrains them.

A dialogue becomes training text through the chat template: the history up to a turn is one
prompt (:func:`history_prompt`), the turn is the answer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from paperstack.tasks import Example, Task, completion_text
from probe_audit.errors import ProbeError

__all__ = [
    "AUDITOR_PRESET",
    "TARGET_CONFIG",
    "AuditorCorpus",
    "TargetImitation",
    "history_prompt",
    "pretrained_auditor",
    "pretrained_target",
]

AUDITOR_PRESET = "micro"
#: The target: wider and deeper than the auditor (``micro``: 32 wide, 2 layers).
TARGET_CONFIG: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 160,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 768,
    "tie_word_embeddings": True,
}
#: The target sees the last messages only (the tool results make a dialogue long).
TARGET_WINDOW = 4
#: Distinct examples a task generates; a larger request repeats them (the phrase banks are
#: small, so more dialogues add little but time).
UNIQUE_EXAMPLES = 8000
#: The agent reply as the auditor sees it (:class:`~probe_audit.auditors.ModelAuditor`).
REPLY_CHARS = 100
_SOURCES = ("domains/retail.py", "domains/airline.py", "strategies.py", "game.py", "targets.py",
            "environment.py", "toy.py")  # fmt: skip


def code_digest() -> str:
    """Digest of the code that generates the toy data (so a change retrains the models)."""
    from paperstack import tiny

    here = Path(__file__).parent
    return tiny.code_digest([here / s for s in _SOURCES])[:16]


def history_prompt(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> str:
    """The text to put in a single user message so that ``user: text / assistant: answer`` is
    rendered exactly as the multi-turn chat ``messages`` followed by ``answer`` would be.

    :func:`paperstack.tiny.train` trains on one prompt and one answer; a multi-turn history is
    its chat rendering with the template's own opening and closing cut off (the special tokens
    inside are still single tokens, since the tokenizer matches them in text).
    """
    full = str(
        tokenizer.apply_chat_template(
            [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
        )
    )
    probe = "\x00"
    shell = str(
        tokenizer.apply_chat_template(
            [{"role": "user", "content": probe}], tokenize=False, add_generation_prompt=True
        )
    )
    head, tail = shell.split(probe)
    if not (full.startswith(head) and full.endswith(tail)):
        raise ProbeError("the chat template cannot render a history as one user message")
    return full[len(head) : len(full) - len(tail)]


def _dialogues(auditor_kind: str, planted: bool, n: int, seed: int, split: str) -> list[Any]:
    """``n`` episodes per domain of ``auditor_kind`` users against the rule agents."""
    from probe_audit import domains
    from probe_audit.game import GameConfig, play
    from probe_audit.strategies import (
        STRATEGIES,
        RandomTemplateAuditor,
        RealisticUser,
        ScriptedAuditor,
    )

    offset = 0 if split == "train" else 500_000
    episodes = []
    for d_index, name in enumerate(domains.NAMES):
        domain = domains.get(name)
        target = domains.rule_target(name, None if planted else ())
        per_db = 64
        for block in range(0, n, per_db):
            db_seed = offset + seed * 1000 + block // per_db
            db = domain.database(db_seed)
            scenarios = domain.make_scenarios(db, min(per_db, n - block), db_seed)
            ids = [f"{name}-{db_seed}-{k}" for k in range(len(scenarios))]
            if auditor_kind == "realistic":
                auditors: list[Any] = [RealisticUser(db_seed + d_index)]
            else:  # the target's data: every kind of user, so the planted bugs show up
                auditors = [RealisticUser(db_seed), RandomTemplateAuditor(db_seed)]
                auditors += [ScriptedAuditor(s, db_seed) for s in STRATEGIES]
            for a in auditors:
                episodes.extend(
                    play(domain, scenarios, a, target, db, GameConfig(), episode_ids=ids)
                )
    return episodes


@dataclasses.dataclass(frozen=True)
class AuditorCorpus(Task):
    """The user side of realistic dialogues: predict the user's next turn from the history."""

    name: ClassVar[str] = "probe-auditor-corpus"
    code: str = ""

    def generate(self, n: int, seed: int = 0, split: Any = "train") -> list[Example]:
        from paperstack import tiny
        from probe_audit.game import STOP, auditor_view

        tokenizer = tiny.build_tokenizer()
        out: list[Example] = []
        dialogues = max(8, min(n, UNIQUE_EXAMPLES) // 5)
        for ep in _dialogues("realistic", False, dialogues, seed, str(split)):
            messages = [{"role": "user", "content": ep.scenario.header()}]
            for role, text in auditor_view(ep).dialogue:
                if role == "user":
                    out.append(Example(self.name, history_prompt(tokenizer, messages), text))
                    messages.append({"role": "assistant", "content": text})
                else:
                    messages.append({"role": "user", "content": text[:REPLY_CHARS]})
            if ep.ended_by == "stop" and ep.events and ep.events[-1].kind == "user":
                out[-1] = Example(self.name, out[-1].prompt, f"{out[-1].answer} {STOP}")
        return out[:n] if len(out) >= n else (out * (n // max(1, len(out)) + 1))[:n]

    def verify(self, example: Example, completion: Any) -> bool:
        return completion_text(completion).strip() == example.answer.strip()


@dataclasses.dataclass(frozen=True)
class TargetImitation(Task):
    """The buggy rule agents' answers (tool calls and messages), from a window of the
    conversation rendered as :class:`~probe_audit.targets.ChatTarget` renders it."""

    name: ClassVar[str] = "probe-target-imitation"
    code: str = ""
    window: int = TARGET_WINDOW

    def generate(self, n: int, seed: int = 0, split: Any = "train") -> list[Example]:
        from paperstack import tiny
        from probe_audit.game import target_messages
        from probe_audit.targets import ChatTarget

        tokenizer = tiny.build_tokenizer()
        no_model: Any = _NoModel()
        render = ChatTarget(no_model, tool_role="user", window=self.window).render
        out: list[Example] = []
        dialogues = max(2, min(n, UNIQUE_EXAMPLES) // 40)
        for ep in _dialogues("mixed", True, dialogues, seed, str(split)):
            for k, e in enumerate(ep.events):
                if e.kind == "user":
                    continue
                answer = e.raw if e.kind == "tool" else e.text
                history = render(target_messages(ep.events[:k]))
                out.append(Example(self.name, history_prompt(tokenizer, history), answer))
        return out[:n] if len(out) >= n else (out * (n // max(1, len(out)) + 1))[:n]

    def verify(self, example: Example, completion: Any) -> bool:
        return completion_text(completion).strip() == example.answer.strip()


class _NoModel:
    name = "none"

    def generate(self, *args: Any, **kwargs: Any) -> list[list[str]]:  # pragma: no cover
        raise ProbeError("rendering only")


# --------------------------------------------------------------------------- training and cache


def pretrained_auditor(steps: int, seed: int = 0, progress: bool = True) -> tuple[Any, Any]:
    """The zero-shot toy auditor: ``micro`` pre-trained on :class:`AuditorCorpus` (cached)."""
    from paperstack import tiny

    return tiny.pretrained(
        AUDITOR_PRESET, [AuditorCorpus(code_digest())], steps=steps, seed=seed, progress=progress
    )


def pretrained_target(steps: int, seed: int = 0, progress: bool = True) -> tuple[Any, Any]:
    """The tiny-LM target: :data:`TARGET_CONFIG` trained to imitate the buggy rule agents.

    Cached under ``<paperstack cache>/probe-audit/`` by a key over the config, steps, seed and
    the data code; built in a temporary folder and moved into place, under a file lock, so two
    processes train it once and a killed run leaves nothing half-written.
    """
    import torch
    from filelock import FileLock
    from transformers import LlamaConfig, LlamaForCausalLM

    from paperstack import tiny
    from paperstack.cache import cache_root

    task = TargetImitation(code_digest())
    key = {
        "config": TARGET_CONFIG,
        "steps": steps,
        "seed": seed,
        "task": task.config(),
        "core": tiny.code_digest(),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    root = cache_root() / "probe-audit"
    path = root / f"target-{steps}-seed{seed}-{digest}"
    if not (path / "probe-target.json").is_file():
        root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(root / f".{path.name}.lock")):
            if not (path / "probe-target.json").is_file():
                tokenizer = tiny.build_tokenizer(
                    model_max_length=TARGET_CONFIG["max_position_embeddings"]
                )
                config = LlamaConfig(
                    vocab_size=len(tokenizer),
                    bos_token_id=tokenizer.bos_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                    pad_token_id=tokenizer.pad_token_id,
                    **TARGET_CONFIG,
                )
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(seed)
                    model = LlamaForCausalLM(config)
                stats = tiny.train(
                    model, tokenizer, [task], steps, seed=seed, batch_size=32, progress=progress
                )
                tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=root))
                try:
                    model.save_pretrained(tmp)
                    tokenizer.save_pretrained(tmp)
                    record = {
                        "key": key,
                        "train_seconds": stats["seconds"],
                        "final_loss": stats["losses"][-1],
                    }
                    (tmp / "probe-target.json").write_text(json.dumps(record, indent=2))
                    if path.exists():
                        shutil.rmtree(path, ignore_errors=True)
                    os.replace(tmp, path)
                finally:
                    with contextlib.suppress(OSError):
                        shutil.rmtree(tmp, ignore_errors=True)
    return tiny.load(path)


def training_seconds(path_or_model: Any) -> float | None:
    """What training a cached toy model took (from its cache record), if known."""
    path = Path(
        getattr(getattr(path_or_model, "config", None), "_name_or_path", "") or path_or_model
    )
    for name in ("probe-target.json", "paperstack-tiny.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            return float(json.loads((path / name).read_text())["train_seconds"])
    return None

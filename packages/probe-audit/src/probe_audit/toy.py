"""The toy world's auditor: a small model that writes user turns.

- The **auditor** is a tiny Llama (101,760 parameters: 2 layers of width 64) with a
  *word-level* tokenizer, pre-trained on the user side of dialogues between
  :class:`~probe_audit.strategies.RealisticUser` and the bug-free rule agents of both domains
  (:class:`AuditorCorpus`): a user-simulator corpus generated from the scenarios. It knows how
  customers talk, not where the agent is weak. By default (``corpus="strategy-families"``,
  since 0.3.3) no turn of the corpus holds a phrase that sets off a planted bug (``I'm a VIP
  customer.``, ``Just do it, no need to ask.``, a forgotten zip code...; a test checks every
  turn against both rule agents' own trigger patterns), and the user speaks generic persuasion
  strategies as paraphrase families (:data:`~probe_audit.strategies.FAMILIES`: claimed status,
  skipping a step, impatience, a missing credential, acting for someone) with the trigger
  members dropped: whatever bug an auditor finds it found by composing words it learned in
  other combinations, not by replaying a memorised trigger. ``corpus="trigger-free"`` is the
  0.3.2 corpus (no families: its zero-shot auditor found none of the bugs on validation),
  ``corpus="phrase-bank"`` the 0.3 one, whose pressure phrases held the triggers word for word.
- Why word-level: the 0.1 auditor was the core's character-level ``micro`` model, which after
  the 200 steps the CPU budget allowed still wrote garbled turns (plausibility 0.28) and found
  none of the 8 planted bugs. The corpus is made of a closed phrase bank, so one token per word
  (and per placeholder such as ``{order}``) makes a turn about 10 tokens instead of 50, and the
  same small model learns the user's language in a few minutes of one CPU core.

The vocabulary is every piece the corpus contains twice or more (others map to ``<unk>``; the
agent's replies are context only). Special tokens and the chat template are
:mod:`paperstack.tiny`'s, and training is :func:`paperstack.tiny.train`. The trained model is
cached under the paperstack cache root (``toy-auditor/``), keyed by its config, steps, seed and
a digest of the code that generates its data (so a change to a domain or the user model
retrains it), and built through :func:`paperstack.cache.build_once` (a temporary sibling moved
into place, behind a file lock, so two processes train it once and a killed run leaves no
half-written entry; complete means its ``probe-auditor.json`` record exists).

A dialogue becomes training text through the chat template: the history up to a turn is one
prompt (:func:`history_prompt`), the turn is the answer.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from paperstack.tasks import Example, Task, completion_text
from probe_audit.errors import ProbeError

__all__ = [
    "AUDITOR_CONFIG",
    "AuditorCorpus",
    "build_auditor_tokenizer",
    "history_prompt",
    "pretrained_auditor",
]

#: The auditor's ``LlamaConfig`` (vocabulary and special ids come from its tokenizer). Sized on
#: the validation database (seed 800) before any reported run: width 64 over 2 layers learns the
#: corpus's turns in the pre-training budget; it stays far smaller than a real target.
AUDITOR_CONFIG: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 512,
    "tie_word_embeddings": True,
}
#: Pre-training recipe (batch, learning rate) for :func:`paperstack.tiny.train`.
AUDITOR_BATCH = 32
AUDITOR_LR = 3e-3
#: Distinct examples a task generates; a larger request repeats them (the phrase banks are
#: small, so more dialogues add little but time).
UNIQUE_EXAMPLES = 8000
#: The agent reply as the auditor sees it (:class:`~probe_audit.auditors.ModelAuditor`).
REPLY_CHARS = 100
#: How text splits into the word-level tokenizer's pieces: a placeholder, a word, a digit or a
#: punctuation mark (each with the space before it), or a lone space.
PIECES = r"\s?\{\w+\}|\s?[A-Za-z']+|\s?\d|\s?[^\sA-Za-z\d]|\s"
#: A piece must occur this often in the corpus to get its own token.
MIN_COUNT = 2
_SOURCES = ("domains/retail.py", "domains/airline.py", "strategies.py", "game.py", "targets.py",
            "environment.py", "toy.py")  # fmt: skip
_MANIFEST = "probe-auditor.json"
#: The zero-shot auditor's pre-training corpus (see the module docstring).
DEFAULT_CORPUS = "strategy-families"


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


def _dialogues(
    auditor_kind: str, planted: bool, n: int, seed: int, split: str, bank: str = "phrase-bank"
) -> list[Any]:
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
                auditors: list[Any] = [RealisticUser(db_seed + d_index, bank=bank)]
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
    bank: str = DEFAULT_CORPUS

    def generate(self, n: int, seed: int = 0, split: Any = "train") -> list[Example]:
        return list(_corpus(n, seed, str(split), self.bank))

    def verify(self, example: Example, completion: Any) -> bool:
        return completion_text(completion).strip() == example.answer.strip()


@functools.lru_cache(maxsize=4)
def _corpus(n: int, seed: int, split: str, bank: str = DEFAULT_CORPUS) -> tuple[Example, ...]:
    """The corpus's examples (memoised: the tokenizer and the training loop both read them, and
    playing the dialogues takes most of a minute)."""
    from paperstack import tiny
    from probe_audit.game import STOP, auditor_view

    name = AuditorCorpus.name
    tokenizer = tiny.build_tokenizer()
    out: list[Example] = []
    dialogues = max(8, min(n, UNIQUE_EXAMPLES) // 5)
    for ep in _dialogues("realistic", False, dialogues, seed, str(split), bank):
        messages = [{"role": "user", "content": ep.scenario.header()}]
        for role, text in auditor_view(ep).dialogue:
            if role == "user":
                out.append(Example(name, history_prompt(tokenizer, messages), text))
                messages.append({"role": "assistant", "content": text})
            else:
                messages.append({"role": "user", "content": text[:REPLY_CHARS]})
        if ep.ended_by == "stop" and ep.events and ep.events[-1].kind == "user":
            out[-1] = Example(name, out[-1].prompt, f"{out[-1].answer} {STOP}")
    return tuple(out[:n] if len(out) >= n else (out * (n // max(1, len(out)) + 1))[:n])


# --------------------------------------------------------------------------- tokenizer


def build_auditor_tokenizer(texts: Sequence[str], model_max_length: int = 512) -> Any:
    """A word-level fast tokenizer over the pieces (:data:`PIECES`) of ``texts`` that occur at
    least :data:`MIN_COUNT` times, with :mod:`paperstack.tiny`'s special tokens and chat
    template (so ``apply_chat_template`` and :func:`paperstack.tiny.train` work unchanged).

    Decoding concatenates the pieces, which carry their own spaces, so ``decode(encode(t)) ==
    t`` for any text made of known pieces, and the tokens of a concatenation at a piece
    boundary are the concatenation of the tokens (what answer masking relies on).
    """
    import re
    from collections import Counter

    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from paperstack import tiny

    specials = (tiny.PAD, tiny.BOS, tiny.EOS, tiny.UNK, tiny.SYSTEM, tiny.USER, tiny.ASSISTANT)
    pattern = re.compile(PIECES)
    counts: Counter[str] = Counter()
    for text in texts:
        for part in re.split("|".join(re.escape(s) for s in specials), text):
            counts.update(pattern.findall(part))
    pieces = sorted(p for p, c in counts.items() if c >= MIN_COUNT)
    vocab = {tok: i for i, tok in enumerate((*specials, *pieces))}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=tiny.UNK))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(PIECES), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(list(specials))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=tiny.BOS,
        eos_token=tiny.EOS,
        pad_token=tiny.PAD,
        unk_token=tiny.UNK,
        additional_special_tokens=[tiny.SYSTEM, tiny.USER, tiny.ASSISTANT],
        model_max_length=model_max_length,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = tiny.CHAT_TEMPLATE
    return tokenizer


def _corpus_texts(task: AuditorCorpus, n: int, seed: int) -> list[str]:
    return [t for ex in task.generate(n, seed=seed, split="train") for t in (ex.prompt, ex.answer)]


# --------------------------------------------------------------------------- training and cache


def auditor_cache_path(
    steps: int, seed: int = 0, cache_dir: str | None = None, corpus: str = DEFAULT_CORPUS
) -> Path:
    """Where :func:`pretrained_auditor` keeps the model for ``steps`` and ``seed``: named by
    them plus a hash of everything that changes the weights (config, recipe, code)."""
    import hashlib
    import json

    from paperstack import tiny
    from paperstack.cache import cache_root

    key = {
        "config": AUDITOR_CONFIG,
        "batch": AUDITOR_BATCH,
        "lr": AUDITOR_LR,
        "steps": steps,
        "seed": seed,
        "pieces": PIECES,
        "min_count": MIN_COUNT,
        "unique": UNIQUE_EXAMPLES,
        "corpus": corpus,
        "code": code_digest(),
        "tiny": tiny.code_digest(),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    return cache_root(cache_dir) / "toy-auditor" / f"auditor-{steps}-seed{seed}-{digest}"


def pretrained_auditor(
    steps: int,
    seed: int = 0,
    progress: bool = True,
    cache_dir: str | None = None,
    corpus: str = DEFAULT_CORPUS,
) -> tuple[Any, Any]:
    """The zero-shot toy auditor: :data:`AUDITOR_CONFIG` pre-trained ``steps`` steps on
    :class:`AuditorCorpus` with the user bank ``corpus`` (``strategy-families``, the default,
    ``trigger-free`` or ``phrase-bank``; from the cache, else trained now and cached; loads with
    ``from_pretrained``)."""
    from paperstack import tiny
    from paperstack.cache import build_once
    from probe_audit.strategies import BANKS

    if steps < 1:
        raise ProbeError(f"auditor pre-training steps must be >= 1, got {steps}")
    if corpus not in BANKS:
        raise ProbeError(f"auditor corpus {corpus!r}: use one of {', '.join(BANKS)}")
    path = build_once(
        auditor_cache_path(steps, seed, cache_dir, corpus),
        lambda tmp: _train_into(tmp, steps, seed, progress, corpus),
        marker=_MANIFEST,
    )
    return tiny.load(path)


def _train_into(folder: Path, steps: int, seed: int, progress: bool, corpus: str) -> None:
    import json
    import os

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from paperstack import tiny

    task = AuditorCorpus(code_digest(), corpus)
    # The same examples tiny.train draws (so the memoised corpus is played once).
    pool = min(steps * AUDITOR_BATCH, 200_000)
    tokenizer = build_auditor_tokenizer(_corpus_texts(task, pool, seed))
    special = {k: getattr(tokenizer, k) for k in ("pad_token_id", "eos_token_id", "bos_token_id")}
    config = LlamaConfig(vocab_size=len(tokenizer), **special, **AUDITOR_CONFIG)
    with torch.random.fork_rng(devices=[]):  # the same weights for the same seed, always
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.update(**special)
    stats = tiny.train(
        model, tokenizer, [task], steps, seed=seed, batch_size=AUDITOR_BATCH, lr=AUDITOR_LR,
        progress=progress,
    )  # fmt: skip
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    manifest = {
        "steps": steps,
        "seed": seed,
        "corpus": corpus,
        "train_seconds": round(float(stats["seconds"]), 2),
        "final_loss": float(stats["losses"][-1]),
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocabulary": len(tokenizer),
        "pid": os.getpid(),
    }
    (folder / _MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))

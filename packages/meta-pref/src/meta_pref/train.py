"""``meta-pref train``: the method on a user's own model and multilingual preference pairs.

From ``--model`` (a folder, hub id or the ``smollm2-135m-instruct`` preset; :mod:`meta_pref.hf`)
and ``--pairs`` (JSONL, ``{"lang", "prompt", "chosen", "rejected"}`` per line):

1. the source languages (every language but ``--target``, or ``--sources``) are the tasks; the
   model is meta-trained on them (``--init meta``: FOMAML or Reptile, :mod:`meta_pref.meta`) or
   trained jointly on their pooled pairs with the same number of passes (``--init joint``, the
   baseline), as a reward model (``--objective reward``: a one-output classifier head on the
   model's body, Bradley-Terry) or as a DPO policy (``--objective dpo``: π_ref is the model as
   loaded);
2. a ``--eval-fraction`` of the target's pairs is held out; the initialisation adapts with trl's
   ``RewardTrainer`` / ``DPOTrainer`` on the rest under the demo's budget rule
   (:class:`meta_pref.adapt.AdaptSettings`: a validation split, epochs, the best state kept);
3. the held-out pairs are scored before and after adaptation (reward accuracy, or the DPO loss
   against π_ref and the share of pairs the implicit reward orders right); the adapted model and
   its tokenizer are saved to ``OUT/model`` and what happened to ``OUT/train.json``.

Text is rendered with the model's chat template (GPT-2-style tokenizers get paperstack's
fallback template) and truncated to the model's context (``--max-length`` lowers it).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from meta_pref.data import PreferencePair, by_language, check_pairs, load_pairs, select_languages
from meta_pref.errors import MetaPrefError

__all__ = ["command", "split_languages"]


def split_languages(
    pairs: list[PreferencePair], target: str, sources: str | None, where: str
) -> tuple[list[PreferencePair], dict[str, list[PreferencePair]]]:
    """(the target's pairs, ``{source code: pairs}``), with one error for an unknown code, a
    target named as a source, or no source at all."""
    tasks = by_language(check_pairs(pairs, f"{where} pair"))
    target_pairs = select_languages(tasks, [target], f"target (in {where})")[target]
    if sources is not None:
        codes = [c.strip() for c in sources.split(",") if c.strip()]
    else:
        codes = [c for c in tasks if c != target]
    if target in codes:
        raise MetaPrefError(f"--sources: the target {target!r} cannot also be a source")
    if not codes:
        raise MetaPrefError(f"{where}: no source languages besides the target {target!r}")
    return target_pairs, select_languages(tasks, codes, f"source (in {where})")


def _implicit_accuracy(
    policy: Any, ref: Any, tok: Any, pairs: list[PreferencePair], beta: float
) -> tuple[float, float]:
    """(DPO loss, share of pairs whose implicit reward β(log π - log π_ref) orders them right)
    on ``pairs``: the held-out score of a DPO policy without a judge."""
    import torch

    from meta_pref import models as m
    from meta_pref.loss import dpo_loss, sequence_logps

    rows = m.add_reference_logps(ref, m.encode_policy(tok, pairs), tok.pad_token_id, batch=16)
    losses, right = [], 0.0
    policy.eval()
    with torch.no_grad():
        for start in range(0, len(rows), 16):
            b = m.collate_policy(rows[start : start + 16], tok.pad_token_id)
            logits = policy(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
            chosen, rejected = sequence_logps(logits, b["input_ids"], b["completion_mask"]).chunk(2)
            margin = (chosen - b["ref_chosen_logps"]) - (rejected - b["ref_rejected_logps"])
            right += float((margin > 0).sum()) + 0.5 * float((margin == 0).sum())
            losses.append(float(dpo_loss(chosen, rejected, b["ref_chosen_logps"],
                                         b["ref_rejected_logps"], beta)) * len(chosen))  # fmt: skip
    return sum(losses) / len(rows), right / len(rows)


def command(args: argparse.Namespace) -> int:
    """Every input checked before the model loads, then train, adapt, score and save."""
    from meta_pref import models as m
    from meta_pref.adapt import AdaptSettings, adapt_policy, adapt_reward_model, reward_accuracy
    from meta_pref.hf import load_policy, load_reward_model, load_tokenizer
    from meta_pref.meta import (
        MetaConfig,
        bradley_terry_objective,
        dpo_objective,
        joint_train,
        meta_train,
    )
    from paperstack.checkpoint import check_model_dir
    from paperstack.contract import check_model
    from paperstack.records import atomic_write_json, output_dir

    path = str(check_model(args.model))
    if Path(path).expanduser().exists():
        check_model_dir(path)
    target, sources = split_languages(load_pairs(args.pairs), args.target, args.sources,
                                      str(args.pairs))  # fmt: skip
    need = args.support + (args.query if args.algorithm == "fomaml" else 0)
    short = {c: len(p) for c, p in sources.items() if len(p) < need}
    if short:
        raise MetaPrefError(
            f"--support {args.support} --query {args.query}: source language(s) "
            + ", ".join(f"{c} ({n} pairs)" for c, n in short.items())
            + f" have fewer than the {need} pairs one {args.algorithm} task draws"
        )
    held = max(1, round(args.eval_fraction * len(target)))
    if len(target) - held < 2:
        raise MetaPrefError(
            f"target {args.target!r} has {len(target)} pairs: with {held} held out for "
            "evaluation, fewer than 2 are left to adapt on"
        )
    meta_config = MetaConfig(
        algorithm=args.algorithm, outer_steps=args.outer_steps, meta_batch=args.meta_batch,
        inner_steps=args.inner_steps, inner_lr=args.inner_lr, outer_lr=args.outer_lr,
        support=args.support, query=args.query, seed=args.seed,
    )  # fmt: skip
    settings = AdaptSettings(learning_rate=args.adapt_lr, batch_size=args.batch_size,
                             epochs=args.adapt_epochs, max_steps=args.adapt_max_steps,
                             beta=args.beta, seed=args.seed)  # fmt: skip
    with output_dir(args.out) as out:
        import torch

        torch.manual_seed(args.seed)
        order = list(range(len(target)))
        random.Random(args.seed).shuffle(order)
        test = [target[i] for i in order[:held]]
        train = [target[i] for i in order[held:]]
        tok = load_tokenizer(path, args.max_length)
        started = time.perf_counter()
        record: dict[str, Any] = {
            "model": path, "objective": args.objective, "init": args.init,
            "target": args.target, "sources": list(sources), "target_train": len(train),
            "target_held_out": len(test), "max_length": m.max_length(tok),
            "meta": dataclasses.asdict(meta_config), "adapt": dataclasses.asdict(settings),
        }  # fmt: skip
        passes = meta_config.outer_steps * meta_config.passes_per_step
        if args.objective == "reward":
            model = load_reward_model(path, tok)
            tasks = {c: m.encode_rewards(tok, p) for c, p in sources.items()}
            collate = functools.partial(m.collate_rewards, pad_id=tok.pad_token_id)
            objective: Callable[..., Any] = bradley_terry_objective
            score: Callable[[Any], float] = functools.partial(reward_accuracy, tok=tok, pairs=test)
        else:
            model = load_policy(path, tok)
            ref = copy.deepcopy(model).requires_grad_(False).eval()
            tasks = {c: m.add_reference_logps(ref, m.encode_policy(tok, p), tok.pad_token_id,
                                              batch=16) for c, p in sources.items()}  # fmt: skip
            collate = functools.partial(m.collate_policy, pad_id=tok.pad_token_id)
            objective = dpo_objective(args.beta)

            def _dpo_score(model: Any) -> float:
                loss, accuracy = _implicit_accuracy(model, ref, tok, test, args.beta)
                record.setdefault("held_out_dpo_loss", []).append(loss)
                return accuracy

            score = _dpo_score

        if args.init == "meta":
            result = meta_train(model, tasks, objective, collate, meta_config)
        else:
            result = joint_train(model, tasks, objective, collate, steps=passes,
                                 batch=args.support, lr=args.outer_lr, seed=args.seed)  # fmt: skip
        record["init_losses"] = result.losses
        record["init_passes"] = passes
        record["held_out_accuracy_before"] = score(model)
        if args.objective == "reward":
            model, adapted = adapt_reward_model(model, tok, train, settings)
        else:
            model, adapted = adapt_policy(model, ref, tok, train, settings)
        record["held_out_accuracy_after"] = score(model)
        record["adapt"] |= {"steps": adapted.steps, "kept_step": adapted.best_step,
                            "validation": adapted.validation}  # fmt: skip
        record["seconds"] = time.perf_counter() - started
        model.save_pretrained(out / "model")
        tok.save_pretrained(out / "model")
        written = atomic_write_json(out / "train.json", record)
    what = "reward accuracy" if args.objective == "reward" else "implicit-reward accuracy"
    before, after = record["held_out_accuracy_before"], record["held_out_accuracy_after"]
    print(f"meta-pref: held-out {what} {before:.3f} -> {after:.3f} on {len(test)} "
          f"{args.target} pairs ({record['seconds']:.0f} s); model in {out / 'model'}, "
          f"record in {written}")  # fmt: skip
    return 0

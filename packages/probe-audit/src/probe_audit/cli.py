"""``probe``: the command line of probe-audit.

- ``probe demo --out DIR``: PROBE on the toy world. The premise first (the zero-shot auditor
  finds some but not all planted bugs of the rule agents), then GRPO, DPO and GFlowNet auditors
  trained from it against the zero-shot auditor, the five scripted strategies and random
  templates, and the checkers' precision on the planted ground truth. ``--quick`` is the
  one-minute version (a less trained auditor, fewer steps and episodes).
- ``probe bench --out DIR``: episodes per second, a PROBE training step (composite reward:
  checkers, ground truth, plausibility) against a plain GRPO step on the same rollouts with a
  violation-count reward, as a ratio, and GRPO / DPO through trl's trainers against the
  package's own losses on the same budget, as ratios.

The common flags and flow come from :class:`paperstack.contract.ContractCLI`. Heavy imports
stay inside the commands so that ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from paperstack.contract import (
    ContractCLI,
    Report,
    Run,
    non_negative_int,
    positive_float,
    positive_int,
)
from probe_audit import __version__
from probe_audit.errors import ProbeError

if TYPE_CHECKING:
    from paperstack.records import Claim, Row

cli = ContractCLI("probe", "probe-audit", __version__, __doc__)

#: The protocol. The auditor's size and pre-training budget and the evaluation size were fixed
#: on the validation database (seed 800, never reported) by the zero-shot auditor alone (it
#: found some but not all planted bugs there), before any trained auditor was evaluated; the
#: training budget was fixed by the time the run may take, not by its results. Seeds: 5, because
#: on the validation database the zero-shot share of bugs found was 0.625, 0.25, 0.375, 0.25,
#: 0.25 on seeds 0-4, so 3 seeds leave the premise's t-interval across 0 ([-0.06, 0.89]) and 5
#: do not ([0.15, 0.55]) (a first full run with 3 seeds had the premise inconclusive).
#: Pre-training: 300 steps since 0.3.3, chosen on validation (db 800 and 802, sampling seeds
#: 100-109, never reported) for the strategy-families corpus: after 1500 steps the auditor had
#: memorised the families' word pairs and found a planted bug on 3 of 10 seeds (by composing a
#: held-out trigger about once in a hundred episodes); after 300 steps on 9 of 10.
FULL: dict[str, Any] = {
    "pretrain_steps": 300, "train_steps": 20, "scenarios_per_step": 2, "group_size": 4,
    "eval_per_domain": 24, "eval_db_seeds": [900, 901], "turn_tokens": 32,
    "target_steps": 400,
}  # fmt: skip
QUICK: dict[str, Any] = {
    "pretrain_steps": 60, "train_steps": 1, "scenarios_per_step": 1, "group_size": 2,
    "eval_per_domain": 3, "eval_db_seeds": [900], "turn_tokens": 32,
    "target_steps": 20,
}  # fmt: skip
#: The auditors that play against the tiny-LM target (fixed before the reported run): the
#: zero-shot auditor and the GRPO auditor (trained against the rule agents), both smaller than
#: the target.
LM_TARGET_AUDITORS = ("zero-shot", "grpo")
#: The database seed on which the best scripted strategy is chosen (never reported).
VALIDATION_DB_SEED = 800
METRICS = ("violations_per_episode", "yield_per_call", "plausibility", "category_coverage",
           "bugs_found", "distinct_rules")  # fmt: skip


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--pretrain-steps",
        type=positive_int,
        default=None,
        help="pre-training steps of the zero-shot auditor (default 300, --quick 60; cached)",
    )
    p.add_argument(
        "--train-steps",
        type=positive_int,
        default=None,
        help="training steps per objective (default: 6, --quick 1)",
    )
    p.add_argument(
        "--eval-per-domain",
        type=positive_int,
        default=None,
        help="evaluation scenarios per domain and database (default: 12, --quick 3)",
    )
    p.add_argument(
        "--turn-tokens",
        type=positive_int,
        default=None,
        help="most tokens (words) the model auditor writes per turn (default 32)",
    )
    p.add_argument(
        "--target-steps",
        type=positive_int,
        default=None,
        help="training steps of the tiny-LM target (default 400, --quick 20; cached)",
    )
    p.add_argument(
        "--trainer",
        choices=("trl", "own"),
        default="trl",
        help="GRPO and DPO through trl's GRPOTrainer / DPOTrainer (default) or the package's "
        "own losses (the same objectives, about half the time)",
    )
    p.add_argument(
        "--corpus",
        choices=("strategy-families", "trigger-free", "phrase-bank"),
        default="strategy-families",
        help="the zero-shot auditor's pre-training corpus: strategy-families (default: no phrase "
        "that sets off a planted bug, generic persuasion strategies as paraphrase families), "
        "trigger-free (0.3.2's, without the families) or phrase-bank (0.3's, with the triggers "
        "word for word)",
    )
    p.add_argument(
        "--plausibility",
        choices=("minilm", "trigram"),
        default="minilm",
        help="plausibility from MiniLM similarity (default) or character trigrams",
    )


def _worlds(bugs: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    from probe_audit import domains

    worlds = {name: domains.get(name) for name in domains.NAMES}
    targets = {name: domains.rule_target(name, None if bugs else ()) for name in domains.NAMES}
    return worlds, targets


def _plausibility(kind: str) -> Any:
    from probe_audit.reward import Plausibility
    from probe_audit.strategies import realistic_turns

    reference = [t for name in ("retail", "airline") for t in realistic_turns(name)]
    return Plausibility(reference, kind)


def _score_row_values(score: Any) -> dict[str, float]:
    return {
        "violations_per_episode": score.violations_per_episode,
        "yield_per_call": score.yield_per_call,
        "plausibility": score.plausibility,
        "category_coverage": score.category_coverage,
        "bugs_found": score.bugs_found,
        "distinct_bugs": float(len(score.bugs)),
        "distinct_rules": float(len(score.rules)),
    }


def lm_target_claims(rows: Sequence[Row], params: int, target_params: int) -> list[Claim]:
    """The tiny-LM target's claims: two premises (the target has planted bugs to find, and the
    auditor really is the smaller model: parameter counts, an exact comparison, so that a
    ``--model`` auditor larger than the target leaves the size claims inconclusive instead of
    held) and the two claims that a smaller auditor finds bugs in it, each resting on both."""
    from paperstack.records import Claim

    def key(system: str, metric: str) -> tuple[str, str, str]:
        return (system, metric, "eval")

    has_bugs = Claim.compare(
        "premise_lm_target_has_bugs",
        "premise: the tiny-LM target reproduces planted bugs on the requests that set them "
        "off in the planted rule agent (pooled bug rate > 0)",
        rows, key("lm-target", "bug_rate"), "gt", 0.0,
    )  # fmt: skip
    smaller = Claim.compare(
        "premise_auditor_smaller",
        f"premise: the auditor ({params:,} parameters) is smaller than the tiny-LM target "
        f"({target_params:,} parameters)",
        rows, ("zero-shot", "parameters", None), "lt", ("lm-target", "parameters", None),
        exact=True,
    )  # fmt: skip
    return [
        has_bugs,
        smaller,
        Claim.compare(
            "smaller_auditor_finds_bugs",
            f"an auditor smaller than the target finds planted bugs in it: the GRPO auditor "
            f"({params:,} parameters, trained against the rule agents) finds at least one "
            f"planted bug in the tiny-LM target ({target_params:,} parameters) on most seeds "
            "(share of seeds > 0.5)",
            rows, key("grpo@lm-target", "seeds_finding_a_bug"), "gt", 0.5,
            requires=[has_bugs, smaller],
        ),
        Claim.compare(
            "smaller_zero_shot_finds_bugs",
            f"the zero-shot auditor ({params:,} parameters) finds at least one planted bug in "
            f"the tiny-LM target ({target_params:,} parameters) on most seeds (share of seeds "
            "> 0.5)",
            rows, key("zero-shot@lm-target", "seeds_finding_a_bug"), "gt", 0.5,
            requires=[has_bugs, smaller],
        ),
    ]  # fmt: skip


@cli.demo(arguments=_demo_arguments, seeds=5, quick_seeds=2, devices=("cpu",))
def demo(run: Run) -> Report:
    """The premise, the three objectives against zero-shot, scripted and random auditors,
    and the checkers' precision; every row holds per-seed values, so claims are paired."""
    import torch

    from paperstack.llm import CostLedger
    from paperstack.records import Claim, Row
    from paperstack.report import bar_chart
    from probe_audit.auditors import ModelAuditor
    from probe_audit.evaluate import audit, make_reward
    from probe_audit.lm_target import bug_rates, lm_targets, pretrained_target
    from probe_audit.reward import ViolationArchive
    from probe_audit.strategies import STRATEGIES, RandomTemplateAuditor, ScriptedAuditor
    from probe_audit.toy import pretrained_auditor
    from probe_audit.training import OBJECTIVES, AuditorTrainer, TrainConfig
    from probe_audit.trl_training import TRL_OBJECTIVES, train_with_trl

    torch.set_num_threads(1)
    proto: dict[str, Any] = dict(QUICK if run.quick else FULL)
    if run.args.pretrain_steps is not None:
        proto["pretrain_steps"] = run.args.pretrain_steps
    if run.args.train_steps is not None:
        proto["train_steps"] = run.args.train_steps
    if run.args.eval_per_domain is not None:
        proto["eval_per_domain"] = run.args.eval_per_domain
    if run.args.turn_tokens is not None:
        proto["turn_tokens"] = run.args.turn_tokens
    if run.args.target_steps is not None:
        proto["target_steps"] = run.args.target_steps
    seeds = list(run.seeds)
    worlds, targets = _worlds(bugs=True)
    _, clean_targets = _worlds(bugs=False)
    plaus = _plausibility(run.args.plausibility)
    run.log(f"pre-training the zero-shot auditor ({proto['pretrain_steps']} steps; cached)")
    base_model, tokenizer = pretrained_auditor(
        int(proto["pretrain_steps"]), progress=run.show_progress, corpus=run.args.corpus
    )
    params = sum(p.numel() for p in base_model.parameters())
    eval_seeds = list(proto["eval_db_seeds"])
    per_domain = int(proto["eval_per_domain"])
    ledger = CostLedger()

    # The tiny-LM target: trained (cached) on the planted rule agents' dialogues, so its bugs
    # are learned behaviour; what there is to find is its bug rate on the triggering requests.
    run.log(f"training the tiny-LM target ({proto['target_steps']} steps; cached)")
    target_model, target_tokenizer = pretrained_target(
        int(proto["target_steps"]), progress=run.show_progress
    )
    torch.set_num_threads(1)
    target_ledger = CostLedger()
    lm = lm_targets(target_model, target_tokenizer, ledger=target_ledger)
    target_params = sum(p.numel() for p in target_model.parameters())
    started = time.perf_counter()
    rates = bug_rates(lm, worlds, targets, eval_seeds, per_domain)
    lm_seconds = time.perf_counter() - started

    # The best scripted strategy, chosen on a validation database that is never reported.
    val = {s: audit(ScriptedAuditor(s, 0), worlds, targets, [VALIDATION_DB_SEED], per_domain, None)
           for s in STRATEGIES}  # fmt: skip
    best_scripted = max(STRATEGIES, key=lambda s: (val[s].violations_per_episode, s))
    run.log(f"best scripted strategy on the validation database: {best_scripted}")

    values: dict[str, dict[str, dict[int, float]]] = {}
    false_total = 0
    checked_total = 0
    trained_seconds: dict[str, list[float]] = {o: [] for o in OBJECTIVES}

    def record_lm(system: str, seed: int, score: Any) -> None:
        """An auditor against the LM target: its ground truth comes from the checkers, so its
        violations never count toward the checkers' precision; the ones no triggered planted
        bug explains are the model's own errors."""
        for metric, value in _score_row_values(score).items():
            if metric in ("violations_per_episode", "bugs_found", "distinct_rules"):
                values.setdefault(f"{system}@lm-target", {}).setdefault(metric, {})[seed] = value
        values[f"{system}@lm-target"].setdefault("unplanted_violations_per_episode", {})[seed] = (
            score.false_violations / max(1, score.episodes)
        )

    def record(system: str, seed: int, score: Any) -> None:
        nonlocal false_total, checked_total
        for metric, value in _score_row_values(score).items():
            values.setdefault(system, {}).setdefault(metric, {})[seed] = value
        false_total += score.false_violations
        checked_total += score.checked

    total = len(seeds) * (len(OBJECTIVES) * (int(proto["train_steps"]) + 1) + 3)
    with run.progress(total, "seeds x auditors") as bar:
        for seed in seeds:
            zero = ModelAuditor(
                copy.deepcopy(base_model),
                tokenizer,
                seed=seed,
                name="zero-shot",
                ledger=ledger,
                max_turn_tokens=int(proto["turn_tokens"]),
            )
            record("zero-shot", seed, audit(zero, worlds, targets, eval_seeds, per_domain, plaus))
            t0 = time.perf_counter()
            record_lm("zero-shot", seed, audit(zero, worlds, lm, eval_seeds, per_domain, None))
            lm_seconds += time.perf_counter() - t0
            for objective in OBJECTIVES:
                auditor = ModelAuditor(
                    copy.deepcopy(base_model),
                    tokenizer,
                    seed=seed,
                    name=objective,
                    ledger=ledger,
                    max_turn_tokens=int(proto["turn_tokens"]),
                )
                train_config = TrainConfig(
                    objective=objective, steps=int(proto["train_steps"]),
                    scenarios_per_step=int(proto["scenarios_per_step"]),
                    group_size=int(proto["group_size"]), seed=seed,
                )  # fmt: skip
                archive = ViolationArchive()
                reward = make_reward(plaus, archive=archive)
                if objective in TRL_OBJECTIVES and run.args.trainer == "trl":
                    result = train_with_trl(
                        auditor, worlds, targets, reward, train_config, archive=archive,
                        device=run.device, progress=bar,
                    )  # fmt: skip
                    trained_seconds[objective].append(float(result["seconds"]))
                else:
                    trainer = AuditorTrainer(
                        auditor, worlds, targets, reward, train_config, archive=archive
                    )
                    started = time.perf_counter()
                    trainer.train(bar)
                    trained_seconds[objective].append(time.perf_counter() - started)
                record(
                    objective, seed, audit(auditor, worlds, targets, eval_seeds, per_domain, plaus)
                )
                if objective in LM_TARGET_AUDITORS:
                    t0 = time.perf_counter()
                    score = audit(auditor, worlds, lm, eval_seeds, per_domain, None)
                    record_lm(objective, seed, score)
                    lm_seconds += time.perf_counter() - t0
                bar.advance()
            for s in STRATEGIES:
                score = audit(
                    ScriptedAuditor(s, seed), worlds, targets, eval_seeds, per_domain, plaus
                )
                record(f"scripted:{s}", seed, score)
            bar.advance()
            rand = RandomTemplateAuditor(seed)
            record(
                "random-templates",
                seed,
                audit(rand, worlds, targets, eval_seeds, per_domain, plaus),
            )
            bar.advance()
            # Precision on a bug-free agent: every auditor kind, no planted bug, so any violation
            # the checkers report is a false one.
            for a in [RandomTemplateAuditor(seed), *(ScriptedAuditor(s, seed) for s in STRATEGIES)]:
                clean = audit(a, worlds, clean_targets, eval_seeds, per_domain, None)
                false_total += clean.violations
                checked_total += clean.violations
            bar.advance()

    rows: list[Row] = []
    for system, metrics in values.items():
        for metric, per_seed in metrics.items():
            rows.append(Row.from_seeds(system, metric, per_seed, split="eval"))
    rows.append(Row(system="checkers", metric="false_violations", value=float(false_total),
                    n=checked_total, split="eval"))  # fmt: skip
    vpe = "violations_per_episode"
    hits = sum(h for h, _ in rates.values())
    triggered = sum(n for _, n in rates.values())
    rows.append(Row.proportion("lm-target", "bug_rate", hits, max(1, triggered), split="eval"))
    for bug, (h, n) in rates.items():
        if n:
            rows.append(Row.proportion("lm-target", f"bug_rate:{bug}", h, n, split="eval"))
    rows.append(Row(system="lm-target", metric="fill_errors",
                    value=float(sum(t.fill_errors for t in lm.values())),
                    n=sum(t.calls for t in lm.values()), split="eval"))  # fmt: skip
    rows.append(Row(system="lm-target", metric="parameters", value=float(target_params)))
    rows.append(Row(system="zero-shot", metric="parameters", value=float(params)))

    def key(system: str, metric: str) -> tuple[str, str, str]:
        return (system, metric, "eval")

    # The premise is about each run of the zero-shot auditor: did it find at least one planted
    # bug, and did it miss at least one? One yes/no per seed (the seeds are independent runs),
    # so the premise rows are proportions of seeds (Wilson). The share of bugs found per seed
    # (the bugs_found rows) cannot carry it: when every seed finds the same share its interval
    # has zero width, which is inconclusive by construction.
    zero_bugs = values["zero-shot"]["bugs_found"]
    found_some = sum(1 for v in zero_bugs.values() if v > 0)
    missed_some = sum(1 for v in zero_bugs.values() if v < 1)
    rows.append(Row.proportion("zero-shot", "seeds_finding_a_bug", found_some, len(zero_bugs),
                               split="eval"))  # fmt: skip
    rows.append(Row.proportion("zero-shot", "seeds_missing_a_bug", missed_some, len(zero_bugs),
                               split="eval"))  # fmt: skip
    for system in LM_TARGET_AUDITORS:
        found = values[f"{system}@lm-target"]["bugs_found"]
        rows.append(Row.proportion(f"{system}@lm-target", "seeds_finding_a_bug",
                                   sum(1 for v in found.values() if v > 0), len(found),
                                   split="eval"))  # fmt: skip
    premises = [
        Claim.compare(
            "premise_zero_shot_finds_bugs",
            "premise: on most seeds the zero-shot auditor finds at least one of the 8 planted bugs "
            "(share of seeds > 0.5)",
            rows, key("zero-shot", "seeds_finding_a_bug"), "gt", 0.5,
        ),
        Claim.compare(
            "premise_zero_shot_headroom",
            "premise: on most seeds the zero-shot auditor misses at least one planted bug "
            "(share of seeds > 0.5)",
            rows, key("zero-shot", "seeds_missing_a_bug"), "gt", 0.5,
        ),
    ]  # fmt: skip
    claims = [
        *premises,
        Claim.compare(
            "trained_beats_zero_shot",
            "the GRPO-trained auditor finds more distinct violations per episode than the same "
            "model zero-shot",
            rows, key("grpo", vpe), "gt", key("zero-shot", vpe), requires=premises,
        ),
        Claim.compare(
            "dpo_beats_zero_shot",
            "the DPO-trained auditor finds more distinct violations per episode than zero-shot",
            rows, key("dpo", vpe), "gt", key("zero-shot", vpe), requires=premises,
        ),
        Claim.compare(
            "gflownet_beats_zero_shot",
            "the GFlowNet-trained auditor finds more distinct violations per episode than "
            "zero-shot",
            rows, key("gflownet", vpe), "gt", key("zero-shot", vpe), requires=premises,
        ),
        Claim.compare(
            "trained_beats_scripted",
            f"the GRPO-trained auditor finds more distinct violations per episode than the best "
            f"scripted strategy ({best_scripted}, chosen on a validation database)",
            rows, key("grpo", vpe), "gt", key(f"scripted:{best_scripted}", vpe),
            requires=premises,
        ),
        Claim.compare(
            "gflownet_most_diverse",
            "the GFlowNet auditor violates more distinct rules than the GRPO auditor",
            rows, key("gflownet", "distinct_rules"), "gt", key("grpo", "distinct_rules"),
            requires=premises,
        ),
        Claim.compare(
            "trained_broader_than_zero_shot",
            "the GRPO-trained auditor finds more distinct planted bugs (of the 8) than the same "
            "model zero-shot (the paper's 'broader'; per seed, paired)",
            rows, key("grpo", "distinct_bugs"), "gt", key("zero-shot", "distinct_bugs"),
            requires=premises,
        ),
        Claim.compare(
            "gflownet_more_diverse_than_dpo",
            "the GFlowNet auditor violates more distinct rules than the DPO auditor",
            rows, key("gflownet", "distinct_rules"), "gt", key("dpo", "distinct_rules"),
            requires=premises,
        ),
        *lm_target_claims(rows, params, target_params),
        Claim.compare(
            "no_false_violations",
            "checker precision 1.0: no violation that no planted bug explains, over every "
            "evaluation episode (buggy and bug-free rule agents)",
            rows, key("checkers", "false_violations"), "le", 0.0, exact=True,
        ),
    ]  # fmt: skip
    ledger.write(run.out / "cost_card.json")
    figure = bar_chart(rows, vpe, run.out / "violations_per_episode.png", split="eval")
    config: dict[str, Any] = {
        **proto,
        "auditor_parameters": params,
        "lm_target": {
            "parameters": target_params,
            "steps": proto["target_steps"],
            "auditors": list(LM_TARGET_AUDITORS),
            "bug_rates": {k: list(v) for k, v in rates.items()},
            "seconds": round(lm_seconds, 2),
            "cost_card": target_ledger.to_json(),
        },
        "best_scripted_on_validation": best_scripted,
        "validation_db_seed": VALIDATION_DB_SEED,
        "plausibility": run.args.plausibility,
        "auditor_corpus": run.args.corpus,
        "trainer": {
            o: ("trl" if o in TRL_OBJECTIVES and run.args.trainer == "trl" else "own")
            for o in OBJECTIVES
        },
        "train_config": dataclasses.asdict(TrainConfig()),
        "training_seconds_per_objective": {
            k: [round(x, 2) for x in v] for k, v in trained_seconds.items()
        },
        "cost_card": ledger.to_json(),
        "threads": int(os.environ.get("OMP_NUM_THREADS", "1") or 1),
    }
    intro = (
        f"PROBE on the toy world: a {params // 1000}k-parameter word-level tiny-Llama auditor "
        f"(pre-trained {proto['pretrain_steps']} steps on a user-simulator corpus of realistic "
        + {
            "strategy-families": "user turns in which no phrase sets off a planted bug, with "
            "generic persuasion strategies as paraphrase families whose trigger members are "
            "dropped) plays",
            "trigger-free": "user turns in which no phrase sets off a planted bug) plays",
        }.get(run.args.corpus, "user turns that hold the planted triggers word for word) plays")
        + " the user against rule agents of a retail and an airline domain with "
        "8 planted policy bugs. Zero-shot, GRPO, DPO and GFlowNet (trajectory balance) auditors, "
        f"the five scripted strategies and random templates play {per_domain} held-out scenarios "
        f"per domain and database ({len(eval_seeds)} databases), seeds "
        f"{', '.join(map(str, seeds))}; {proto['train_steps']} training steps of "
        f"{proto['scenarios_per_step']} scenarios x {proto['group_size']} episodes per domain. "
        + (
            "GRPO and DPO train through trl's GRPOTrainer (multi-turn rollout_func, the target's "
            "replies masked by env_mask) and DPOTrainer (episode pairs, the same mask); the "
            "GFlowNet with the package's trajectory-balance loss. "
            if run.args.trainer == "trl"
            else "All three objectives use the package's own losses. "
        )
        + f"The zero-shot and GRPO auditors also play the same scenarios against a tiny-LM target "
        f"({target_params:,} parameters, {proto['target_steps']} training steps on the planted "
        "rule agents' dialogues, delexicalised: the model picks the action, a wrapper copies the "
        "ids and does the cap arithmetic), whose bug rate on the triggering requests is "
        "measured first. "
        + "Claims are paired over seeds; the method claims rest on the two premise claims. "
        "Toy scale, shared 2-core CPU."
    )
    if not all(p.held for p in premises):
        intro += (
            " PREMISE NOT HELD: the zero-shot auditor did not find some-but-not-all planted bugs "
            "on every seed here, so the claims that rest on it are inconclusive; the rows are "
            "reported as measured."
        )
    return Report(rows, claims, intro=intro, figures=[figure], config=config)


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--repeats",
        type=positive_int,
        default=6,
        help="interleaved timed repeats (>= 6; default 6)",
    )
    p.add_argument(
        "--pretrain-steps",
        type=positive_int,
        default=FULL["pretrain_steps"],
        help="pre-training steps of the auditor that is timed (default 1500; cached)",
    )


@cli.bench(arguments=_bench_arguments, devices=("cpu",))
def bench(run: Run) -> Report:
    """The rule game with and without the judge, the PROBE step over a plain GRPO step, and
    GRPO/DPO through trl over the package's own losses (paperstack.bench: interleaved, medians
    of per-repeat ratios, outputs checked in the same run)."""
    from probe_audit.bench import MIN_REPEATS, measure

    repeats = MIN_REPEATS if run.quick else run.args.repeats
    trl_steps = 1 if run.quick else 3
    rows, claims, config = measure(
        run, repeats=repeats, pretrain_steps=run.args.pretrain_steps, trl_steps=trl_steps
    )
    by = {(r.system, r.metric): r for r in rows}

    def val(system: str, metric: str) -> str:
        r = by[(system, metric)]
        assert r.ci95 is not None
        return f"{r.value:.2f}x [{r.ci95[0]:.2f}, {r.ci95[1]:.2f}]"

    summary = (
        f"{by[('rule-game', 'episodes_per_second')].value:.0f} rule-game episodes/s; a PROBE "
        f"step takes {val('probe-step', 'time_ratio_to_plain_grpo')} a plain GRPO step on the "
        f"same rollouts; {trl_steps} steps through trl's GRPOTrainer take "
        f"{val('trl-grpo', 'time_ratio_to_own_loss')} and through DPOTrainer "
        f"{val('trl-dpo', 'time_ratio_to_own_loss')} the package's own losses (trainer "
        f"construction included; medians of {repeats}); "
        + ", ".join(f"{c.id}: {c.verdict}" for c in claims)
    )
    intro = (
        f"paperstack.bench: one warm-up round, then {repeats} interleaved repeats of each "
        f"comparison (shuffled order, {config['threads']} torch thread); each speed row is the "
        "median of per-repeat ratios with its order-statistic 95% interval. Compared, each "
        "with an output check in the same run: the rule game alone vs followed by the judge "
        f"({config['episodes']} episodes; the episodes must be unchanged), a plain GRPO step vs "
        "a PROBE step (the same episodes and violations), and GRPO/DPO through trl vs the "
        f"package's own losses ({trl_steps} step(s); the same optimizer steps and episodes). "
        "Timings from a shared, loaded 2-core CPU (other jobs ran beside it): read the "
        "ratios, not the absolute rates."
    )
    return Report(rows, claims, intro=intro, summary=summary, config=config)


#: ``probe audit``'s flags: (flag, type, default, help); a ``None`` default marks a required
#: flag. ``--seed`` is a bare int so that the contract bounds it (``seed_int``).
AUDIT_FLAGS: tuple[tuple[str, Any, Any, str], ...] = (
    ("--target-base-url", str, None,
     "the served agent's OpenAI-compatible URL (http://127.0.0.1:8000/v1)"),
    ("--target-model", str, None, "the model name the server serves"),
    ("--domain", str, None,
     "a domain folder (policy.md, db.json, tools.json[, domain.json]) or a built-in one: "
     "retail, airline"),
    ("--out", "path", None, "directory for report.md, audit.json, episodes.jsonl, "
     "cost_card.json"),
    ("--auditors", str, "scripted", "comma list: scripted (the five strategies), a strategy "
     "name, random, zero-shot (the toy auditor model); default: scripted"),
    ("--episodes", positive_int, 4, "scenarios per auditor (default 4)"),
    ("--max-turns", positive_int, 3, "user turns per episode (default 3)"),
    ("--max-tool-calls", non_negative_int, 4,
     "tool calls the target may make per user turn (default 4)"),
    ("--tool-calls", ("auto", "native", "text"), "auto",
     "auto (default): tools=[...] plus the text format, native calls preferred, text calls "
     "read and counted as the fallback; native: tools API only; text: no tools=[...]"),
    ("--max-tokens", positive_int, 128, "most tokens per target answer (default 128)"),
    ("--timeout", positive_float, 120.0, "seconds per request (default 120)"),
    ("--concurrency", positive_int, 4, "requests in flight (default 4)"),
    ("--api-key-env", str, "OPENAI_API_KEY",
     "environment variable holding the API key, if the server needs one"),
    ("--seed", int, 0, "scenario and auditor seed (default 0)"),
    ("--pretrain-steps", positive_int, FULL["pretrain_steps"],
     "pre-training steps of the zero-shot auditor (cached; default 300)"),
)  # fmt: skip


def _audit_arguments(p: argparse.ArgumentParser) -> None:
    from pathlib import Path

    for flag, kind, default, text in AUDIT_FLAGS:
        options: dict[str, Any] = {"help": text}
        if isinstance(kind, tuple):
            options["choices"] = kind
        else:
            options["type"] = Path if kind == "path" else kind
        if default is None:
            options["required"] = True
        else:
            options["default"] = default
        p.add_argument(flag, **options)
    p.add_argument("--no-progress", action="store_true", help="no progress lines")


@cli.command("audit", "audit a served agent through the OpenAI tools API", _audit_arguments)
def audit_command(args: argparse.Namespace) -> int:
    """Preflight (URL, server, model) before anything is created, then every auditor's
    episodes into the ledger, the checkers' findings and the cost card into ``--out``."""
    import sys

    from paperstack.llm import OpenAIChat
    from paperstack.progress import quiet_libraries
    from probe_audit.domains.folder import resolve
    from probe_audit.openai_target import ToolsTarget, check_server
    from probe_audit.served import make_auditors, run_audit, write_audit_report

    quiet_libraries()
    loaded = resolve(args.domain)  # a bad folder is one line before any request
    if args.out.exists() and not args.out.is_dir():
        raise ProbeError(f"--out {args.out}: exists and is not a directory")
    check_server(args.target_base_url, args.target_model, timeout=min(args.timeout, 15.0))
    auditors = make_auditors(args.auditors, args.seed, pretrain_steps=args.pretrain_steps)
    chat = OpenAIChat(args.target_base_url, args.target_model, timeout=args.timeout,
                      concurrency=args.concurrency, api_key_env=args.api_key_env)  # fmt: skip
    target = ToolsTarget(chat, loaded.domain, loaded.schemas(), mode=args.tool_calls,
                         max_new_tokens=args.max_tokens)  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    say = None if args.no_progress else (lambda m: print(f"probe: {m}", file=sys.stderr))
    started = time.perf_counter()
    try:
        results = run_audit(target, loaded, auditors, episodes=args.episodes, seed=args.seed,
                            max_turns=args.max_turns, max_tool_calls=args.max_tool_calls,
                            ledger_path=args.out / "episodes.jsonl", progress=say)  # fmt: skip
    finally:
        chat.ledger.write(args.out / "cost_card.json")
        chat.close()
    config = {k: (str(v) if k == "out" else v) for k, v in vars(args).items()
              if k not in ("command", "no_progress", "target_base_url")}  # fmt: skip
    data = write_audit_report(args.out, results, target=target, loaded=loaded,
                              shown_url=chat.shown_url, config=config,
                              seconds=time.perf_counter() - started)  # fmt: skip
    stats = data["tool_calls"]
    found = sum(len(r.violations) for r in results)
    print(
        f"probe: {found} violation(s) in {sum(r.episodes for r in results)} episodes; tool "
        f"calls: {stats['native_calls']} native, {stats['text_calls']} text (fallback)"
        + (", tools API refused by the server" if stats["tools_refused"] else "")
        + f"; wrote {args.out / 'report.md'}"
    )
    return 0


main = cli.main


if __name__ == "__main__":
    raise SystemExit(main())

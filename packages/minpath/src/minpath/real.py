"""``minpath demo --real``: the real-model arm (issue #51 item 3), SmolLM2-135M-Instruct.

The toy demo fine-tunes a 1.3M-parameter character model; this arm asks whether MinPath's
traces teach a *pre-trained* LM to answer with fewer tokens at nearly the same accuracy. The
task is the toy world's multi-step arithmetic (``Arithmetic(2, 3)``, single digits, e.g.
``9-2*3=``) with its verbose CoTs, a task SmolLM2 cannot do zero-shot but can be taught: its
digits are single tokens and a raw verbose trace is about 78 of its tokens.

The protocol, fixed before any run (``preregistration.toml``, ``["demo --real"]``):

1. **Base accuracy, measured first.** SmolLM2 answers the held-out problems greedily with no
   fine-tuning (row ``base``, one measurement). On the validation split (evaluation seed 1001,
   never reported) it solved 0 of 16 (it describes the expression, or rambles about
   "mathematical identities"), so anything the fine-tuned models solve is learnt here.
2. **Training sets**, per seed, exactly the toy demo's: ``train`` verbose CoTs, MinPath's
   compression (rule typer, derivability checked by the task's step verifier), and each
   token-budget baseline at MinPath's ratio per CoT (characters, as in the toy).
3. **The best baseline is chosen on the validation seed** (``validation_seed``, its own
   evaluation problems; not reported): truncation, random step drop and TokenSkip are trained,
   length-budget decodes the raw-trace model within the matched budget (in SmolLM2 tokens), and
   the most accurate of the four is the ``best-baseline`` of every reported seed.
4. **Reported seeds**: raw traces, MinPath traces and the chosen baseline, each a LoRA adapter
   (peft, rank ``lora_r`` on every linear layer) trained by trl SFT with the same steps, batch
   and learning rate (one setting for every system, not tuned: the same care for each), merged
   and evaluated greedily on the same ``test`` problems; accuracy by the task's verifier,
   generated tokens counted in SmolLM2's tokens.
5. **Claims** as in the toy, gated on the premise that the raw-trace model solves the task.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from minpath.baselines import budget_for
from minpath.demo import BASELINES, EVAL_SEED, TRAINED, _scores, compress_traces, training_sets
from minpath.errors import MinPathError
from minpath.finetune import SFTSettings, generate, sft
from minpath.traces import verbose_traces
from paperstack.contract import Report, Run
from paperstack.records import Claim, Row
from paperstack.tasks import Arithmetic

__all__ = ["REAL", "REAL_QUICK", "RealSettings", "real_claims", "run_real"]

#: The raw-trace model must solve more than this share for the method claims to count.
REAL_PREMISE = 0.5


@dataclass(frozen=True)
class RealSettings:
    """Everything that defines a ``demo --real`` run (recorded in the manifest)."""

    model: str = "smollm2-135m-instruct"
    min_ops: int = 2
    max_ops: int = 3
    train: int = 600
    test: int = 150
    steps: int = 200
    batch_size: int = 8
    learning_rate: float = 5e-4
    lora_r: int = 16
    lora_alpha: int = 32
    lora_targets: str = "all-linear"
    #: longest raw verbose trace of 40 validation-seed CoTs: 124 SmolLM2 tokens
    max_new_tokens: int = 192
    seeds: tuple[int, ...] = (0, 1, 2)
    validation_seed: int = 99
    validation_eval_seed: int = 1001
    validation_test: int = 100

    @property
    def task(self) -> Arithmetic:
        return Arithmetic(min_ops=self.min_ops, max_ops=self.max_ops)


REAL = RealSettings()
#: ``--real --quick``: every part on a tiny budget (measures nothing).
REAL_QUICK = RealSettings(train=8, test=4, steps=2, batch_size=4, lora_r=4, lora_alpha=8,
                          max_new_tokens=24, seeds=(0,), validation_test=4)  # fmt: skip


def real_claims(rows: list[Row]) -> list[Claim]:
    """The claims of ``demo --real`` (declared in ``preregistration.toml``)."""
    premise = Claim.compare(
        "real_premise_raw_model_solves_task",
        f"premise: SmolLM2 fine-tuned (LoRA) on raw verbose traces solves more than "
        f"{REAL_PREMISE:.0%} of the held-out problems (its base solves 0 of 16 on validation)",
        rows, lhs=("raw", "accuracy", "seeds"), op="gt", rhs=REAL_PREMISE,
    )  # fmt: skip
    gate = [premise]
    return [
        premise,
        Claim.compare(
            "real_minpath_cuts_30pct",
            "SmolLM2 fine-tuned on MinPath traces generates at least 30% fewer tokens than on "
            "raw traces",
            rows,
            lhs=("minpath", "gen_token_ratio", "seeds"),
            op="lt",
            rhs=0.7,
            requires=gate,
        ),
        Claim.compare(
            "real_minpath_keeps_accuracy",
            "SmolLM2 fine-tuned on MinPath traces is at most 2 points less accurate than on raw "
            "traces",
            rows,
            lhs=("minpath", "accuracy", "seeds"),
            op="ge",
            rhs=("raw", "accuracy", "seeds"),
            margin=-0.02,
            requires=gate,
        ),
        Claim.compare(
            "real_minpath_beats_best_baseline",
            "at the matched token ratio, SmolLM2 fine-tuned on MinPath traces is more accurate "
            "than with the best baseline (chosen on the validation seed)",
            rows,
            lhs=("minpath", "accuracy", "seeds"),
            op="gt",
            rhs=("best-baseline", "accuracy", "seeds"),
            requires=gate,
        ),
    ]


def _lora(settings: RealSettings) -> Any:
    try:
        from peft import LoraConfig
    except ImportError:
        raise MinPathError("demo --real needs peft: pip install 'minpath[peft]'") from None
    targets = settings.lora_targets
    modules = targets if targets == "all-linear" else targets.split(",")
    return LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha, lora_dropout=0.0,
                      task_type="CAUSAL_LM", target_modules=modules)  # fmt: skip


class _Arm:
    """One loaded base model name and the shared settings; trains and evaluates systems."""

    def __init__(self, name: str, settings: RealSettings, device: str, log: Any) -> None:
        self.name, self.settings, self.device, self.log = name, settings, device, log

    def load(self) -> tuple[Any, Any]:
        from paperstack import tiny

        model, tok = tiny.load(self.name)
        model.to(self.device)  # type: ignore[arg-type]
        return model, tok

    def count(self, tok: Any) -> Any:
        return lambda s: len(tok(s, add_special_tokens=False)["input_ids"])

    def train(self, pairs: list[tuple[str, str]], seed: int) -> tuple[Any, Any, Any]:
        s = self.settings
        model, tok = self.load()
        settings = SFTSettings(steps=s.steps, batch_size=s.batch_size,
                               learning_rate=s.learning_rate, seed=seed,
                               device="cpu" if self.device == "cpu" else self.device,
                               logging_steps=max(1, min(10, s.steps)))  # fmt: skip
        result = sft(model, tok, pairs, settings, peft_config=_lora(s))
        trained = result.extra["trainer"].model.merge_and_unload()
        trained.eval()
        return trained, tok, result

    def evaluate(
        self, model: Any, tok: Any, test: list[Any], budgets: list[int] | None = None,
        train_seconds: float = 0.0, losses: list[float] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        prompts = [t.question for t in test]
        if budgets is None:
            gens, sec = generate(model, tok, prompts, max_new_tokens=self.settings.max_new_tokens)
        else:
            gens, sec = generate(model, tok, prompts, budgets=budgets)
        return _scores(self.settings.task, test, gens, sec, train_seconds, losses or [])

    def seed(self, seed: int, eval_seed: int, n_test: int, systems: tuple[str, ...]
             ) -> dict[str, Any]:  # fmt: skip
        """Train and evaluate ``systems`` (``length-budget`` decodes the raw model) on one seed."""
        s = self.settings
        task = s.task
        traces = verbose_traces(s.train, seed=seed, split="train", task=task)
        comp = compress_traces(traces, task)
        sets, ratio = training_sets(comp, seed)
        test = verbose_traces(n_test, seed=eval_seed, split="test", task=task)
        out: dict[str, Any] = {"ratio": ratio, "fallbacks": comp.fallbacks, "n_train": len(traces),
                               "systems": {}, "train_ratio": {}}  # fmt: skip
        decoded = "length-budget" in systems  # decodes the raw model
        train_names = [n for n in TRAINED if n in systems or (n == "raw" and decoded)]
        for name in train_names:
            model, tok, result = self.train(
                [(t.question, c) for t, c in zip(traces, sets[name], strict=True)], seed
            )
            count = self.count(tok)
            out["train_ratio"][name] = (sum(map(count, sets[name]))
                                        / sum(map(count, sets["raw"])))  # fmt: skip
            if name in systems:
                out["systems"][name] = self.evaluate(model, tok, test, None, result.seconds,
                                                     result.losses)  # fmt: skip
                self._log(seed, name, out["systems"][name])
            if name == "raw" and "length-budget" in systems:
                budgets = [budget_for(t.cot, ratio, count) for t in test]
                out["systems"]["length-budget"] = self.evaluate(model, tok, test, budgets)
                self._log(seed, "length-budget", out["systems"]["length-budget"])
            del model
        return out

    def _log(self, seed: int, name: str, s: dict[str, Any]) -> None:
        self.log(f"real seed {seed} {name}: accuracy {s['accuracy']:.3f}, {s['tokens']:.1f} "
                 f"tokens, {s['train_seconds']:.0f} s training, {s['gen_seconds']:.0f} s "
                 "generation")  # fmt: skip


def run_real(run: Run) -> Report:
    """Base accuracy, the validation seed's choice of baseline, then the reported seeds."""
    import torch

    settings = REAL_QUICK if run.quick else REAL
    if run.args.seeds is not None or run.args.seed != 0:  # else the declared seeds
        settings = replace(settings, seeds=tuple(run.seeds))
    if run.args.steps is not None:
        settings = replace(settings, steps=run.args.steps)
    if run.args.train is not None:
        settings = replace(settings, train=run.args.train)
    if run.args.test is not None:
        settings = replace(settings, test=run.args.test)
    threads = os.environ.get("OMP_NUM_THREADS", "")
    torch.set_num_threads(int(threads) if threads.isdigit() and int(threads) > 0 else 1)
    name = run.model or settings.model
    arm = _Arm(name, settings, run.device, run.log)
    timing: dict[str, float] = {}
    task = settings.task

    def part(key: str, compute: Any) -> Any:
        """``compute()`` kept as a resumable part (a killed run resumes after the parts it
        finished; processes with disjoint --seeds share --parts); its seconds are the part's
        own, also when an earlier process computed it."""
        t0 = time.perf_counter()
        value = run.resumable(key, compute)
        done = [p for p in (run.parts.resumed if run.parts else []) if p["key"] == key]
        timing[key] = float(done[0]["seconds"]) if done else time.perf_counter() - t0
        return value

    test = verbose_traces(settings.test, seed=EVAL_SEED, split="test", task=task)

    def base_accuracy() -> dict[str, Any]:
        model, tok = arm.load()
        return arm.evaluate(model, tok, test)

    base = part("base", base_accuracy)
    run.log(f"base {name}: accuracy {base['accuracy']:.3f} on {len(test)} held-out problems")

    validation = part(
        f"validation-{settings.validation_seed}",
        lambda: arm.seed(settings.validation_seed, settings.validation_eval_seed,
                         settings.validation_test, ("raw", *BASELINES)),
    )  # fmt: skip
    best = max(BASELINES, key=lambda b: validation["systems"][b]["accuracy"])
    run.log(f"validation seed {settings.validation_seed}: best baseline {best} ("
            + ", ".join(f"{b} {validation['systems'][b]['accuracy']:.3f}" for b in BASELINES)
            + ")")  # fmt: skip

    per_seed = {
        seed: part(f"seed-{seed}-{best}",
                   lambda seed=seed: arm.seed(seed, EVAL_SEED, settings.test,
                                              ("raw", "minpath", best)))
        for seed in settings.seeds
    }  # fmt: skip
    rows = real_rows(per_seed, best, round(base["accuracy"] * len(test)), len(test))
    claims = real_claims(rows)
    intro = (
        ("**--quick smoke run: a few steps on a few problems; nothing is measured here.** "
         if run.quick else "")
        + f"SmolLM2-135M-Instruct (`{name}`) fine-tuned by LoRA (rank {settings.lora_r}, "
        f"alpha {settings.lora_alpha}, {settings.lora_targets}; trl SFT, {settings.steps} steps "
        f"of {settings.batch_size} at lr {settings.learning_rate:g}, the same for every system, "
        f"not tuned) on {settings.train} verbose CoTs of the toy world's arithmetic per seed "
        f"({', '.join(map(str, settings.seeds))}): raw traces, MinPath traces, and the best "
        f"baseline at MinPath's ratio, chosen on validation seed {settings.validation_seed} "
        f"(not reported): **{best}** ("
        + ", ".join(f"{b} {validation['systems'][b]['accuracy']:.1%}" for b in BASELINES)
        + f"; raw {validation['systems']['raw']['accuracy']:.1%}). Base model without "
        f"fine-tuning: {base['accuracy']:.1%} of the {len(test)} held-out problems (row "
        f"`base`). Greedy, at most {settings.max_new_tokens} new tokens; tokens are SmolLM2's."
    )  # fmt: skip
    config = {
        "real": True,
        "seeds": list(settings.seeds),
        "real_settings": asdict(settings),
        "best_baseline": best,
        "validation": validation,
        "base": base,
        "timing_seconds": timing,
        "matched_ratio": {s: per_seed[s]["ratio"] for s in settings.seeds},
        "sample_outputs": {n: per_seed[settings.seeds[0]]["systems"][n]["sample"]
                           for n in per_seed[settings.seeds[0]]["systems"]},
    }  # fmt: skip
    return Report(rows, claims, title="minpath: demo --real (SmolLM2)"
                  + (" (--quick)" if run.quick else ""), intro=intro, config=config)  # fmt: skip


def real_rows(per_seed: dict[int, dict[str, Any]], best: str, base_right: int, n_test: int
              ) -> list[Row]:  # fmt: skip
    """Per-seed rows of raw, MinPath and the chosen baseline (as ``best-baseline``), and the
    base model's accuracy (one measurement)."""
    seeds = sorted(per_seed)
    rows = [Row.proportion("base", "accuracy", base_right, n_test, split="test")]
    k = sum(per_seed[s]["n_train"] - per_seed[s]["fallbacks"] for s in seeds)
    n = sum(per_seed[s]["n_train"] for s in seeds)
    rows.append(Row.proportion("minpath-graph", "compressed_share", k, n, split="traces"))
    for name, label in (("raw", "raw"), ("minpath", "minpath"), (best, "best-baseline")):
        sys = {s: per_seed[s]["systems"][name] for s in seeds}
        raw = {s: per_seed[s]["systems"]["raw"] for s in seeds}
        rows.append(Row.from_seeds(label, "accuracy", {s: v["accuracy"] for s, v in sys.items()},
                                   split="seeds"))  # fmt: skip
        rows.append(Row.from_seeds(label, "gen_tokens", {s: v["tokens"] for s, v in sys.items()},
                                   split="seeds", unit="tokens"))  # fmt: skip
        if label != "raw":
            rows.append(Row.from_seeds(label, "gen_token_ratio",
                                       {s: sys[s]["tokens"] / raw[s]["tokens"] for s in seeds},
                                       split="seeds"))  # fmt: skip
        if label != "raw" and name in per_seed[seeds[0]]["train_ratio"]:
            rows.append(Row.from_seeds(label, "train_token_ratio",
                                       {s: per_seed[s]["train_ratio"][name] for s in seeds},
                                       split="seeds"))  # fmt: skip
    return rows

"""The reproduction: does MOSA keep pass@k where GRPO collapses it, better than token-level KL?

One diverse SFT base (``paperstack.tiny.pretrained("tiny", ("countdown",))``: the core's
character-level model trained with ``Countdown(solution_choice="random")`` gold answers, so it
learned the whole solution set of each instance) is fine-tuned with GRPO on Countdown by five
trained systems that differ only in the regulariser: none, token-level k3 KL (trl's ``beta``),
and MOSA with the reverse ``KL(P̄ ‖ Q̄)`` and the forward ``KL(Q̄ ‖ P̄)``. Every system runs through
:class:`~mosa_rl.trainer.MOSATrainer` (``mosa_beta = 0`` is plain trl GRPO) with the same
rollouts, learning rate and seeds.

The design, fixed before any claim was computed:

1. **Premise first.** GRPO without KL must raise pass@1 and lower pass@64 against the base, over
   the seeds; both are claims of their own, before the method's. Without that collapse there is
   nothing for a regulariser to fix, and the report says so.
2. **Matched KL.** Token-KL's ``beta`` and MOSA's ``beta_M`` (per direction) are chosen on a
   validation seed and validation problems that are never reported as results: each method runs
   a small grid, and the value whose token ``KL(π ‖ π_base)`` on its own samples is closest (in
   log) to ``kl_fraction`` of the no-KL run's is taken. The regularisers are then compared at
   the same distance from the base, not at betas picked by their claims. The whole grid is in
   the results (split ``validation``).
3. **Paired over seeds.** Five RL seeds; every system is sampled ``eval_samples`` times on the
   same held-out problems. Rows carry per-seed values (claims are paired Student-t over seeds);
   the pass@k rows are repeated per problem (means over seeds) for a reader who wants to see
   which problems move.

Runs are independent, so they run in worker processes (one thread each); each finished run is
one line of ``runs.jsonl`` and a rerun of the same configuration resumes from it (a run that
was not finished is done again, a stale line from another configuration is dropped).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mosa_rl.errors import MosaError

__all__ = [
    "FULL",
    "QUICK",
    "REAL",
    "REAL_QUICK",
    "DemoConfig",
    "Job",
    "System",
    "build_claims",
    "choose_beta",
    "rows_for",
    "run_demo",
    "run_system",
]


@dataclass(frozen=True)
class System:
    """One trained system: trl's token-level ``beta``, MOSA's ``mosa_beta`` and direction."""

    name: str
    beta: float = 0.0
    mosa_beta: float = 0.0
    mosa_kl: str = "reverse"


@dataclass(frozen=True)
class DemoConfig:
    """Everything that shapes the demo's numbers (written into the manifest)."""

    preset: str = "tiny"
    #: SFT steps of the base (None: the core's Countdown recipe, 3000 steps, cached).
    sft_steps: int | None = None
    grpo_steps: int = 40
    prompts_per_step: int = 4
    num_generations: int = 8
    max_completion_length: int = 24
    #: Chosen on the validation seed (pilot, no-KL GRPO, 32 validation problems x 32 samples;
    #: base pass@1 0.547, pass@32 1.0): 1e-3 broke the model (pass@1 0.20); 3e-4 for 60 steps
    #: lowered pass@32 to 0.91 with pass@1 0.50; 1e-4 barely moved it (KL to base 0.013).
    #: No rate raised pass@1 on that seed; 3e-4 is the one that shows the collapse.
    learning_rate: float = 3e-4
    temperature: float = 1.0
    #: K ranks plus the tail: a 103-token character vocabulary, where the base's top-8 hold all
    #: but ~1e-3 of the mass (a real 150k vocabulary would take the paper's 16-64).
    mosa_top_k: int = 8
    eval_problems: int = 32
    eval_samples: int = 64
    ks: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    #: Grids for the matched-KL choice on the validation seed (geometric, wide on purpose: the
    #: profile KL is orders of magnitude smaller than the token KL, so beta_M must be large).
    token_kl_grid: tuple[float, ...] = (0.05, 0.3)
    mosa_grid: tuple[float, ...] = (30.0, 300.0, 3000.0)
    #: Target distance from the base: this fraction of the no-KL run's token KL to the base.
    kl_fraction: float = 0.5
    validation_seed: int = 100
    validation_problems: int = 16
    validation_samples: int = 16
    #: When set, these skip the validation grid for that method (e.g. from the command line).
    token_kl_beta: float | None = None
    mosa_beta: float | None = None
    mosa_forward_beta: float | None = None
    #: The real-model arm's knobs (``demo --real``); the toy demo leaves them off.
    #: A model preset, id or path as the base instead of the tiny SFT model.
    model: str | None = None
    #: Train a LoRA adapter (peft, all linear layers) instead of every weight; the adapter is
    #: merged before sampling, so evaluation runs on a plain model.
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    #: Run MOSA with the forward KL too (the toy demo does; the real arm keeps the issue's four
    #: systems: base, no-KL GRPO, token-KL, MOSA).
    forward: bool = True
    #: Prompt wording: ``"plain"`` is the task's own ``"Make 22 with 3 5 7."`` (what the tiny
    #: model was SFT'd on); ``"instruct"`` states the rules and the answer format for a chat
    #: model that has never seen the task.
    prompt_style: str = "plain"
    #: Countdown's numbers per problem (the core's default 3; 2 makes every target one
    #: operation away).
    n_numbers: int = 3
    #: bf16 mixed precision in trl (a GPU; the CPU runs stay fp32).
    bf16: bool = False
    #: Gate MOSA's claims on the two premise claims (``Claim(requires=...)``): verdict
    #: inconclusive unless both premises hold, with what they measured recorded anyway. The
    #: real arm is declared gated; the toy demo's committed claims predate gating.
    gated: bool = False


FULL = DemoConfig()
#: The one-minute smoke run: the micro preset SFT'd for a few dozen steps (trained in seconds
#: if not cached), two GRPO steps per system, one seed, few problems, fixed betas (no
#: validation grid). It exercises the whole pipeline; its numbers mean nothing.
QUICK = DemoConfig(
    preset="micro",
    sft_steps=30,
    grpo_steps=2,
    prompts_per_step=2,
    num_generations=4,
    max_completion_length=12,
    eval_problems=6,
    eval_samples=8,
    ks=(1, 2, 4, 8),
    token_kl_beta=0.04,
    mosa_beta=30.0,
    mosa_forward_beta=30.0,
)

#: ``demo --real``: SmolLM2-135M-Instruct on Countdown with LoRA, fixed before any run (see
#: ``preregistration.toml``, table ``["demo --real"]``). The four systems of issue #50 (no
#: forward MOSA); betas matched by KL on validation seed 100 over small grids, as in the toy
#: demo (token-KL 0.04 is trl's long-standing default, 0.2 five times it; MOSA's beta_M 3 and
#: 30 bracket the toy demo's choice, since a real vocabulary's profile KL is of another scale).
#: The budget is sized for a GPU or a free multi-core CPU: 30 GRPO steps of 4 prompts x 16
#: samples per run. The task was chosen on validation problems only
#: (``benchmarks/real_probe.py``, 16 problems x 32 samples, 2026-12-06): Countdown-3 and
#: Countdown-2 with the ``instruct`` prompt at temperature 1 gave the base 0/64 each; two-number
#: Countdown (every target one operation away) with the short ``oneop`` prompt, 24 new tokens,
#: pass@1 0.006 / pass@32 0.125 at temperature 1 and 0.014 / 0.25 at 0.7 (4 of 16 problems
#: solved), so temperature 0.7; at pass@1 ~0.014 a group of 8 has a correct sample 11% of the
#: time, of 16 20%, so 16 samples per prompt.
REAL = DemoConfig(
    preset="tiny",
    model="smollm2-135m-instruct",
    lora=True,
    lora_r=16,
    lora_alpha=32,
    forward=False,
    prompt_style="oneop",
    n_numbers=2,
    grpo_steps=30,
    prompts_per_step=4,
    num_generations=16,
    max_completion_length=24,
    learning_rate=1e-4,
    temperature=0.7,
    mosa_top_k=16,
    eval_problems=32,
    eval_samples=32,
    ks=(1, 2, 4, 8, 16, 32),
    token_kl_grid=(0.04, 0.2),
    mosa_grid=(3.0, 30.0),
    validation_problems=16,
    validation_samples=16,
    gated=True,
)

#: ``demo --real --quick``: the real arm's whole pipeline (SmolLM2, LoRA, instruct prompts,
#: merged adapters) on a budget of a few minutes on a CPU, fixed betas; its numbers mean nothing.
REAL_QUICK = dataclasses.replace(
    REAL,
    grpo_steps=2,
    prompts_per_step=2,
    num_generations=4,
    max_completion_length=16,
    eval_problems=4,
    eval_samples=4,
    ks=(1, 2, 4),
    token_kl_beta=0.04,
    mosa_beta=3.0,
)

EVAL_SEED = 1234  # the held-out problems: the same for every system and seed
VALIDATION_PROBLEM_SEED = 4321  # validation problems (training split), never reported as results

NOKL, TOKENKL, MOSA, MOSA_FORWARD = "grpo-nokl", "grpo-tokenkl", "mosa", "mosa-forward"


@dataclass(frozen=True)
class Job:
    """One unit of work: evaluate the base (``system`` None) or train one system and evaluate it,
    on the held-out problems (``stage="test"``) or the validation problems."""

    stage: str
    seed: int
    system: System | None = None

    @property
    def id(self) -> str:
        name = "base" if self.system is None else self.system.name
        return f"{self.stage}/{name}/{self.seed}"


# ----------------------------------------------------------------------------- one run


#: Prompt wordings of :func:`pose` ("plain" is the task's own).
PROMPT_STYLES = ("plain", "instruct", "oneop", "oneop-example", "oneop-choices")


def pose(examples: Sequence[Any], style: str) -> list[Any]:
    """The examples in the config's prompt wording (the verifier reads the last line either
    way, so the gold answers and the scoring do not change)."""
    from paperstack.tasks import Example

    if style == "plain":
        return list(examples)
    if style not in PROMPT_STYLES:
        raise MosaError(f"prompt_style={style!r}: must be one of {', '.join(PROMPT_STYLES)}")
    out = []
    for e in examples:
        numbers = " ".join(str(x) for x in e.meta["numbers"])
        target = e.meta["target"]
        if style == "instruct":
            text = (
                f"Use the numbers {numbers}, each exactly once, with + - * / and parentheses "
                f"to make {target}. Think briefly, then write only the expression on the "
                "last line, for example (1+2)*3."
            )
        elif style == "oneop":
            text = (
                f"Combine the numbers {numbers} with + - * / (each number used once) to get "
                f"{target}. Reply with only the expression and its value."
            )
        elif style == "oneop-choices":  # two numbers: the four candidate operations listed
            if len(e.meta["numbers"]) != 2:
                raise MosaError("prompt_style='oneop-choices' is for two-number problems")
            a, b = e.meta["numbers"]  # sorted, so b - a and b / a are the positive ones
            text = (
                f"Which of {b}+{a}, {b}-{a}, {b}*{a}, {b}/{a} equals {target}? Reply with only "
                "that expression and its value."
            )
        else:  # "oneop-example": the same with one worked example of the answer's shape
            text = (
                "Combine the numbers with + - * / (each number used once) to get the target. "
                "Reply with only the expression and its value.\n"
                "Numbers 2 6, target 12: 2*6=12\n"
                f"Numbers {numbers}, target {target}:"
            )
        out.append(Example(e.task, text, e.answer, e.meta))
    return out


def countdown(config: DemoConfig) -> Any:
    """The config's Countdown task (the verifier reads each problem's own numbers, so scoring
    does not depend on ``n_numbers``; generating problems does)."""
    from paperstack import tasks

    return tasks.get("countdown", n_numbers=config.n_numbers)


def base_model_path(config: DemoConfig, progress: bool) -> Path:
    """The SFT base in the core's cache (trained now if absent)."""
    from paperstack import tiny

    path = tiny.pretrained_path(config.preset, ("countdown",), config.sft_steps)
    if not path.exists():
        tiny.pretrained(config.preset, ("countdown",), config.sft_steps, progress=progress)
    return path


def load_base(base: str | Path) -> tuple[Any, Any]:
    """The base model and tokenizer; a bad local folder is one line naming the file.

    The tokenizer is made fit for trl's GRPO and batched sampling by the core's
    ``prepare_tokenizer``: a model without a pad token (Mistral, GPT-2) pads with EOS, and one
    without a chat template (a base model such as GPT-2) gets the core's fallback transcript
    template (``"User: ...\nAssistant:"``), since GRPO's prompts are conversations. Such a
    model then runs on past its answer; :func:`paperstack.llm.cut_fallback_turn` cuts a completion
    at the next ``"\nUser:"`` before it is scored.
    """
    from paperstack import tiny
    from paperstack.checkpoint import check_model_dir
    from paperstack.llm import LLMError, prepare_tokenizer

    if Path(base).expanduser().exists():
        check_model_dir(base)
    try:
        model, tokenizer = tiny.load(base)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MosaError(f"--model {base}: cannot load ({first})") from None
    try:
        prepare_tokenizer(
            tokenizer, need_chat_template=True, name=str(base), chat_template="fallback"
        )
    except LLMError as exc:
        raise MosaError(f"--model {base}: {exc}") from None
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def _grpo_args(config: DemoConfig, system: System, seed: int, out: str, device: str) -> Any:
    from mosa_rl.trainer import MOSAConfig

    return MOSAConfig(
        output_dir=out,
        per_device_train_batch_size=config.prompts_per_step * config.num_generations,
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length,
        temperature=config.temperature,
        top_k=0,
        learning_rate=config.learning_rate,
        lr_scheduler_type="constant",
        max_steps=config.grpo_steps,
        beta=system.beta,
        mosa_beta=system.mosa_beta,
        mosa_kl=system.mosa_kl,
        mosa_top_k=config.mosa_top_k,
        loss_type="dapo",
        seed=seed,
        data_seed=seed,
        bf16=config.bf16,
        activation_checkpointing=False,
        use_cpu=device == "cpu",
        report_to="none",
        logging_steps=max(1, config.grpo_steps // 12),
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def run_system(
    config: DemoConfig, system: System, seed: int, base: str | Path, device: str = "cpu"
) -> tuple[Any, Any, dict[str, Any]]:
    """Train one system from the base with one seed; returns (model, tokenizer, log).

    The prompts are fresh training-split Countdown instances, drawn by ``seed``."""
    from transformers.trainer_callback import PrinterCallback

    from mosa_rl.evaluation import cut_reward
    from mosa_rl.trainer import MOSATrainer

    model, tokenizer = load_base(base)
    model.to(device)
    task = countdown(config)
    n_prompts = config.grpo_steps * config.prompts_per_step
    train = pose(task.generate(n_prompts, seed=1000 + seed, split="train"), config.prompt_style)
    dataset = task.to_dataset(train, conversational=True)
    peft_config = None
    if config.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=config.lora_r, lora_alpha=config.lora_alpha, target_modules="all-linear",
            task_type="CAUSAL_LM", lora_dropout=0.0,
        )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="mosa-run-") as out:
        args = _grpo_args(config, system, seed, out, device)
        trainer = MOSATrainer(
            model,
            cut_reward(task.reward_function()),
            args,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=peft_config,
        )
        trainer.remove_callback(PrinterCallback)  # the demo has its own progress
        started, cpu = time.perf_counter(), time.process_time()
        trainer.train()
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    history = [h for h in trainer.state.log_history if "reward" in h]
    log = {"seconds": seconds, "cpu_seconds": cpu, "history": history}
    trained: Any = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(trained, "merge_and_unload"):  # LoRA: sample from a plain model
        trained = trained.merge_and_unload()
    trained.eval()
    return trained, tokenizer, log


def problems(config: DemoConfig, stage: str) -> list[Any]:
    """The problems a stage is scored on: held-out (test split) or validation (train split)."""

    task = countdown(config)
    if stage == "validation":
        n = config.validation_problems
        return pose(
            task.generate(n, seed=VALIDATION_PROBLEM_SEED, split="train"), config.prompt_style
        )
    return pose(
        task.generate(config.eval_problems, seed=EVAL_SEED, split="test"), config.prompt_style
    )


def _job(payload: dict[str, Any], job: Job) -> dict[str, Any]:
    """Run one job in a worker: train (unless base) and evaluate; return its log record."""
    from mosa_rl.evaluation import sample_and_score

    config: DemoConfig = payload["config"]
    device = payload["device"]
    examples = payload["examples"][job.stage]
    samples = config.validation_samples if job.stage == "validation" else config.eval_samples
    base, tokenizer = load_base(payload["base"])
    base.to(device)
    record: dict[str, Any] = {"job": job.id, "fingerprint": payload["fingerprint"]}
    if job.system is None:
        model = base
        reference = None
    else:
        model, tokenizer, log = run_system(config, job.system, job.seed, payload["base"], device)
        reference = base
        record["train_seconds"] = log["seconds"]
        record["train_cpu_seconds"] = log["cpu_seconds"]
        record["rewards"] = [float(h["reward"]) for h in log["history"]]
        record["mosa_kl_train"] = [float(h["mosa/kl"]) for h in log["history"] if "mosa/kl" in h]
    ev = sample_and_score(
        model,
        tokenizer,
        countdown(config),
        examples,
        n=samples,
        max_new_tokens=config.max_completion_length,
        temperature=config.temperature,
        seed=10_000 + job.seed,
        top_k=config.mosa_top_k,
        base=reference,
    )
    record.update(
        correct=[int(c) for c in ev.correct.sum(1)],
        samples=samples,
        distinct=[int(d) for d in ev.distinct],
        top1_mass=ev.top1,
        token_entropy=ev.entropy,
        kl_to_base=0.0 if ev.kl_to_base is None else ev.kl_to_base,
        profile=ev.profile,
    )
    return record


# ----------------------------------------------------------------------------- choosing betas


def choose_beta(grid_kl: dict[float, float], target: float) -> float:
    """The beta whose measured KL to the base is closest to ``target`` in log space.

    Closeness in log because KL spans orders of magnitude across a geometric grid; ties go to
    the smaller beta (the lighter regulariser)."""
    if not grid_kl:
        raise MosaError("validation grid: no runs to choose a beta from")
    floor = 1e-12
    return min(
        sorted(grid_kl),
        key=lambda b: abs(math.log(max(grid_kl[b], floor)) - math.log(max(target, floor))),
    )


def _grid_systems(config: DemoConfig) -> list[System]:
    out = []
    if config.token_kl_beta is None:
        out += [System(f"{TOKENKL}-{b:g}", beta=b) for b in config.token_kl_grid]
    if config.mosa_beta is None:
        out += [System(f"{MOSA}-{b:g}", mosa_beta=b) for b in config.mosa_grid]
    if config.forward and config.mosa_forward_beta is None:
        out += [
            System(f"{MOSA_FORWARD}-{b:g}", mosa_beta=b, mosa_kl="forward")
            for b in config.mosa_grid
        ]
    return out


def chosen_systems(
    config: DemoConfig, validation: dict[str, dict[str, Any]]
) -> tuple[list[System], dict[str, Any]]:
    """The five systems of the test stage, betas fixed or matched on the validation records."""
    choice: dict[str, Any] = {}
    betas: dict[str, float | None] = {
        TOKENKL: config.token_kl_beta,
        MOSA: config.mosa_beta,
        MOSA_FORWARD: config.mosa_forward_beta,
    }
    if not config.forward:
        del betas[MOSA_FORWARD]
    if any(b is None for b in betas.values()):
        nokl = validation[f"validation/{NOKL}/{config.validation_seed}"]["kl_to_base"]
        target = config.kl_fraction * nokl
        choice.update(nokl_kl=nokl, target_kl=target)
        grids = {TOKENKL: config.token_kl_grid, MOSA: config.mosa_grid,
                 MOSA_FORWARD: config.mosa_grid}  # fmt: skip
        for method, beta in betas.items():
            if beta is not None:
                continue
            measured = {
                b: validation[f"validation/{method}-{b:g}/{config.validation_seed}"]["kl_to_base"]
                for b in grids[method]
            }
            betas[method] = choose_beta(measured, target)
            choice[method] = {"grid_kl": {f"{b:g}": v for b, v in measured.items()},
                              "beta": betas[method]}  # fmt: skip
    systems = [
        System(NOKL),
        System(TOKENKL, beta=float(betas[TOKENKL] or 0.0)),
        System(MOSA, mosa_beta=float(betas[MOSA] or 0.0)),
    ]
    if config.forward:
        systems.append(
            System(MOSA_FORWARD, mosa_beta=float(betas[MOSA_FORWARD] or 0.0), mosa_kl="forward")
        )
    choice["betas"] = {s.name: (s.beta or s.mosa_beta) for s in systems[1:]}
    return systems, choice


# ----------------------------------------------------------------------------- rows and claims


def _metrics(record: dict[str, Any], ks: Sequence[int]) -> dict[str, float]:
    from mosa_rl.evaluation import pass_at_k

    n = int(record["samples"])
    correct = np.asarray(record["correct"])
    out = {f"pass@{k}": float(pass_at_k(n, correct, k).mean()) for k in ks if k <= n}
    out["distinct_correct"] = float(np.mean(record["distinct"]))
    out["top1_mass"] = float(record["top1_mass"])
    out["token_entropy"] = float(record["token_entropy"])
    out["kl_to_base"] = float(record["kl_to_base"])
    return out


def passk_curve(record: dict[str, Any]) -> np.ndarray:
    """pass@k for k = 1..n (mean over problems) of one record."""
    from mosa_rl.evaluation import pass_at_k

    n = int(record["samples"])
    correct = np.asarray(record["correct"])
    return np.array([pass_at_k(n, correct, k).mean() for k in range(1, n + 1)])


def rows_for(
    records: Sequence[dict[str, Any]], config: DemoConfig, split: str = "test"
) -> list[Any]:
    """Rows of the test stage: per-seed values of every metric (paired over seeds), per-problem
    pass@1 and pass@kmax (means over seeds, for pairing over problems), and training time."""
    from mosa_rl.evaluation import pass_at_k
    from paperstack.records import Row

    by_system: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_system.setdefault(r["system"], []).append(r)
    rows: list[Row] = []
    ks = [k for k in config.ks if k <= config.eval_samples]
    names = [f"pass@{k}" for k in ks] + [
        "distinct_correct",
        "top1_mass",
        "token_entropy",
        "kl_to_base",
    ]
    for system, runs in by_system.items():
        per_seed = {int(r["seed"]): _metrics(r, ks) for r in runs}
        for metric in names:
            rows.append(
                Row.from_seeds(
                    system, metric, {s: m[metric] for s, m in per_seed.items()}, split=split
                )
            )
        for k in (ks[0], ks[-1]):
            per_problem = np.mean(
                [pass_at_k(int(r["samples"]), np.asarray(r["correct"]), k) for r in runs], axis=0
            )
            rows.append(
                Row.from_items(
                    system,
                    f"pass@{k}",
                    {f"p{i}": float(v) for i, v in enumerate(per_problem)},
                    split=f"{split}-by-problem",
                )
            )
        if all("train_seconds" in r for r in runs):
            for metric in ("train_seconds", "train_cpu_seconds"):
                rows.append(
                    Row.from_seeds(
                        system,
                        metric,
                        {int(r["seed"]): float(r[metric]) for r in runs},
                        unit="s",
                    )
                )
    return rows


def validation_rows(records: Sequence[dict[str, Any]]) -> list[Any]:
    """The matched-KL grid as rows (one validation seed each: no intervals, no claims)."""
    from paperstack.records import Row

    rows = []
    for r in records:
        values = {
            "kl_to_base": float(r["kl_to_base"]),
            "pass@1": float(np.mean(r["correct"])) / int(r["samples"]),
        }
        for metric, value in values.items():
            rows.append(Row(system=r["system"], metric=metric, value=value, n=1,
                            split="validation"))  # fmt: skip
    return rows


def build_claims(rows: Sequence[Any], config: DemoConfig, split: str = "test") -> list[Any]:
    """The premise (two claims), then MOSA's claims, each against the control that isolates it."""
    from paperstack.records import Claim, Op

    kmax = max(k for k in config.ks if k <= config.eval_samples)
    passk = f"pass@{kmax}"

    def key(system: str, metric: str) -> tuple[str, str, str]:
        return (system, metric, split)

    spec: list[tuple[str, str, tuple[str, str, str], Op, tuple[str, str, str], float]] = [
        ("premise_grpo_raises_pass1",
         "premise: GRPO without KL raises pass@1 above the base's (RL works here)",
         key(NOKL, "pass@1"), "gt", key("base", "pass@1"), 0.0),
        ("premise_grpo_collapses_passk",
         f"premise: GRPO without KL lowers {passk} below the base's (the collapse MOSA targets)",
         key(NOKL, passk), "lt", key("base", passk), 0.0),
        ("mosa_passk_beats_tokenkl",
         f"MOSA (reverse KL) keeps a higher {passk} than token-level KL at matched KL to the base",
         key(MOSA, passk), "gt", key(TOKENKL, passk), 0.0),
        ("mosa_passk_beats_nokl",
         f"MOSA (reverse KL) keeps a higher {passk} than GRPO without KL",
         key(MOSA, passk), "gt", key(NOKL, passk), 0.0),
        ("mosa_pass1_not_worse",
         "MOSA's pass@1 is no more than 0.02 below token-level KL's",
         key(MOSA, "pass@1"), "ge", key(TOKENKL, "pass@1"), -0.02),
        ("mosa_more_distinct_solutions",
         "MOSA finds more distinct correct solutions per problem than token-level KL",
         key(MOSA, "distinct_correct"), "gt", key(TOKENKL, "distinct_correct"), 0.0),
        ("mosa_flatter_top1",
         "MOSA's mean top-1 probability is lower than token-level KL's (the profile is held)",
         key(MOSA, "top1_mass"), "lt", key(TOKENKL, "top1_mass"), 0.0),
        ("mosa_forward_passk_beats_tokenkl",
         f"MOSA with the forward KL(Q̄‖P̄) keeps a higher {passk} than token-level KL",
         key(MOSA_FORWARD, passk), "gt", key(TOKENKL, passk), 0.0),
    ]  # fmt: skip
    claims: list[Claim] = []
    for cid, statement, lhs, op, rhs, margin in spec:
        if not config.forward and lhs[0] == MOSA_FORWARD:
            continue
        premises = [c for c in claims if c.id.startswith("premise_")] if config.gated else []
        claims.append(Claim.compare(cid, statement, rows, lhs, op, rhs, margin, requires=premises))
    return claims


# ----------------------------------------------------------------------------- figures


def _figure(draw: Callable[[Any], None], path: Path) -> Path:
    import io

    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from paperstack.records import atomic_write

    fig, ax = plt.subplots(figsize=(5.4, 3.4), dpi=120)
    draw(ax)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return atomic_write(path, buf.getvalue())


def passk_figure(curves: dict[str, np.ndarray], path: Path) -> Path:
    """pass@k for k = 1..n per system (mean over seeds), log-k axis."""

    def draw(ax: Any) -> None:
        for name, curve in curves.items():
            ax.plot(np.arange(1, len(curve) + 1), curve, label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k")
        ax.set_ylabel("pass@k (held out, mean over seeds)")
        ax.legend(fontsize=7)

    return _figure(draw, path)


def profile_figure(profiles: dict[str, list[float]], path: Path) -> Path:
    """Mean order-statistic profile per system (log scale): where the mass sits by rank."""

    def draw(ax: Any) -> None:
        for name, prof in profiles.items():
            ranks = np.arange(1, len(prof) + 1)
            ax.semilogy(ranks, np.maximum(prof, 1e-8), marker="o", label=name)
        ax.set_xlabel("rank r (last = tail bucket)")
        ax.set_ylabel("mean P(r) on own samples")
        ax.legend(fontsize=7)

    return _figure(draw, path)


def reward_figure(curves: dict[str, list[list[float]]], path: Path) -> Path:
    """Training reward per logging step (mean over seeds) per trained system."""

    def draw(ax: Any) -> None:
        for name, runs in curves.items():
            length = min(len(r) for r in runs)
            if length:
                ax.plot(np.mean([r[:length] for r in runs], axis=0), label=name)
        ax.set_xlabel("logging step")
        ax.set_ylabel("mean reward (training)")
        ax.legend(fontsize=7)

    return _figure(draw, path)


# ----------------------------------------------------------------------------- input files


#: Numbers a dataset problem may have. Countdown's solver is an exhaustive pairwise search whose
#: cost grows roughly a hundredfold per number (measured: 0.5 s for five numbers on one core; six
#: were not tried), and it recurses once per number, so a line with thousands of numbers ended in
#: a RecursionError (issue #46). Two to five covers the three- and four-number instances RL
#: papers pose, this demo's three included.
DATASET_NUMBERS = (2, 5)
#: Largest magnitude of a number or target in a dataset line. Countdown's values are small
#: positive integers; anything beyond nine digits is a corrupt or adversarial file, and
#: refusing it at the input keeps huge integers out of the solver's exact arithmetic.
DATASET_MAX_VALUE = 10**9


def _dataset_integer(value: Any, field: str) -> int:
    """One number of a dataset line as an int, or a ValueError naming the field.

    JSON's ``Infinity``/``NaN`` and ``1e999`` arrive as non-finite floats (``int()`` of them
    raised OverflowError before); ``7.5`` was silently truncated to 7. Only integers, or
    floats that are exactly integers, of at most :data:`DATASET_MAX_VALUE` in magnitude pass.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{field}: {value!r} is not a number")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{field}: {value} is not a finite number")
        if not value.is_integer():
            raise ValueError(f"{field}: {value} is not an integer")
    if abs(value) > DATASET_MAX_VALUE:
        # json reads integers of up to 4300 digits; name the size, not the digits
        shown = f"{value:.3g}" if isinstance(value, float) else f"a {len(str(abs(value)))}-digit"
        raise ValueError(
            f"{field}: {shown} number is out of range (magnitude at most {DATASET_MAX_VALUE:.0e})"
        )
    return int(value)


def _parse_constant(name: str) -> float:
    """``json.loads`` hook: NaN and Infinity are not JSON numbers; name them instead."""
    raise ValueError(f"{name} is not a finite number")


def load_problems(path: Path) -> list[Any]:
    """Countdown problems from a JSONL file, one ``{"numbers": [...], "target": N}`` a line.

    Each line has :data:`DATASET_NUMBERS` numbers and a target, all integers of magnitude at
    most :data:`DATASET_MAX_VALUE`; anything else is one :class:`MosaError` naming the file,
    the line and the field.
    """
    from paperstack import tasks
    from paperstack.tasks import TaskError

    task = tasks.get("countdown")
    if path.is_dir():
        raise MosaError(f"--dataset {path}: is a directory; name a JSONL file")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise MosaError(f"--dataset {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise MosaError(f"--dataset {path}: cannot read ({exc})") from None
    low, high = DATASET_NUMBERS
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, parse_constant=_parse_constant)
            raw = obj["numbers"]
            if not isinstance(raw, list):
                raise TypeError(f"numbers: {raw!r} is not a list")
            if not low <= len(raw) <= high:
                raise ValueError(f"numbers: {len(raw)} numbers (a problem has {low} to {high})")
            numbers = [_dataset_integer(x, f"numbers[{j}]") for j, x in enumerate(raw)]
            target = _dataset_integer(obj["target"], "target")
        except RecursionError:  # json's parser recurses once per nesting level
            raise MosaError(f"--dataset {path}:{i}: nested too deeply to be a problem") from None
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise MosaError(
                f'--dataset {path}:{i}: expected {{"numbers": [...], "target": N}} ({exc})'
            ) from None
        try:
            out.append(task.make(numbers, target))  # type: ignore[attr-defined]
        except TaskError as exc:
            raise MosaError(f"--dataset {path}:{i}: {exc}") from None
    if not out:
        raise MosaError(f"--dataset {path}: no problems in the file")
    return out


# ----------------------------------------------------------------------------- running


def _cores() -> int:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def _worker_init() -> None:
    """One thread per worker: the workers already fill the cores, and more threads than free
    cores make OpenMP spin (the core's measurement: 3x slower)."""
    import warnings

    import torch

    from paperstack.progress import quiet_libraries

    torch.set_num_threads(1)
    quiet_libraries()
    import transformers

    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)


def _check_vocabulary(base: str | Path, k: int) -> None:
    """``--top-k`` against the base's vocabulary, before any worker starts."""
    from transformers import AutoConfig

    from mosa_rl.loss import check_top_k

    try:
        vocab = int(AutoConfig.from_pretrained(str(base)).get_text_config().vocab_size)
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MosaError(f"--model {base}: cannot read its config ({first})") from None
    try:
        check_top_k(k, vocab)
    except MosaError as exc:
        raise MosaError(f"--top-k: {exc}") from None


def _quiet_warnings() -> None:
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)


def fingerprint(payload: dict[str, Any]) -> str:
    """What a run's record depends on: config, base model, device and the problems."""
    text = json.dumps(
        {
            "config": dataclasses.asdict(payload["config"]),
            "base": str(payload["base"]),
            "device": payload["device"],
            "problems": {k: [e.prompt for e in v] for k, v in payload["examples"].items()},
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class RunLog:
    """``runs.jsonl``: one line per finished run; resumes cleanly.

    On open, lines of this configuration (same fingerprint) are kept, one per job (the last), and
    everything else (stale configurations, duplicates, a torn last line) is dropped by rewriting
    the file atomically; new runs are then appended. ``restart`` empties it instead.
    """

    def __init__(self, path: Path, print_fn: Callable[[str], None], restart: bool = False) -> None:
        from paperstack.records import ResultsFormatError, atomic_write, read_jsonl

        self.path = path
        self.done: dict[str, dict[str, Any]] = {}
        self._print = print_fn
        self._fingerprint = ""
        self._old: list[dict[str, Any]] = []
        if path.is_dir():
            raise MosaError(f"{path}: is a directory; the run log must be a file")
        if path.exists() and not restart:
            try:
                self._old = read_jsonl(path, allow_torn_tail=True)
            except ResultsFormatError as exc:
                raise MosaError(f"{exc} (pass --restart to start the log afresh)") from None
        self._atomic_write = atomic_write

    def open(self, fp: str, jobs: Sequence[Job]) -> None:
        from paperstack.records import JsonlWriter

        wanted = {j.id for j in jobs}
        kept = {
            r["job"]: r for r in self._old if r.get("fingerprint") == fp and r.get("job") in wanted
        }
        dropped = len(self._old) - len(kept)
        lines = "".join(json.dumps(r, allow_nan=False) + "\n" for r in kept.values())
        self._atomic_write(self.path, lines)
        if kept:
            self._print(f"resuming from {self.path}: {len(kept)} of {len(wanted)} runs done"
                        + (f", {dropped} stale line(s) dropped" if dropped else ""))  # fmt: skip
        self.done = kept
        self._writer = JsonlWriter(self.path)

    def write(self, record: dict[str, Any]) -> None:
        self.done[record["job"]] = record
        self._writer.write(record)

    def close(self) -> None:
        if hasattr(self, "_writer"):
            self._writer.close()


def _execute(
    jobs: Sequence[Job],
    payload: dict[str, Any],
    workers: int,
    log: RunLog,
    bar: Any,
) -> None:
    """Run the jobs not yet in the log, in ``workers`` processes, appending each as it ends."""
    todo = [j for j in jobs if j.id not in log.done]
    bar.advance(len(jobs) - len(todo))

    def finish(job: Job, record: dict[str, Any]) -> None:
        record["system"] = "base" if job.system is None else job.system.name
        record["seed"] = job.seed
        log.write(record)
        bar.advance(1, last=job.id)

    if not todo:
        return
    if workers <= 1 or len(todo) == 1:
        for job in todo:
            finish(job, _job(payload, job))
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        min(workers, len(todo)), mp_context=context, initializer=_worker_init
    ) as pool:
        futures = {pool.submit(_job, payload, job): job for job in todo}
        for future in as_completed(futures):
            finish(futures[future], future.result())


@dataclass
class DemoOutput:
    """What :func:`run_demo` hands the CLI: rows, claims, figures, the chosen betas, text."""

    rows: list[Any]
    claims: list[Any]
    figures: list[Path] = field(default_factory=list)
    choice: dict[str, Any] = field(default_factory=dict)
    intro: str = ""
    seconds: float = 0.0


def run_demo(
    config: DemoConfig,
    out: Path,
    seeds: Sequence[int],
    *,
    model: str | None = None,
    dataset: Path | None = None,
    device: str = "cpu",
    workers: int | None = None,
    progress: Callable[[int, str], Any] | None = None,
    log: Callable[[str], None] = print,
    restart: bool = False,
) -> DemoOutput:
    """The whole reproduction: validation grid (matched KL), then every system x seed on the
    held-out problems, rows, claims and figures into ``out``.

    ``model`` replaces the tiny base by a model id or path (it must take the chat template);
    ``dataset`` replaces the generated held-out problems by a JSONL file. ``progress(total,
    description)`` makes a progress context (``run.progress``); ``workers`` defaults to the cores
    this process may use.
    """
    from paperstack.progress import Progress

    if workers == 1:
        _worker_init()  # this process runs the jobs itself: one thread, quiet libraries
    else:
        _quiet_warnings()
    if len(set(seeds)) != len(seeds) or not seeds:
        raise MosaError(f"seeds {list(seeds)}: need distinct seeds")
    if config.validation_seed in seeds:
        raise MosaError(
            f"--seeds: {config.validation_seed} is the validation seed (betas are chosen on it); "
            "report other seeds"
        )
    examples = {
        "test": (
            pose(load_problems(dataset), config.prompt_style)
            if dataset is not None
            else problems(config, "test")
        ),
        "validation": problems(config, "validation"),
    }
    split = "test" if dataset is None else "dataset"
    started = time.perf_counter()
    if model is None and config.model is not None:
        from paperstack.contract import check_model

        model = check_model(config.model)  # a preset becomes its converted folder
    if model is not None:
        load_base(model)  # fails in one line before any work
    base: str | Path = model if model is not None else base_model_path(config, progress is not None)
    _check_vocabulary(base, config.mosa_top_k)
    payload: dict[str, Any] = {
        "config": config, "base": str(base), "device": device, "examples": examples
    }  # fmt: skip
    payload["fingerprint"] = fingerprint(payload)
    workers = max(1, workers if workers is not None else _cores())
    make_bar = progress or (lambda total, desc: Progress(total, desc, enabled=False))

    validation_jobs: list[Job] = []
    grid = _grid_systems(config)
    if grid:
        validation_jobs = [Job("validation", config.validation_seed, System(NOKL))] + [
            Job("validation", config.validation_seed, s) for s in grid
        ]
    test_jobs_for: Callable[[Sequence[System]], list[Job]] = lambda systems: [  # noqa: E731
        Job("test", s, system) for s in seeds for system in (None, *systems)
    ]
    # Job ids name systems, not betas: the test jobs are known before the grid is run.
    placeholder = [System(NOKL), System(TOKENKL), System(MOSA)]
    if config.forward:
        placeholder.append(System(MOSA_FORWARD))
    runlog = RunLog(out / "runs.jsonl", log, restart=restart)
    runlog.open(payload["fingerprint"], validation_jobs + test_jobs_for(placeholder))
    total = len(validation_jobs) + len(seeds) * (1 + len(placeholder))
    try:
        with make_bar(total, "mosa demo runs") as bar:
            _execute(validation_jobs, payload, workers, runlog, bar)
            systems, choice = chosen_systems(config, runlog.done)
            how = "matched KL on the validation seed" if "target_kl" in choice else "fixed"
            log(f"betas ({how}): " + ", ".join(f"{k} {v:g}" for k, v in choice["betas"].items()))
            _execute(test_jobs_for(systems), payload, workers, runlog, bar)
    finally:
        runlog.close()

    test_records = [r for r in runlog.done.values() if r["job"].startswith("test/")]
    val_records = [r for r in runlog.done.values() if r["job"].startswith("validation/")]
    rows = rows_for(test_records, config, split) + validation_rows(val_records)
    claims = build_claims(rows, config, split)

    order = ["base", NOKL, TOKENKL, MOSA] + ([MOSA_FORWARD] if config.forward else [])
    curves = {
        name: np.mean([passk_curve(r) for r in test_records if r["system"] == name], axis=0)
        for name in order
    }
    profiles = {
        name: np.mean([r["profile"] for r in test_records if r["system"] == name], axis=0).tolist()
        for name in order
    }
    rewards = {
        name: [r["rewards"] for r in test_records if r["system"] == name and r.get("rewards")]
        for name in order[1:]
    }
    from paperstack.records import atomic_write_json

    atomic_write_json(out / "profiles.json", profiles)
    figures = [
        passk_figure(curves, out / "pass_at_k.png"),
        profile_figure(profiles, out / "profile.png"),
    ]
    if any(rewards.values()):
        figures.append(reward_figure({k: v for k, v in rewards.items() if v}, out / "reward.png"))
    return DemoOutput(rows, claims, figures, choice, seconds=time.perf_counter() - started)

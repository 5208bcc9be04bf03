"""``mosa bench``: what MOSA costs over token-level KL GRPO, and what the profile costs vs K.

Both measurements are timed with :func:`paperstack.bench.compare_speed`: every system warmed
up, then ``repeats`` rounds calling each once in a shuffled order, and a ratio is the **median**
of the per-round ratios with its order-statistic 95% interval (the 0.2 bench ran the systems one
after another and averaged per-repeat ratios, which read "MOSA plus token-KL cheaper than MOSA
alone" and a 118.8x mean at K = 1 whose median was 1.2x). Threads are set and recorded.

1. **Training steps.** The same model, data and seed, one GRPO trainer per system: token-level
   KL (trl's ``beta``, which needs the reference model's per-token log-probs), MOSA
   (``mosa_beta``, which needs the reference's profile sums) and both. A timed call is
   ``trainer.train()`` for ``steps`` steps (each call continues from the trainer's weights, so
   every call does the same work); ``step_time_ratio`` is a system's time over token-KL's.
   Check: the systems optimise different losses, so what must agree for the ratio to compare
   equal work is the number of optimiser steps a call takes, and every logged loss must be
   finite (the difference in steps, ``inf`` on a non-finite loss: must be 0). Memory is the
   bytes of tensors autograd saves for the backward of one loss
   (``torch.autograd.graph.saved_tensors_hooks``; the median over every loss of the run): the
   activation memory the term adds, measurable on a CPU; on CUDA the peak allocated memory too.
2. **The profile term vs K.** Forward and backward over ``N`` tokens of the LM head computing
   the sampled tokens' log-probabilities (what token-level KL and the policy gradient need,
   the baseline) against the same head *plus* MOSA's profile sums
   (:func:`~mosa_rl.loss.profile_sums_from_hidden`, chunked and checkpointed), for ``K`` in
   1..64; ``head_time_ratio`` is the head with the profile over the head alone. Check: the
   log-probability part must be bit-identical to the baseline's, and the profile must equal
   its unfused definition (full softmax, sorted top-K, summed per sequence) on the same input
   within :data:`PROFILE_TOLERANCE`.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from mosa_rl.errors import MosaError

__all__ = [
    "BUDGET_S",
    "PROFILE_TOLERANCE",
    "head_systems",
    "profile_cost",
    "run_bench",
    "step_systems",
]


def _saved_bytes() -> tuple[Any, list[int]]:
    import torch

    total = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        total[0] += t.numel() * t.element_size()
        return t

    return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), total


#: Model shapes for the step benchmark. ``qwen2.5-0.5b`` is Qwen2.5-0.5B's architecture with
#: random weights (no download): its 151,936-token vocabulary is where the profile's top-K
#: over the full head costs what it costs on a real model. The tiny tokenizer still drives
#: it; sampled ids beyond its 103 characters decode to nothing, which is fine for timing.
SHAPES: dict[str, dict[str, Any]] = {
    "qwen2.5-0.5b": {
        "vocab_size": 151_936,
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": True,
    },
}


def _bench_model(shape: str, tokenizer: Any, seed: int) -> Any:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from paperstack import tiny

    if shape in tiny.PRESETS:
        return tiny.build_model(shape, tokenizer, seed)
    if shape not in SHAPES:
        known = ", ".join([*tiny.PRESETS, *SHAPES])
        raise MosaError(f"--shape {shape}: unknown; known: {known}")
    config = Qwen2Config(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **SHAPES[shape],
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model: Any = Qwen2ForCausalLM(config)
        model = model.to(torch.bfloat16)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def step_systems(
    steps: int, seed: int, device: str, quick: bool, shape: str | None = None
) -> dict[str, dict[str, Callable[[], Any]]]:
    """One GRPO trainer per system (``tokenkl``, ``mosa``, ``mosa+tokenkl``) on the same model,
    data and seed. Each entry: ``call`` (``steps`` training steps; returns the steps taken and
    whether every logged loss was finite), ``saved`` (median saved-activation bytes per loss so
    far) and ``peak`` (CUDA peak bytes so far). ``shape``: a tiny preset or a :data:`SHAPES`
    entry (default: micro with ``quick``, else tiny); the large shapes train in bf16 with the
    head in fp32."""
    import torch
    from transformers.trainer_callback import PrinterCallback

    from mosa_rl.trainer import MOSAConfig, MOSATrainer
    from paperstack import tasks, tiny

    preset = shape or ("micro" if quick else "tiny")
    large = preset in SHAPES
    tokenizer = tiny.build_tokenizer()
    task = tasks.get("countdown")
    tmp = tempfile.TemporaryDirectory(prefix="mosa-bench-")
    base = _bench_model(preset, tokenizer, seed)
    base.save_pretrained(tmp.name + "/base")
    tokenizer.save_pretrained(tmp.name + "/base")
    data = task.to_dataset(task.generate(8 * (steps + 1), seed=seed), conversational=True)
    cuda = device.startswith("cuda")

    def reward(completions: list[Any], **_: Any) -> list[float]:
        # A dense reward (shorter is better) so every step has a non-zero gradient.
        return [-float(len(str(c))) for c in completions]

    out: dict[str, dict[str, Callable[[], Any]]] = {}
    for name, beta, mosa_beta in (("tokenkl", 0.04, 0.0), ("mosa", 0.0, 1.0),
                                  ("mosa+tokenkl", 0.04, 1.0)):  # fmt: skip
        loaded: tuple[Any, Any] = tiny.load(tmp.name + "/base")
        model, tok = loaded
        model.to(device)
        args = MOSAConfig(
            output_dir=f"{tmp.name}/{name}",
            per_device_train_batch_size=64 if large else 32,
            num_generations=8,
            max_completion_length=128 if large else 16,
            max_steps=steps,
            learning_rate=1e-6 if large else 1e-4,
            beta=beta,
            mosa_beta=mosa_beta,
            mosa_top_k=32 if large else 8,
            seed=seed,
            bf16=large,
            cast_lm_head_to_fp32=large,
            activation_checkpointing=False,
            use_cpu=device == "cpu",
            report_to="none",
            logging_steps=1,
            save_strategy="no",
            disable_tqdm=True,
        )
        trainer = MOSATrainer(model, reward, args, train_dataset=data, processing_class=tok)
        trainer.remove_callback(PrinterCallback)
        out[name] = _timed_trainer(trainer, device, tmp)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    return out


def _timed_trainer(trainer: Any, device: str, tmp: Any) -> dict[str, Callable[[], Any]]:
    """The callables of :func:`step_systems` for one trainer (``tmp`` kept alive with them)."""
    import torch

    hook, saved = _saved_bytes()
    original = trainer._compute_loss
    per_loss: list[int] = []
    peaks: list[float] = []
    cuda = device.startswith("cuda")

    def measured(m: Any, inputs: Any) -> Any:
        saved[0] = 0
        with hook:
            loss = original(m, inputs)
        per_loss.append(saved[0])
        return loss

    trainer._compute_loss = measured

    def call() -> tuple[int, bool]:
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
        trainer.train()
        if cuda:
            peaks.append(float(torch.cuda.max_memory_allocated(device)))
        logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        return int(trainer.state.global_step), all(math.isfinite(v) for v in logged)

    return {
        "call": call,
        "saved": lambda: float(statistics.median(per_loss)),
        "peak": lambda: max(peaks, default=0.0),
        "_tmp": lambda: tmp,
    }


#: Seconds of timed rounds per comparison on the full CPU bench (steps, then heads): 9 rounds
#: take about 3 and 4.5 minutes on the shared 2-core machine under load, so the whole bench,
#: model building and warm-ups included, stays under 15 minutes even at twice that load.
BUDGET_S = 300.0

#: |chunked profile - unfused definition|: fp32 rounding of sums of 16 probabilities (~1e-7).
PROFILE_TOLERANCE = 1e-4


def steps_difference(out: tuple[int, bool], ref: tuple[int, bool]) -> float:
    """The step check: |optimiser steps - the baseline's|, ``inf`` on a non-finite loss."""
    if not (out[1] and ref[1]):
        return math.inf
    return float(abs(out[0] - ref[0]))


def _head_input(tokens: int, hidden: int, vocab: int, device: str, seed: int) -> tuple[Any, ...]:
    """Random hidden states ``h [N, H]`` and head ``w [V, H]`` (both requiring grad), each
    token's sequence index (sequences of 16 tokens), the number of sequences, and labels."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    h = torch.randn(tokens, hidden, generator=g).to(device).requires_grad_(True)
    w = (torch.randn(vocab, hidden, generator=g) / hidden**0.5).to(device).requires_grad_(True)
    seq = torch.arange(tokens, device=device) // 16
    batch = int(seq.max()) + 1
    labels = torch.randint(0, vocab, (tokens,), generator=g).to(device)
    return h, w, seq, batch, labels


def head_systems(
    ks: Sequence[int], tokens: int, hidden: int, vocab: int, device: str, seed: int
) -> tuple[dict[str, Callable[[], Any]], Callable[[Any, Any], float]]:
    """The profile-term systems (``token-logprob`` and ``profile-k<K>``) on one random input,
    and their output check (see the module docstring)."""
    import torch

    from mosa_rl.loss import profile_sums_from_hidden, sorted_probs

    h, w, seq, batch, labels = _head_input(tokens, hidden, vocab, device, seed)

    def logprob() -> torch.Tensor:
        logits = torch.nn.functional.linear(h, w)
        return logits.log_softmax(-1).gather(-1, labels[:, None]).sum()

    def token_head() -> dict[str, Any]:
        out = logprob()
        out.backward()
        h.grad = w.grad = None
        return {"logp": out.detach()}

    def with_profile(k: int) -> Callable[[], dict[str, Any]]:
        def call() -> dict[str, Any]:
            out = logprob()
            prof = profile_sums_from_hidden(h, w, None, seq, batch, k)
            (out + prof.sum()).backward()
            h.grad = w.grad = None
            return {"logp": out.detach(), "profile": prof.detach(), "k": k}

        return call

    def check(out: dict[str, Any], ref: dict[str, Any]) -> float:
        if not torch.equal(out["logp"], ref["logp"]):
            return max(float((out["logp"] - ref["logp"]).abs()), 1e-300) + 1.0
        with torch.no_grad():
            rows = sorted_probs(torch.nn.functional.linear(h, w).softmax(-1), out["k"])
            unfused = rows.new_zeros(batch, out["k"] + 1).index_add(0, seq, rows)
        return float((out["profile"] - unfused).abs().max())

    systems: dict[str, Callable[[], Any]] = {"token-logprob": token_head}
    systems |= {f"profile-k{k}": with_profile(k) for k in ks}
    return systems, check


def profile_cost(
    k: int, tokens: int, hidden: int, vocab: int, repeats: int, device: str, seed: int
) -> list[float]:
    """Seconds for forward+backward of the profile sums over ``tokens`` tokens, per repeat
    (``k = 0``: the sampled token's log-probability only, what token-level KL needs)."""
    import torch

    from mosa_rl.loss import profile_sums_from_hidden

    h, w, seq, batch, labels = _head_input(tokens, hidden, vocab, device, seed)
    times = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        if k == 0:  # the token-KL baseline: log-prob of the sampled token only
            logits = torch.nn.functional.linear(h, w)
            out = logits.log_softmax(-1).gather(-1, labels[:, None]).sum()
        else:
            out = profile_sums_from_hidden(h, w, None, seq, batch, k).sum()
        out.backward()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        h.grad = w.grad = None
    return times


def run_bench(
    seed: int = 0,
    steps: int = 4,
    device: str = "cpu",
    quick: bool = False,
    shape: str | None = None,
    repeats: int | None = None,
    budget_s: float | None = None,
) -> tuple[list[Any], list[Any], str, dict[str, Any]]:
    """Both measurements: rows (medians with intervals, output checks), the correctness claims,
    a one-line summary and the config. ``budget_s``: each comparison's timed rounds stop after
    the round that crosses it (never before 6 rounds, the fewest with a 95% interval); the
    default is :data:`BUDGET_S` on the full CPU bench, none with ``quick`` or on CUDA."""
    from paperstack.bench import compare_speed, median_ci, set_threads
    from paperstack.records import Row

    if steps < 1:
        raise MosaError(f"--steps {steps}: must be >= 1")
    shapes = (
        {"tokens": 256, "hidden": 64, "vocab": 1024}
        if quick
        else {"tokens": 1024, "hidden": 256, "vocab": 32_000}
    )
    if budget_s is None and not quick and device == "cpu":
        budget_s = BUDGET_S
    ks = (1, 4, 16) if quick else (1, 4, 16, 64)
    repeats = repeats or (6 if quick else 9)
    # One thread on a CPU (a shared machine); on CUDA the host threads hardly matter.
    threads = set_threads(1) if device == "cpu" else None
    sync = None
    if device.startswith("cuda"):
        import torch

        sync = torch.cuda.synchronize
    trainers = step_systems(steps, seed, device, quick, shape)
    step_cmp = compare_speed(
        {name: t["call"] for name, t in trainers.items()}, baseline="tokenkl", repeats=repeats,
        warmup=1, check=steps_difference, tolerance=0.0, sync=sync, seed=seed,
        budget_s=budget_s,
    )  # fmt: skip
    systems, check = head_systems(ks, device=device, seed=seed, **shapes)
    head_cmp = compare_speed(systems, baseline="token-logprob", repeats=repeats, warmup=2,
                             check=check, tolerance=PROFILE_TOLERANCE, sync=sync,
                             seed=seed, budget_s=budget_s)  # fmt: skip
    rows: list[Row] = [*step_cmp.rows(split="step"), *head_cmp.rows(split="head")]

    def ratio_row(cmp: Any, system: str, metric: str, split: str, label: str) -> Row:
        per_round = [a / b for a, b in zip(cmp.times[system], cmp.times[cmp.baseline],
                                           strict=True)]  # fmt: skip
        med, ci = median_ci(per_round)
        return Row(system=label, metric=metric, value=med, ci95=ci, n=len(per_round),
                   split=split, unit=f"x {cmp.baseline} (median)")  # fmt: skip

    for name in ("mosa", "mosa+tokenkl"):
        rows.append(ratio_row(step_cmp, name, "step_time_ratio", "step", name))
    base_saved = trainers["tokenkl"]["saved"]()
    for name in ("mosa", "mosa+tokenkl"):
        rows.append(Row(system=name, metric="saved_activation_ratio", split="step",
                        value=trainers[name]["saved"]() / base_saved, n=1))  # fmt: skip
    if device.startswith("cuda"):
        rows.append(Row(system="mosa", metric="peak_memory_ratio", split="step",
                        value=trainers["mosa"]["peak"]() / trainers["tokenkl"]["peak"](),
                        n=1))  # fmt: skip
    for k in ks:
        rows.append(ratio_row(head_cmp, f"profile-k{k}", "head_time_ratio", "head",
                              f"profile-k{k}"))  # fmt: skip
    claims = [step_cmp.correctness_claim(name, rows, split="step", prefix="",
                                         id=f"{name}_step_same_work_as_tokenkl")
              for name in ("mosa", "mosa+tokenkl")]  # fmt: skip
    claims += [head_cmp.correctness_claim(f"profile-k{k}", rows, split="head",
                                          id=f"profile_k{k}_matches_definition")
               for k in ks]  # fmt: skip
    by = {(r.system, r.metric): r for r in rows}
    step, saved = by[("mosa", "step_time_ratio")], by[("mosa", "saved_activation_ratio")]
    summary = (
        f"MOSA step {step.value:.2f}x [{step.ci95[0]:.2f}, {step.ci95[1]:.2f}] token-KL's time "  # type: ignore[index]
        f"(median of {step_cmp.repeats} interleaved rounds), {saved.value:.3f}x its saved "
        "activations"
    )
    config = {"steps": steps, "shape": shape, "profile_shapes": shapes, "ks": ks,
              "repeats": repeats, "budget_s": budget_s, "threads": threads,
              "profile_tolerance": PROFILE_TOLERANCE,
              "timing": {"step": step_cmp.to_dict(), "head": head_cmp.to_dict()}}  # fmt: skip
    return rows, claims, summary, config

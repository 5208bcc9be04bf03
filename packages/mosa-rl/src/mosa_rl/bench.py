"""``mosa bench``: what MOSA costs over token-level KL GRPO, and what the profile costs vs K.

Two measurements, both written as ratios so they travel across machines:

1. **Per-step time and memory in one run.** The same model, data and seed trained for a few
   GRPO steps with token-level KL (trl's ``beta``, which needs the reference model's
   per-token log-probs) and with MOSA (``mosa_beta``, which needs the reference's profile
   sums). Time is trl's own ``step_time`` metric (median over steps after a warm-up step).
   Memory is the bytes of tensors autograd saves for the backward of one loss
   (``torch.autograd.graph.saved_tensors_hooks``): the activation memory the term adds,
   measurable on a CPU; on CUDA the peak allocated memory is reported too.
2. **The profile term alone vs K.** Forward and backward of
   :func:`~mosa_rl.loss.profile_sums_from_hidden` on ``N`` tokens against the same LM head
   computing only log-softmax of the sampled tokens (what token-level KL needs), for
   ``K`` in 1..64.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from mosa_rl.errors import MosaError

__all__ = ["profile_cost", "run_bench", "step_cost"]


def _saved_bytes() -> tuple[Any, list[int]]:
    import torch

    total = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        total[0] += t.numel() * t.element_size()
        return t

    return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), total


def step_cost(
    beta: float, mosa_beta: float, steps: int, seed: int, device: str, quick: bool
) -> dict[str, float]:
    """Median step time (s), saved-activation bytes per loss and (CUDA) peak memory."""
    import torch
    from transformers.trainer_callback import PrinterCallback

    from mosa_rl.trainer import MOSAConfig, MOSATrainer
    from paperstack import tasks, tiny

    preset = "micro" if quick else "tiny"
    tokenizer = tiny.build_tokenizer()
    task = tasks.get("countdown")
    with tempfile.TemporaryDirectory(prefix="mosa-bench-") as tmp:
        base = tiny.build_model(preset, tokenizer, seed)
        base.save_pretrained(tmp + "/base")
        tokenizer.save_pretrained(tmp + "/base")
        loaded: tuple[Any, Any] = tiny.load(tmp + "/base")
        model, tokenizer = loaded
        model.to(device)
        data = task.to_dataset(task.generate(8 * (steps + 1), seed=seed), conversational=True)
        args = MOSAConfig(
            output_dir=tmp + "/out",
            per_device_train_batch_size=32,
            num_generations=8,
            max_completion_length=16,
            max_steps=steps + 1,
            learning_rate=1e-4,
            beta=beta,
            mosa_beta=mosa_beta,
            mosa_top_k=8,
            seed=seed,
            bf16=False,
            activation_checkpointing=False,
            use_cpu=device == "cpu",
            report_to="none",
            logging_steps=1,
            save_strategy="no",
            disable_tqdm=True,
        )

        def reward(completions: list[Any], **_: Any) -> list[float]:
            # A dense reward (shorter is better) so every step has a non-zero gradient.
            return [-float(len(str(c))) for c in completions]

        trainer = MOSATrainer(model, reward, args, train_dataset=data, processing_class=tokenizer)
        trainer.remove_callback(PrinterCallback)
        hook, saved = _saved_bytes()
        original = trainer._compute_loss
        per_loss: list[int] = []

        def measured(m: Any, inputs: Any) -> Any:
            saved[0] = 0
            with hook:
                loss = original(m, inputs)
            per_loss.append(saved[0])
            return loss

        trainer._compute_loss = measured  # type: ignore[method-assign,assignment]
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats(device)
        trainer.train()
        peak = float(torch.cuda.max_memory_allocated(device)) if device.startswith("cuda") else 0.0
    times = [h["step_time"] for h in trainer.state.log_history if "step_time" in h][1:]
    return {
        "step_seconds": statistics.median(times) if times else float("nan"),
        "saved_bytes": float(statistics.median(per_loss[1:] or per_loss)),
        "peak_bytes": peak,
    }


def profile_cost(
    k: int, tokens: int, hidden: int, vocab: int, repeats: int, device: str, seed: int
) -> float:
    """Seconds for forward+backward of the profile sums over ``tokens`` tokens."""
    import torch

    from mosa_rl.loss import profile_sums_from_hidden

    g = torch.Generator(device="cpu").manual_seed(seed)
    h = torch.randn(tokens, hidden, generator=g).to(device).requires_grad_(True)
    w = (torch.randn(vocab, hidden, generator=g) / hidden**0.5).to(device).requires_grad_(True)
    seq = torch.arange(tokens, device=device) // 16
    batch = int(seq.max()) + 1
    labels = torch.randint(0, vocab, (tokens,), generator=g).to(device)
    best = float("inf")
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
        best = min(best, time.perf_counter() - t0)
        h.grad = w.grad = None
    return best


def run_bench(
    out: Path, seed: int = 0, steps: int = 4, device: str = "cpu", quick: bool = False
) -> tuple[Path, str]:
    """Both measurements into ``out/bench.json``; returns its path and a one-line summary."""
    from mosa_rl import __version__
    from mosa_rl.demo import _quiet, check_device
    from paperstack.records import Manifest, Results, Row, write_results

    device = check_device(device)
    _quiet()
    if steps < 1:
        raise MosaError(f"steps={steps}: must be >= 1")
    shapes = (
        {"tokens": 256, "hidden": 64, "vocab": 1024}
        if quick
        else {"tokens": 2048, "hidden": 256, "vocab": 32_000}
    )
    ks = (1, 4, 16) if quick else (1, 4, 16, 64)
    manifest = Manifest.collect(
        "mosa-rl",
        __version__,
        seed=seed,
        config={
            "steps": steps,
            "device": device,
            "quick": quick,
            "profile_shapes": shapes,
            "ks": ks,
        },
    )
    token_kl = step_cost(0.04, 0.0, steps, seed, device, quick)
    mosa = step_cost(0.0, 1.0, steps, seed, device, quick)
    both = step_cost(0.04, 1.0, steps, seed, device, quick)
    rows = [
        Row(system="grpo-tokenkl", metric="step_time_ratio", value=1.0, n=steps),
        Row(
            system="mosa",
            metric="step_time_ratio",
            value=mosa["step_seconds"] / token_kl["step_seconds"],
            n=steps,
        ),
        Row(
            system="mosa+tokenkl",
            metric="step_time_ratio",
            value=both["step_seconds"] / token_kl["step_seconds"],
            n=steps,
        ),
        Row(system="grpo-tokenkl", metric="saved_activation_ratio", value=1.0, n=steps),
        Row(
            system="mosa",
            metric="saved_activation_ratio",
            value=mosa["saved_bytes"] / token_kl["saved_bytes"],
            n=steps,
        ),
        Row(
            system="mosa+tokenkl",
            metric="saved_activation_ratio",
            value=both["saved_bytes"] / token_kl["saved_bytes"],
            n=steps,
        ),
    ]
    if device.startswith("cuda"):
        rows.append(
            Row(
                system="mosa",
                metric="peak_memory_ratio",
                value=mosa["peak_bytes"] / token_kl["peak_bytes"],
                n=steps,
            )
        )
    base = profile_cost(0, repeats=3, device=device, seed=seed, **shapes)
    for k in ks:
        t = profile_cost(k, repeats=3, device=device, seed=seed, **shapes)
        rows.append(Row(system=f"profile-k{k}", metric="head_time_ratio", value=t / base, n=3))
    rows.append(Row(system="logprob-head", metric="head_time_ratio", value=1.0, n=3))
    results = Results(manifest=manifest.finish(), rows=rows, claims=[])
    path = write_results(out / "bench.json", results)
    summary = (
        f"MOSA step {rows[1].value:.2f}x token-KL's time, "
        f"{rows[4].value:.2f}x its saved activations"
    )
    return path, summary

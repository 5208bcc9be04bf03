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


def step_cost(
    beta: float,
    mosa_beta: float,
    steps: int,
    seed: int,
    device: str,
    quick: bool,
    shape: str | None = None,
) -> dict[str, Any]:
    """Per-step times (s, the warm-up step dropped), saved-activation bytes per loss and (CUDA)
    peak memory. ``shape``: a tiny preset or a :data:`SHAPES` entry (default: micro with
    ``quick``, else tiny); the large shapes train in bf16 with the head in fp32."""
    import torch
    from transformers.trainer_callback import PrinterCallback

    from mosa_rl.trainer import MOSAConfig, MOSATrainer
    from paperstack import tasks, tiny

    preset = shape or ("micro" if quick else "tiny")
    large = preset in SHAPES
    tokenizer = tiny.build_tokenizer()
    task = tasks.get("countdown")
    with tempfile.TemporaryDirectory(prefix="mosa-bench-") as tmp:
        base = _bench_model(preset, tokenizer, seed)
        base.save_pretrained(tmp + "/base")
        tokenizer.save_pretrained(tmp + "/base")
        loaded: tuple[Any, Any] = tiny.load(tmp + "/base")
        model, tokenizer = loaded
        model.to(device)
        data = task.to_dataset(task.generate(8 * (steps + 1), seed=seed), conversational=True)
        args = MOSAConfig(
            output_dir=tmp + "/out",
            per_device_train_batch_size=64 if large else 32,
            num_generations=8,
            max_completion_length=128 if large else 16,
            max_steps=steps + 1,
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
    times = [float(h["step_time"]) for h in trainer.state.log_history if "step_time" in h][1:]
    return {
        "step_seconds": times,
        "saved_bytes": float(statistics.median(per_loss[1:] or per_loss)),
        "peak_bytes": peak,
    }


def profile_cost(
    k: int, tokens: int, hidden: int, vocab: int, repeats: int, device: str, seed: int
) -> list[float]:
    """Seconds for forward+backward of the profile sums over ``tokens`` tokens, per repeat
    (``k = 0``: the sampled token's log-probability only, what token-level KL needs)."""
    import torch

    from mosa_rl.loss import profile_sums_from_hidden

    g = torch.Generator(device="cpu").manual_seed(seed)
    h = torch.randn(tokens, hidden, generator=g).to(device).requires_grad_(True)
    w = (torch.randn(vocab, hidden, generator=g) / hidden**0.5).to(device).requires_grad_(True)
    seq = torch.arange(tokens, device=device) // 16
    batch = int(seq.max()) + 1
    labels = torch.randint(0, vocab, (tokens,), generator=g).to(device)
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
) -> tuple[list[Any], str, dict[str, Any]]:
    """Both measurements as rows (ratios), a one-line summary and the config.

    Step-time ratios pair step ``i`` of one system with step ``i`` of the other (same data and
    seed); the profile-term ratios pair repeat ``i`` of K with repeat ``i`` of the log-prob head,
    run back to back, so a slow moment of a shared machine hits both sides of a pair."""
    from paperstack.records import Row

    if steps < 1:
        raise MosaError(f"--steps {steps}: must be >= 1")
    shapes = (
        {"tokens": 256, "hidden": 64, "vocab": 1024}
        if quick
        else {"tokens": 2048, "hidden": 256, "vocab": 32_000}
    )
    ks = (1, 4, 16) if quick else (1, 4, 16, 64)
    repeats = 3 if quick else 10
    config = {"steps": steps, "shape": shape, "profile_shapes": shapes, "ks": ks,
              "repeats": repeats}  # fmt: skip
    token_kl = step_cost(0.04, 0.0, steps, seed, device, quick, shape)
    mosa = step_cost(0.0, 1.0, steps, seed, device, quick, shape)
    both = step_cost(0.04, 1.0, steps, seed, device, quick, shape)
    rows: list[Row] = []

    def ratio_row(system: str, metric: str, num: list[float], den: list[float]) -> Row:
        pairs = {f"r{i}": a / b for i, (a, b) in enumerate(zip(num, den, strict=False)) if b > 0}
        if not pairs:
            raise MosaError(f"{metric}: nothing measured (steps={steps})")
        return Row.from_items(system, metric, pairs)

    base_steps = token_kl["step_seconds"]
    rows.append(ratio_row("mosa", "step_time_ratio", mosa["step_seconds"], base_steps))
    rows.append(ratio_row("mosa+tokenkl", "step_time_ratio", both["step_seconds"], base_steps))
    for name, cost in (("mosa", mosa), ("mosa+tokenkl", both)):
        rows.append(Row(system=name, metric="saved_activation_ratio",
                        value=cost["saved_bytes"] / token_kl["saved_bytes"], n=1))  # fmt: skip
    if device.startswith("cuda"):
        rows.append(Row(system="mosa", metric="peak_memory_ratio",
                        value=mosa["peak_bytes"] / token_kl["peak_bytes"], n=1))  # fmt: skip
    for k in ks:
        base, term = [], []
        for _ in range(repeats):  # interleaved: each pair is measured back to back
            base += profile_cost(0, repeats=1, device=device, seed=seed, **shapes)
            term += profile_cost(k, repeats=1, device=device, seed=seed, **shapes)
        rows.append(ratio_row(f"profile-k{k}", "head_time_ratio", term, base))
    summary = (
        f"MOSA step {rows[0].value:.2f}x token-KL's time, "
        f"{rows[2].value:.3f}x its saved activations"
    )
    return rows, summary, config

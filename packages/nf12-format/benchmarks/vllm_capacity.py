"""KV-cache capacity that NF12 frees in vLLM, measured on its CPU build, next to nf12.capacity.

Usage (the vllm venv, nf12-format installed in it so that vLLM's processes load the plug-in)::

    python benchmarks/vllm_capacity.py --out reports/nf12-format/vllm-capacity.json

For SmolLM2-135M-Instruct cast to BF16 and its NF12 checkpoint
(:func:`nf12.hf.quantize_pretrained`), each in its own ``vllm.LLM`` engine (fresh processes,
``--dtype bfloat16``, eager), it records the KV-cache tokens and blocks vLLM allocates.
vLLM's CPU worker has two budgets:

- ``VLLM_CPU_KVCACHE_SPACE`` (what tests set): a fixed KV space, whatever the weights take. NF12
  cannot free anything there by construction; the run records it to show that.
- automatic (the variable unset): ``gpu_memory_utilization * total memory - the worker's RSS``.
  That is the GPU rule (budget minus weights and the rest), so the weights NF12 saves become KV
  blocks. ``nf12.capacity.kv_capacity`` predicts the difference from the model's shapes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_ENGINE = r"""
import json, sys
from vllm import LLM
def main():
    llm = LLM(model=sys.argv[1], dtype="bfloat16", enforce_eager=True, max_model_len=512,
              gpu_memory_utilization=float(sys.argv[2]))
    cc = llm.llm_engine.vllm_config.cache_config
    print("NF12_BLOCKS", json.dumps({"blocks": cc.num_gpu_blocks, "block_size": cc.block_size}))
if __name__ == "__main__":
    main()
"""

_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens")
_AUTO = re.compile(r"Auto set \(([\d.]+)/([\d.]+)\) GiB for KV cache.*?([\d.]+) GiB memory was "
                   r"consumed by non-kv usages")  # fmt: skip
_FIXED = re.compile(r"Explicitly set \(([\d.]+)/([\d.]+)\) GiB for KV cache")


def engine(path: Path, utilization: float, fixed_gib: int | None) -> dict[str, object]:
    env = dict(os.environ, VLLM_NO_USAGE_STATS="1")
    env.pop("VLLM_CPU_KVCACHE_SPACE", None)
    if fixed_gib is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(fixed_gib)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", _ENGINE, str(path), str(utilization)],
                          env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise SystemExit(f"vllm_capacity: engine for {path} failed:\n{log[-3000:]}")
    row: dict[str, object] = {"seconds": round(time.monotonic() - start, 1)}
    for line in log.splitlines():
        if line.startswith("NF12_BLOCKS"):
            row.update(json.loads(line.split(" ", 1)[1]))
        if m := _TOKENS.search(line):
            row["kv_tokens"] = int(m.group(1).replace(",", ""))
        if m := _AUTO.search(line):
            row.update(kv_gib=float(m.group(1)), total_gib=float(m.group(2)),
                       non_kv_gib=float(m.group(3)))  # fmt: skip
        if m := _FIXED.search(line):
            row.update(kv_gib=float(m.group(1)), total_gib=float(m.group(2)))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # The committed result (reports/nf12-format/vllm-capacity.json) used these defaults.
    options = [
        ("--out", Path, None, "where the JSON goes"),
        ("--utilization", float, 0.15, "gpu_memory_utilization: the share of RAM for vLLM"),
        ("--checkpoints", Path, None, "a folder with bf16/ and nf12/ (else made anew)"),
        ("--repeats", int, 2, "engines per checkpoint, interleaved"),
        ("--fixed-gib", int, 0, "also one engine each at VLLM_CPU_KVCACHE_SPACE=N (0: skip)"),
    ]
    for flag, kind, default, text in options:
        parser.add_argument(flag, type=kind, default=default, help=text, required=flag == "--out")
    args = parser.parse_args()

    from nf12.capacity import DenseShape, kv_capacity
    from nf12.hf import quantize_pretrained

    from paperstack import models

    src = models.model_path("smollm2-135m-instruct")
    cfg = json.loads((src / "config.json").read_text())
    shape = DenseShape(
        name="SmolLM2-135M-Instruct", layers=cfg["num_hidden_layers"], hidden=cfg["hidden_size"],
        intermediate=cfg["intermediate_size"], heads=cfg["num_attention_heads"],
        kv_heads=cfg["num_key_value_heads"], head_dim=cfg.get("head_dim") or
        cfg["hidden_size"] // cfg["num_attention_heads"], vocab=cfg["vocab_size"],
        tied=bool(cfg.get("tie_word_embeddings")),
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        work = args.checkpoints or Path(tmp)
        bf16, nf12 = work / "bf16", work / "nf12"
        if not (bf16 / "config.json").exists() or not (nf12 / "config.json").exists():
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16).save_pretrained(bf16)
            AutoTokenizer.from_pretrained(src).save_pretrained(bf16)
            quantize_pretrained(bf16, nf12)
        files = {k: sum(f.stat().st_size for f in p.glob("*.safetensors"))
                 for k, p in (("bf16", bf16), ("nf12", nf12))}  # fmt: skip
        rows: dict[str, list[dict[str, object]]] = {}
        for _ in range(args.repeats):
            for key, path in (("bf16", bf16), ("nf12", nf12)):
                rows.setdefault(f"{key}_auto", []).append(engine(path, args.utilization, None))
        if args.fixed_gib:
            for key, path in (("bf16", bf16), ("nf12", nf12)):
                rows[f"{key}_fixed"] = [engine(path, args.utilization, args.fixed_gib)]
    auto_b = rows["bf16_auto"][0]
    tokens = {k: [int(r["kv_tokens"]) for r in v] for k, v in rows.items()}  # type: ignore[call-overload]
    extra = [n - b for b, n in zip(tokens["bf16_auto"], tokens["nf12_auto"], strict=True)]
    bits = 8 * (files["nf12"] - 2 * shape.other_params) / shape.linear_params
    # The prediction: the same budget, less the measured non-KV use of the BF16 engine other
    # than its weights, for BF16 and NF12 weights (capacity.kv_capacity's rule).
    total = float(auto_b["total_gib"]) * 2**30  # type: ignore[arg-type]
    bf16_weights = 2.0 * (shape.linear_params + shape.other_params)
    activation = float(auto_b["non_kv_gib"]) * 2**30 - bf16_weights  # type: ignore[arg-type]
    pred = kv_capacity(shape, bits_per_weight=bits, card_bytes=total,
                       utilization=args.utilization, activation_bytes=activation)  # fmt: skip
    result = {
        "model": shape.name,
        "linear_params": shape.linear_params,
        "other_params": shape.other_params,
        "kv_bytes_per_token_bf16": shape.kv_bytes_per_token(),
        "checkpoint_bytes": files,
        "nf12_bits_per_linear_weight": bits,
        "utilization": args.utilization,
        "runs": rows,
        "kv_tokens": tokens,
        "measured_extra_tokens_auto": extra,
        "measured_ratio_auto": [
            n / b for b, n in zip(tokens["bf16_auto"], tokens["nf12_auto"], strict=True)
        ],
        "predicted": {k: pred[k] for k in ("bf16_kv_tokens", "nf12_kv_tokens", "capacity_ratio")},
        "predicted_extra_tokens": pred["nf12_kv_tokens"] - pred["bf16_kv_tokens"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# mosa-rl on a GPU, one command, under 8 minutes on a bare H200 (no downloads):
#   bash packages/mosa-rl/benchmarks/gpu.sh        (from anywhere in the checkout)
# 1. tools/gpu-prelude.sh installs shared/ and the package with --no-deps over the machine's own
#    torch/transformers (trl 1.16, accelerate and datasets must be there too; wheels in .whl/ are
#    installed first);
# 2. runs the gpu-marked tests (bf16 body with an fp32 head through trl on CUDA);
# 3. `mosa bench --device cuda --shape qwen2.5-0.5b`: a few GRPO steps of a random model with
#    Qwen2.5-0.5B's shape (bf16, 151,936-token vocabulary), MOSA vs token-KL step time and peak
#    memory as ratios, and the profile term's cost against K.
# Results go to $OUT (default: reports/mosa-rl/gpu).
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" mosa-rl \
  trl accelerate datasets safetensors tokenizers
gpu_tests 180
timeout 300 "$PY" -m mosa_rl.cli bench --device cuda --shape qwen2.5-0.5b --steps 4 --no-progress \
  --out "$OUT/bench" 2>&1 | tee "$OUT/bench.log"
cp "$OUT/bench/bench.json" "$OUT/bench/bench.md" "$OUT/"
echo "gpu.sh: done; results in $OUT"

#!/usr/bin/env bash
# Scoring cost of progress advantage (policy + reference passes) against one confidence pass
# (policy only) on a lent GPU, with Qwen2-0.5B-shaped random-weight models (bf16). One command:
#
#     bash packages/progress-advantage/benchmarks/gpu.sh        # from the repository root
#
# The shared prelude (tools/gpu-prelude.sh) installs shared/ and this package with --no-deps on
# the machine's own torch / transformers (nothing is downloaded), records the environment and
# never sets TRITON_INTERPRET. Writes gpu-tests.txt, bench.json and bench.md to $OUT (or to
# reports/progress-advantage/gpu); a few minutes on an H200 (the gpu-marked tests, then 256
# trajectories of 16 solution lines, 5 paired repeats), under 8 minutes in all.
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" progress-advantage
gpu_tests 120 || echo "gpu.sh: gpu-marked tests failed (see $OUT/gpu-tests.txt)"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
timeout 330 "$PY" -m progress_advantage.cli bench --device cuda --shape 0.5b --trajectories 256 \
  --steps 16 --repeats 5 --no-progress --out "$OUT"
cat "$OUT/bench.md"

#!/usr/bin/env bash
# ra2-unlearn on a lent GPU, one command, < 8 minutes on one H200: the CUDA tests, the step
# time and peak memory of RA^2 against RMU (3 seeds, ratios in one run), and the demo's quick
# pipeline on CUDA.
#
#   bash packages/ra2-unlearn/benchmarks/gpu.sh          # from anywhere in the checkout
#
# Uses the machine's own torch / transformers / accelerate (tools/gpu-prelude.sh installs the
# core and ra2-unlearn with pip --no-deps); writes to $OUT (default: reports/ra2-unlearn/gpu).
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" ra2-unlearn accelerate
gpu_tests 180 tests/test_gpu.py
timeout 150 "$PY" -m ra2_unlearn.cli bench --device cuda --seeds 0-2 --steps 20 --no-progress \
  --out "$OUT/bench"
timeout 150 "$PY" -m ra2_unlearn.cli demo --quick --device cuda --no-progress --out "$OUT/demo-quick"

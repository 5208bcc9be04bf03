#!/usr/bin/env bash
# numuon on a lent GPU, one command, < 8 minutes on one H200: the CUDA tests, then the step time
# of NuMuon against torch.optim.Muon (and AdamW, the Newton-Schulz reference) on 4096-wide
# matrices, and NuMuon's rank sweep on 4096 x 4096, as ratios to Muon in one process.
#
#   bash packages/numuon/benchmarks/gpu.sh          # from anywhere in the checkout
#
# Uses the machine's own torch / transformers (tools/gpu-prelude.sh installs the core and numuon
# with pip --no-deps); writes bench.json and bench.md to $OUT (default: reports/numuon/gpu).
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" numuon
gpu_tests 180 tests/test_gpu.py
timeout 360 "$PY" -m numuon.cli bench --device cuda --sizes 4096x11008,4096x4096 --repeats 10 \
  --no-progress --out "$OUT"

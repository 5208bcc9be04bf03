#!/usr/bin/env bash
# debate-ledger on a lent GPU, one command, a few minutes on one H200 (no network needed):
#   1. the gpu-marked test: the LM family debates on CUDA, exact about seeds in any call order;
#   2. `demo --quick --device cuda` (the tiny LM family on the GPU; scripted families on CPU).
#
#   bash packages/debate-ledger/benchmarks/gpu.sh          # from anywhere in the checkout
#
# Uses the machine's own torch / transformers (tools/gpu-prelude.sh installs the core and this
# package with pip --no-deps); writes env.txt, gpu-tests.txt, demo.log and demo/ (results.json,
# report.md) to $OUT (default: reports/debate-ledger/gpu).
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" debate-ledger
gpu_tests 180 tests/test_gpu.py
timeout 300 "$PY" -m debate_ledger.cli demo --quick --device cuda --no-progress \
  --out "$OUT/demo" 2>&1 | tee "$OUT/demo.log"
echo "gpu.sh: results in $OUT"

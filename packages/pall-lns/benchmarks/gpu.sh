#!/usr/bin/env bash
# GPU check of pall-lns, one command (< 8 min on a bare H200 with its preinstalled torch 2.11,
# triton 3.6, transformers 5.17, Python 3.12): the LM selector on CUDA agrees with the CPU, and
# `pall demo --quick --device cuda` runs the LM (fine-tuning and decisions) on the GPU while SCIP
# stays on the CPU. Writes to $OUT (default: reports/pall-lns/gpu). SCIP, HiGHS and trl are not
# preinstalled there and nothing can be downloaded: put their wheels (pyscipopt, highspy, trl) in
# $WHEELS (default .whl/ in the checkout); tools/gpu-prelude.sh installs them first.
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" pall-lns \
  pyscipopt highspy trl
gpu_tests 240
timeout 300 "$PY" -m pall_lns.cli demo --quick --device cuda --no-progress --out "$OUT/demo-cuda" \
  2>&1 | tail -20 | tee "$OUT/demo-cuda.txt"

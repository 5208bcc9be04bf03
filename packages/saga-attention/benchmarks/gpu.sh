#!/usr/bin/env bash
# saga-attention on a bare GPU machine (an H200 with its preinstalled torch / triton /
# transformers): the gpu-marked tests, then `saga bench --device cuda` (decode attention step
# at 8K-128K: SAGA + Atop-N triton kernels vs GQA + Atop-N, dense SDPA in bf16 and the
# flash-decoding triton kernel; Atop-N split select vs torch.topk). Under 8 minutes.
#
#   bash packages/saga-attention/benchmarks/gpu.sh        # from anywhere in the checkout
#   OUT=/some/dir bash .../gpu.sh                         # results there
#
# Writes $OUT/bench.json (the results.json schema), $OUT/bench.md, $OUT/gpu-tests.txt and
# $OUT/env.txt (default OUT: reports/saga-attention/gpu). Exits non-zero if a gpu test failed or
# the bench did not write bench.json; the bench runs even when a test failed.
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" saga-attention triton
status=0
gpu_tests 300 || status=1
timeout 360 "$PY" -m saga_attention.cli bench --device cuda --out "$OUT/bench" --no-progress \
  2>&1 | tee "$OUT/bench.txt" || status=1
if [[ -f "$OUT/bench/bench.json" ]]; then
  cp "$OUT/bench/bench.json" "$OUT/bench/bench.md" "$OUT/"
else
  echo "gpu.sh: the bench wrote no bench.json" >&2
  status=1
fi
exit "$status"

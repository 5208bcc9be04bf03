#!/usr/bin/env bash
# mage-attention on a bare GPU machine (an H200 with its preinstalled torch / triton /
# transformers): the gpu-marked tests (the compiled triton gathered-attention kernel against the
# PyTorch reference, the CUDA block timing), then `mage bench --device cuda`: one denoising
# block's attention at 32K-128K, MAGE (step-1 exact pass, then the triton kernel over k + B keys)
# vs exact (the faster of SDPA and the grouped matmul) vs Quest, in bf16. Under 8 minutes.
#
#   bash packages/mage-attention/benchmarks/gpu.sh        # from anywhere in the checkout
#   OUT=/some/dir bash .../gpu.sh                         # results there
#
# Writes $OUT/bench.json (the results.json schema), $OUT/bench.md, $OUT/gpu-tests.txt and
# $OUT/env.txt (default OUT: reports/mage-attention/gpu). Exits non-zero if a gpu test failed or
# the bench did not write bench.json; the bench runs even when a test failed.
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" mage-attention triton
status=0
gpu_tests 240 || status=1
timeout 300 "$PY" -m mage_attention.cli bench --device cuda --lengths 32768,65536,131072 \
  --repeats 5 --out "$OUT/bench" --no-progress 2>&1 | tee "$OUT/bench.txt" || status=1
if [[ -f "$OUT/bench/bench.json" ]]; then
  cp "$OUT/bench/bench.json" "$OUT/bench/bench.md" "$OUT/"
else
  echo "gpu.sh: the bench wrote no bench.json" >&2
  status=1
fi
exit "$status"

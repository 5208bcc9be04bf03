#!/usr/bin/env bash
# mage-attention on a bare GPU machine (H100/H200 with its preinstalled torch / triton /
# transformers), sized by GPU_BUDGET_S (seconds, default 110: the sweep's budget, issue 47):
#
#   1. setup (tools/gpu-prelude.sh: the core and this package, pip --no-deps; env.txt);
#   2. the gpu-marked tests, at most a quarter of what is left: the compiled split-key triton
#      kernel against the PyTorch reference, and the CUDA bench on a planted cache (sparse
#      outputs equal exact attention's);
#   3. `mage bench --device cuda`: one block's attention at L = 128K, 64K, 32K (the headline
#      first) for T = 8 and 32 with k = 512 fixed, in bf16: exact attention (SDPA/flash over the
#      cache, the block written in place: no cache copy, no materialised logits), MAGE (SDPA on
#      the gathered buffer, and the triton kernel), Quest; interleaved repeats, medians with
#      order-statistic intervals, a correctness row per system, the cost model beside, and the
#      claims at the paper's numbers (6.82x exact at 128K, 3.35x Quest). The bench stops
#      starting new settings when its share of the budget runs out and writes what finished.
#
#   GPU_BUDGET_S=110 OUT=/some/dir timeout 110 bash packages/mage-attention/benchmarks/gpu.sh
#
# Writes $OUT/bench.json (the results.json schema), $OUT/bench.md, $OUT/bench.txt,
# $OUT/gpu-tests.txt and $OUT/env.txt (default OUT: reports/mage-attention/gpu). Exits non-zero
# if a gpu test failed or the bench wrote no bench.json; the bench runs even when a test failed.
BUDGET="${GPU_BUDGET_S:-110}"
START_S=$SECONDS
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" mage-attention triton
left() { echo $((BUDGET - (SECONDS - START_S))); }
status=0
tests_s=$(($(left) / 4))
if ((tests_s >= 15)); then
  gpu_tests "$tests_s" || status=1
else
  echo "gpu.sh: $(left) s left after setup; gpu tests skipped" | tee "$OUT/gpu-tests.txt"
fi
# what is left, less 5 s to copy; the bench's own clock starts after python and torch load
bench_s=$(($(left) - 5))
if ((bench_s >= 20)); then
  timeout "$bench_s" "$PY" -m mage_attention.cli bench --device cuda \
    --time-budget "$((bench_s - 15))" --out "$OUT/bench" --no-progress 2>&1 |
    tee "$OUT/bench.txt" || status=1
else
  echo "gpu.sh: $(left) s left; no time for the bench" >&2
fi
if [[ -f "$OUT/bench/bench.json" ]]; then
  cp "$OUT/bench/bench.json" "$OUT/bench/bench.md" "$OUT/"
else
  echo "gpu.sh: the bench wrote no bench.json" >&2
  status=1
fi
echo "gpu.sh: $((SECONDS - START_S)) s of $BUDGET s"
exit "$status"

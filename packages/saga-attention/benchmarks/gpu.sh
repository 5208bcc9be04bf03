#!/usr/bin/env bash
# saga-attention on a bare GPU machine (its preinstalled torch / triton / transformers), sized to
# a time budget (issue #47): `saga bench --device cuda --budget-s ...` first measures the
# headline, end-to-end decode tokens/s of the Llama-3.2-1B shape (all 16 layers, bf16, CUDA-graph
# replays) at 32K, 64K and 128K for dense GQA, GQA + Atop-N and SAGA + Atop-N, then the decode
# attention step of one layer and the selection alone, as long as the budget lasts; what did not
# fit is listed in bench.json's config (skipped_for_budget) and what finished is written. The
# gpu-marked tests run first only when the budget leaves them room (GPU_BUDGET_S >= 240).
#
#   GPU_BUDGET_S=110 OUT=/some/dir bash packages/saga-attention/benchmarks/gpu.sh
#
# Writes $OUT/bench.json (the results.json schema: rows from paperstack.bench, the correctness
# rows, claims at the paper's 2x), $OUT/bench.md, $OUT/bench.txt, $OUT/gpu-tests.txt and
# $OUT/env.txt (default OUT: reports/saga-attention/gpu). Exits non-zero if a gpu test failed or
# the bench wrote no bench.json.
_start=$SECONDS
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" saga-attention triton
budget="${GPU_BUDGET_S:-110}"
left() { echo $((budget - (SECONDS - _start))); }
status=0
if (($(left) >= 240)); then
  gpu_tests $(($(left) - 180)) || status=1
else
  echo "gpu.sh: gpu tests skipped: GPU_BUDGET_S=$budget leaves them no room beside the bench" \
    | tee "$OUT/gpu-tests.txt"
fi
# python, torch and transformers take ~10 s to start and the results a second to write: the
# bench's own budget leaves them that margin, and `timeout` is only the last resort
bench_budget=$(($(left) - 15))
if ((bench_budget < 20)); then
  echo "gpu.sh: only $(left) s of GPU_BUDGET_S=$budget left; the bench needs at least 35" >&2
  exit 1
fi
timeout --signal=TERM $(($(left) - 2)) "$PY" -m saga_attention.cli bench --device cuda \
  --out "$OUT/bench" --no-progress --budget-s "$bench_budget" 2>&1 | tee "$OUT/bench.txt" \
  || status=1
if [[ -f "$OUT/bench/bench.json" ]]; then
  cp "$OUT/bench/bench.json" "$OUT/bench/bench.md" "$OUT/"
else
  echo "gpu.sh: the bench wrote no bench.json" >&2
  status=1
fi
exit "$status"

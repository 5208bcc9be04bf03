#!/usr/bin/env bash
# pace-scheduler on a lent GPU, within $GPU_BUDGET_S seconds (the sweep gives it 45; #47):
# a burst of forking requests served in transformers' continuous-batching engine on CUDA under
# IRP-Off (baseline), IRP-Eager and Pace, timed with paperstack.bench (interleaved repeats,
# medians of per-repeat ratios with intervals, a correctness row), after a quick profile of the
# engine's steps that fits Pace's predictor. Writes $OUT/bench.json (the results.json schema).
#
#   GPU_BUDGET_S=45 OUT=/tmp/pace bash packages/pace-scheduler/benchmarks/gpu.sh
#
# The model is Qwen3-shaped and small, random weights built on the GPU (no download). vLLM is
# not on the lent machines and cannot be downloaded there, so the vLLM plug-in is not run here
# (it is tested in CI's vllm session on the CPU build). The Python step gets what is left of the
# budget minus a margin and sizes itself (profile grid, repeats); it writes bench.json with what
# finished, the profile rows alone when the timed part cannot start. Everything else of the old
# 8-minute script (the served 80-request trace, the gpu-marked tests) does not fit 45 s.
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" pace-scheduler \
  numpy transformers pydantic platformdirs
log() { echo "gpu.sh: $*" | tee -a "$OUT/summary.txt"; }
cat "$OUT/env.txt" > "$OUT/summary.txt"

budget=$(( $(gpu_left) - 4 ))  # 4 s for the interpreter's exit and the sweep's bookkeeping
if (( budget < 10 )); then
  log "only $(gpu_left) s left of GPU_BUDGET_S=$GPU_BUDGET_S: nothing measured"
  exit 1
fi
log "burst bench in $budget s (GPU_BUDGET_S=$GPU_BUDGET_S)"
"$PY" -m pace_scheduler.gpu_bench --out "$OUT" --budget-s "$budget" --device cuda 2>&1 \
  | tee -a "$OUT/summary.txt"
log "done: $OUT/bench.json ($(( GPU_BUDGET_S - $(gpu_left) )) s)"

#!/usr/bin/env bash
# pace-scheduler on a lent GPU (an H200 with its preinstalled torch / triton / transformers):
# serve the same branching trace in transformers' continuous-batching engine on CUDA with and
# without Pace (IRP-Off, IRP-Eager, Pace, two fixed caps), after profiling that engine's steps.
#
#   bash packages/pace-scheduler/benchmarks/gpu.sh        # from the repository root
#
# vLLM is not preinstalled there and nothing can be downloaded, so the vLLM plug-in is not run
# here: this is the transformers engine on the GPU. The model is Qwen3-0.6B-shaped with random
# weights (built from a config, saved locally: no hub). Everything goes to $OUT (default
# ./gpu-out): model/, profile/ (profile.jsonl, fit.json), trace.jsonl, serve/results.json,
# pytest.log, summary.txt. Budget: under 8 minutes on a bare H200 (timeouts below).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
unset TRITON_INTERPRET  # real kernels where CUDA is present
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}" TOKENIZERS_PARALLELISM=false
log() { echo "gpu.sh: $*" | tee -a "$OUT/summary.txt"; }
: > "$OUT/summary.txt"

"$PY" - <<'EOF' 2>&1 | tee -a "$OUT/summary.txt"
import importlib, sys
missing = [m for m in ("torch", "transformers", "numpy", "scipy", "pydantic", "rich",
                       "matplotlib", "platformdirs") if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"gpu.sh: missing on this machine (pip install --no-deps cannot fetch them): {missing}")
import torch, transformers
if not torch.cuda.is_available():
    sys.exit("gpu.sh: no CUDA device: this script is for a GPU machine")
print(f"gpu.sh: torch {torch.__version__}, transformers {transformers.__version__}, "
      f"{torch.cuda.get_device_name(0)}")
EOF

log "installing shared/ and packages/pace-scheduler (--no-deps)"
# Offline: a build needs hatchling already there (no build isolation). If it is not, the
# sources run from the checkout instead (same code, no console script needed).
if ! "$PY" -m pip install --quiet --no-deps --no-build-isolation "$ROOT/shared" \
    "$ROOT/packages/pace-scheduler" >> "$OUT/summary.txt" 2>&1; then
  log "pip could not build offline; running from the checkout (PYTHONPATH)"
  export PYTHONPATH="$ROOT/shared/src:$ROOT/packages/pace-scheduler/src${PYTHONPATH:+:$PYTHONPATH}"
fi
PACE=("$PY" -m pace_scheduler.cli)

log "building a Qwen3-0.6B-shaped model with random weights in $OUT/model"
"$PY" - "$OUT/model" <<'EOF'
import sys, torch
from transformers import Qwen3Config, Qwen3ForCausalLM
cfg = Qwen3Config(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                  vocab_size=151936, max_position_embeddings=8192, tie_word_embeddings=True,
                  torch_dtype="bfloat16")
torch.manual_seed(0)
Qwen3ForCausalLM(cfg).to(torch.bfloat16).save_pretrained(sys.argv[1])
EOF

ENGINE=(--model "$OUT/model" --device cuda)
SIZES=(--num-blocks 4096 --page-size 64 --max-batch 128 --max-batch-tokens 2048)

log "profiling the engine's steps on CUDA"
timeout 150 "${PACE[@]}" profile "${ENGINE[@]}" --out "$OUT/profile" \
    --batch-sizes 1,4,16,32,64,128 --contexts 64,256,768 --new-tokens 5 2>&1 | tail -n 2 \
  | tee -a "$OUT/summary.txt"

# 0.5x of the T̂-derived SLO capacity: the served sweep's medium load in the demo (on the CPU
# engine that estimate overstated what the engine sustains; every fixed cap collapsed at 1.0x).
log "writing a trace at 0.5x the SLO capacity of the fitted engine"
"$PY" - "$OUT/profile/fit.json" "$OUT/trace.jsonl" <<'EOF' | tee -a "$OUT/summary.txt"
import sys
from dataclasses import replace
from pace_scheduler.latency import LatencyModel
from pace_scheduler.simulator import EngineConfig
from pace_scheduler.sweep import capacity, slos_for
from pace_scheduler.workload import WorkloadConfig, generate, write_trace
model = LatencyModel.load(sys.argv[1])
wl = WorkloadConfig(n_requests=80, prompt_mean=256, serial_mean=48, branch_mean=96, max_tokens=512)
ttft, tpot = slos_for(model, wl, 3.0, 20.0)
rate = 0.5 * capacity(model, wl, EngineConfig(max_num_seqs=128), tpot)
write_trace(sys.argv[2], generate(replace(wl, rate=rate, ttft_slo=ttft, tpot_slo=tpot), seed=0))
print(f"gpu.sh: per-token SLO {tpot * 1e3:.2f} ms, TTFT SLO {ttft * 1e3:.0f} ms, "
      f"rate {rate:.2f} req/s (0.5x SLO capacity), 80 requests")
EOF

log "serving the trace under each policy"
timeout 240 "${PACE[@]}" serve --trace "$OUT/trace.jsonl" --fit "$OUT/profile/fit.json" "${ENGINE[@]}" \
    "${SIZES[@]}" --policy irp-off --policy irp-eager --policy pace --policy cap-4 \
    --policy global-16 --out "$OUT/serve" 2>&1 | tee -a "$OUT/summary.txt"

log "gpu-marked tests"
if "$PY" -c "import pytest" 2>/dev/null; then
  (cd "$ROOT/packages/pace-scheduler" && timeout 60 "$PY" -m pytest -q -m gpu -p no:cacheprovider \
      > "$OUT/pytest.log" 2>&1) && log "gpu tests passed" || log "gpu tests: see pytest.log"
else
  log "pytest is not installed: gpu tests not run"
fi
log "done: $OUT"

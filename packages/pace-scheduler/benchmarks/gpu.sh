#!/usr/bin/env bash
# pace-scheduler on a lent GPU (an H200 with its preinstalled torch / triton / transformers):
# serve the same branching trace in transformers' continuous-batching engine on CUDA with and
# without Pace (IRP-Off, IRP-Eager, Pace, two fixed caps), after profiling that engine's steps.
#
#   bash packages/pace-scheduler/benchmarks/gpu.sh        # from anywhere in the checkout
#
# vLLM is not preinstalled there and nothing can be downloaded, so the vLLM plug-in is not run
# here: this is the transformers engine on the GPU. The model is Qwen3-0.6B-shaped with random
# weights (built from a config, saved locally: no hub). tools/gpu-prelude.sh installs the core
# and the package with pip --no-deps (or runs the source trees) and checks CUDA and the modules.
# Everything goes to $OUT (default reports/pace-scheduler/gpu): env.txt, model/, profile/
# (profile.jsonl, fit.json), trace.jsonl, serve/results.json, gpu-tests.txt, summary.txt.
# Budget: under 8 minutes on a bare H200 (timeouts below).
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" pace-scheduler \
  numpy scipy pydantic rich matplotlib platformdirs
log() { echo "gpu.sh: $*" | tee -a "$OUT/summary.txt"; }
cat "$OUT/env.txt" > "$OUT/summary.txt"
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
if gpu_tests 60; then log "gpu tests passed"; else log "gpu tests: see gpu-tests.txt"; fi
log "done: $OUT"

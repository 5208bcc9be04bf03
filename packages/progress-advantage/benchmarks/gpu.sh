#!/usr/bin/env bash
# Scoring cost of progress advantage (policy + reference passes) against one confidence pass
# (policy only) on a lent GPU, with Qwen2-0.5B-shaped random-weight models (bf16). One command:
#
#     bash packages/progress-advantage/benchmarks/gpu.sh        # from the repository root
#
# Uses the machine's preinstalled torch / transformers (installs shared/ and this package with
# --no-deps, so nothing is downloaded), writes bench.json and bench.md to $OUT (or to
# reports/progress-advantage/gpu), and takes a few minutes on an H200 (256 trajectories of 16
# solution lines, 5 paired repeats). Never sets TRITON_INTERPRET: this is the real device.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
out="${OUT:-$root/reports/progress-advantage/gpu}"
unset TRITON_INTERPRET
python -m pip install --quiet --no-deps "$root/shared" "$root/packages/progress-advantage"
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu.sh: no CUDA device here')"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
time progress-advantage bench --device cuda --shape 0.5b --trajectories 256 --steps 16 \
  --repeats 5 --no-progress --out "$out"
cat "$out/bench.md"

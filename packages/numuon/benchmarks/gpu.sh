#!/usr/bin/env bash
# numuon on a lent GPU, one command, < 8 minutes on one H200: the CUDA tests, then the step time
# of NuMuon against torch.optim.Muon (and AdamW, the Newton-Schulz reference) on 4096-wide
# matrices, and NuMuon's rank sweep on 4096 x 4096, as ratios to Muon in one process.
#
#   bash packages/numuon/benchmarks/gpu.sh          # from the repository root
#
# Uses the machine's own torch / transformers (pip install --no-deps of the core and numuon);
# writes bench.json and bench.md to $OUT (default: reports/numuon/bench-gpu).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${OUT:-$root/reports/numuon/bench-gpu}"
unset TRITON_INTERPRET  # never the Triton interpreter where CUDA is present
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"

python -m pip install --no-deps --quiet "$root/shared" "$here"
python - <<'PY'
import torch
assert torch.cuda.is_available(), "gpu.sh: no CUDA device"
print(f"gpu.sh: torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
PY
mkdir -p "$out"
if python -c "import pytest" 2>/dev/null; then
  (cd "$here" && timeout 180 python -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py) \
    2>&1 | tee "$out/gpu-tests.txt"
else
  echo "gpu.sh: pytest is not installed here; CUDA tests skipped" | tee "$out/gpu-tests.txt"
fi
timeout 360 numuon bench --device cuda --sizes 4096x11008,4096x4096 --repeats 10 \
  --no-progress --out "$out"

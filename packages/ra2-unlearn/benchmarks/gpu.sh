#!/usr/bin/env bash
# ra2-unlearn on a lent GPU, one command, < 8 minutes on one H200: the CUDA tests, the step
# time and peak memory of RA^2 against RMU (3 seeds, ratios in one run), and the demo's quick
# pipeline on CUDA.
#
#   bash packages/ra2-unlearn/benchmarks/gpu.sh          # from the repository root
#
# Uses the machine's own torch / transformers / accelerate (pip install --no-deps of the core and
# ra2-unlearn); writes to $OUT (default: reports/ra2-unlearn/gpu).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${OUT:-$root/reports/ra2-unlearn/gpu}"
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
timeout 150 ra2 bench --device cuda --seeds 0-2 --steps 20 --no-progress --out "$out/bench"
timeout 150 ra2 demo --quick --device cuda --no-progress --out "$out/demo-quick"

#!/usr/bin/env bash
# GPU check of pall-lns, one command (< 8 min on a bare H200 with its preinstalled torch 2.11,
# triton 3.6, transformers 5.17, Python 3.12): the LM selector on CUDA agrees with the CPU, and
# `pall demo --quick --device cuda` runs the LM (fine-tuning and decisions) on the GPU while SCIP
# stays on the CPU. Writes to $OUT when set. SCIP, HiGHS and trl are not preinstalled there and
# nothing can be downloaded: put their wheels (pyscipopt, highspy, trl) in $WHEELS (default
# ./wheels) beside the checkout.
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT="${OUT:-/tmp/pall-gpu}"
WHEELS="${WHEELS:-wheels}"
mkdir -p "$OUT"
python -m pip install --no-deps -q ./shared ./packages/pall-lns
if compgen -G "$WHEELS/*.whl" > /dev/null; then
  python -m pip install --no-deps -q "$WHEELS"/*.whl
fi
python -c "import pyscipopt, highspy, trl" || { echo "gpu.sh: pyscipopt, highspy and trl are needed (wheels in $WHEELS)"; exit 2; }
nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/gpu.txt"
(cd packages/pall-lns && python -m pytest -q -m gpu -p no:cacheprovider) 2>&1 | tee "$OUT/pytest-gpu.txt"
pall demo --quick --device cuda --out "$OUT/demo-cuda" 2>&1 | tail -20 | tee "$OUT/demo-cuda.txt"

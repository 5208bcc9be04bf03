#!/usr/bin/env bash
# debate-ledger on a GPU machine in one command (no network needed; a few minutes on an H200):
#   1. installs shared/ and this package with `pip install --no-deps` over the machine's own
#      torch/transformers (falls back to PYTHONPATH=checkout when pip cannot build offline);
#   2. the gpu-marked test: the LM family debates on CUDA, answers exact about seeds in any
#      call order;
#   3. `demo --quick --device cuda` (the tiny LM family on the GPU; scripted families on CPU).
# Everything lands in $OUT (default packages/debate-ledger/gpu-run): pip.log, pytest-gpu.log,
# demo.log and demo/ (results.json, report.md).
set -euo pipefail
pkg="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$pkg/../.." && pwd)"
dest="${OUT:-$pkg/gpu-run}"
python="${PYTHON:-python3}"
unset TRITON_INTERPRET
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"
mkdir -p "$dest"

"$python" -c 'import sys, torch, transformers
if not torch.cuda.is_available(): sys.exit("gpu.sh: torch sees no CUDA device")
print("gpu.sh:", torch.cuda.get_device_name(0), "torch", torch.__version__,
      "transformers", transformers.__version__)'

extra=()
if ! "$python" -m pip install -q --no-deps --no-index --no-build-isolation "$repo/shared" "$pkg" \
    >"$dest/pip.log" 2>&1; then
  echo "gpu.sh: pip install failed offline (see pip.log); using the checkout on PYTHONPATH"
  export PYTHONPATH="$repo/shared/src:$pkg/src${PYTHONPATH:+:$PYTHONPATH}"
  extra=(-p paperstack.testing)  # the plugin's pytest11 entry point needs an install
fi
(cd "$pkg" && "$python" -m pytest -q "${extra[@]}" -m gpu tests/test_gpu.py) | tee "$dest/pytest-gpu.log"
"$python" -m debate_ledger.cli demo --quick --device cuda --out "$dest/demo" 2>&1 | tee "$dest/demo.log"
echo "gpu.sh: results in $dest"

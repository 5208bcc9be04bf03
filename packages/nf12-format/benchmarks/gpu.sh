#!/usr/bin/env bash
# nf12-format on a bare GPU machine, one command: the gpu-marked tests (kernels compiled on CUDA,
# the quantizer on CUDA, no host sync on the hot path, >2^31-weight offsets), then the CUDA bench
# (fused GEMV/GEMM vs cuBLAS and the matched BF16 Triton kernel, decode vs memcpy and a GPU
# Huffman baseline, real layer shapes at batch 1, 2, 4, 8). Writes bench.json, bench.md and the
# test log to $OUT when it is set (default: packages/nf12-format/bench-cuda).
#
# Uses the machine's own torch/triton/transformers: installs shared/ and this package with
# `pip install --no-deps` (or, where pip cannot build them offline, runs them from the checkout
# via PYTHONPATH). Needs no network. Budget: under 8 minutes on an H200 (tuning included).
#
#   bash packages/nf12-format/benchmarks/gpu.sh            # full
#   QUICK=1 bash packages/nf12-format/benchmarks/gpu.sh    # two shapes, batches 1 and 4
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${OUT:-$here/bench-cuda}"
mkdir -p "$out"
unset TRITON_INTERPRET  # never the interpreter where CUDA is present
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"
py="${PYTHON:-python3}"

"$py" - <<'PY'
import importlib, sys
import torch
if not torch.cuda.is_available():
    sys.exit("gpu.sh: no CUDA device visible to torch; run this on the GPU machine")
missing = [m for m in ("triton", "transformers", "safetensors", "numpy", "scipy", "pydantic",
                       "platformdirs", "rich") if importlib.util.find_spec(m) is None]
if missing:
    sys.exit("gpu.sh: missing on this machine (no network to install them): " + ", ".join(missing))
import transformers, triton
print(f"gpu.sh: {torch.cuda.get_device_name(0)}; torch {torch.__version__}, triton "
      f"{triton.__version__}, transformers {transformers.__version__}")
PY

plugin=()
if "$py" -m pip install --quiet --no-deps --no-index --no-build-isolation "$root/shared" "$here" \
    >"$out/pip.log" 2>&1; then
  echo "gpu.sh: installed paperstack-core and nf12-format (pip --no-deps)"
  nf12=(nf12)
  command -v nf12 >/dev/null || nf12=("$py" -m nf12.cli)
else
  echo "gpu.sh: pip could not build offline (see $out/pip.log); running from the checkout"
  export PYTHONPATH="$root/shared/src:$here/src${PYTHONPATH:+:$PYTHONPATH}"
  plugin=(-p paperstack.testing)
  nf12=("$py" -m nf12.cli)
fi

start=$SECONDS
if "$py" -c "import pytest" 2>/dev/null; then
  # The bench runs next: its own test (test_bench_gpu) is left out here to save the time.
  (cd "$here" && timeout 200 "$py" -m pytest -q -m gpu -k "not cuda_bench" "${plugin[@]}" \
    -p no:cacheprovider tests) \
    2>&1 | tee "$out/gpu-tests.log"
  test "${PIPESTATUS[0]}" -eq 0 || { echo "gpu.sh: gpu tests failed"; exit 1; }
else
  echo "gpu.sh: pytest is not installed: gpu tests skipped (the bench still checks exactness)"
fi
echo "gpu.sh: tests took $((SECONDS - start)) s"

quick=()
[ "${QUICK:-0}" = "1" ] && quick=(--quick)
start=$SECONDS
timeout 270 "${nf12[@]}" bench --device cuda --repeats 5 --no-progress "${quick[@]}" --out "$out"
echo "gpu.sh: bench took $((SECONDS - start)) s; results in $out/bench.json and $out/bench.md"

#!/usr/bin/env bash
# saga-attention on a bare GPU machine (an H200 with its preinstalled torch / triton /
# transformers): the gpu-marked tests, then `saga bench --device cuda` (decode attention step
# at 8K-128K: SAGA + Atop-N triton kernels vs GQA + Atop-N, dense SDPA in bf16 and the
# flash-decoding triton kernel; Atop-N split select vs torch.topk). Under 8 minutes.
#
#   bash packages/saga-attention/benchmarks/gpu.sh        # from anywhere in the checkout
#   OUT=/some/dir bash .../gpu.sh                         # results there (default ./gpu-out)
#
# Writes $OUT/bench.json (the results.json schema), $OUT/bench.md, $OUT/gpu-tests.txt and
# $OUT/env.txt. Exits non-zero if a gpu test failed or the bench did not write bench.json.
set -u -o pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
pkg="$root/packages/saga-attention"
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
unset TRITON_INTERPRET  # compiled kernels here; the interpreter is for CPU-only machines
PY="${PYTHON:-python3}"
status=0

# The machine's own torch/triton/transformers stay; our two projects go on top without deps.
# Without a build backend or network, fall back to running from the source trees.
plugin=()
if ! "$PY" -m pip install --no-deps --no-build-isolation -q "$root/shared" "$pkg" \
    >"$OUT/install.txt" 2>&1; then
  echo "gpu.sh: pip install failed (see $OUT/install.txt); using PYTHONPATH" >&2
  export PYTHONPATH="$root/shared/src:$pkg/src${PYTHONPATH:+:$PYTHONPATH}"
  plugin=(-p paperstack.testing)
fi

{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || true
  "$PY" - <<'PY'
import sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)
for name in ("triton", "transformers", "numpy", "pydantic", "scipy", "paperstack", "saga_attention"):
    try:
        mod = __import__(name)
        print(name, getattr(mod, "__version__", "?"))
    except Exception as exc:  # noqa: BLE001 - a report, not a check
        print(name, "MISSING:", exc)
print("cuda available:", torch.cuda.is_available())
PY
} | tee "$OUT/env.txt"

if "$PY" -c "import pytest" 2>/dev/null; then
  (cd "$pkg" && timeout 300 "$PY" -m pytest "${plugin[@]}" -m gpu -q -rA tests) \
    2>&1 | tee "$OUT/gpu-tests.txt" || status=1
else
  echo "gpu.sh: pytest is not installed here; gpu tests skipped" | tee "$OUT/gpu-tests.txt"
fi

timeout 360 "$PY" -m saga_attention.cli bench --device cuda --out "$OUT/bench" --no-progress \
  2>&1 | tee "$OUT/bench.txt"
if [[ -f "$OUT/bench/bench.json" ]]; then
  cp "$OUT/bench/bench.json" "$OUT/bench/bench.md" "$OUT/"
else
  echo "gpu.sh: the bench wrote no bench.json" >&2
  status=1
fi
exit "$status"

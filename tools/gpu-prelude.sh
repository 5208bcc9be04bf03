# shellcheck shell=bash
# The setup every package's GPU run shares; sourced, not run, by packages/<dist>/benchmarks/gpu.sh:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" <dist> [module ...]
#
# The lent GPU machine is bare (its own torch, triton, transformers; Python 3.12; no network), so
# the core and the package go on top with `pip install --no-deps` and nothing of the machine's
# stack is replaced. Where pip cannot build offline, the run falls back to the source trees on
# PYTHONPATH (and pytest then loads paperstack's plugin by hand). Exits with one line when CUDA
# or one of the named modules is missing: wheels for those can be put in $WHEELS (default
# <repo>/.whl), which is installed first with --no-index.
#
# After sourcing: ROOT (the repository), PKG (packages/<dist>), OUT (from $OUT, else
# reports/<dist>/gpu; created), PY (python3, or $PYTHON), PYTEST_PLUGIN (an array for pytest);
# $OUT/env.txt records the machine and versions. Never sets TRITON_INTERPRET: the interpreter is
# for CPU-only machines, and where CUDA is present it would replace the compiled kernels.
#
#   gpu_tests SECONDS [pytest args ...]  the package's gpu-marked tests -> $OUT/gpu-tests.txt;
#                                        returns pytest's status (0 with a note without pytest,
#                                        and when no test is marked gpu: pytest's 5)
#   gpu_left                             seconds left of $GPU_BUDGET_S (the step's budget under
#                                        tools/gpu-sweep; 480 when unset), counted from sourcing
#
# Under tools/gpu-sweep (PAPERSTACK_GPU_SETUP_DONE=1) the sweep has installed .whl/ and put the
# source trees on PYTHONPATH once for every step, so nothing is installed here: the prelude only
# checks CUDA and the named modules and records env.txt (a few seconds of each step's budget).

set -euo pipefail
unset TRITON_INTERPRET
_dist="${1:?gpu-prelude.sh: name the package (its folder under packages/)}"
shift
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PKG="$ROOT/packages/$_dist"
[[ -d "$PKG" ]] || { echo "gpu-prelude.sh: no package folder $PKG" >&2; exit 2; }
OUT="${OUT:-$ROOT/reports/$_dist/gpu}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
PYTEST_PLUGIN=()
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}" TOKENIZERS_PARALLELISM=false

_gpu_start=$SECONDS
GPU_BUDGET_S="${GPU_BUDGET_S:-480}"
[[ "$GPU_BUDGET_S" =~ ^[0-9]+$ ]] || { echo "gpu-prelude.sh: GPU_BUDGET_S must be whole seconds, got '$GPU_BUDGET_S'" >&2; exit 2; }
export GPU_BUDGET_S
gpu_left() { echo $((GPU_BUDGET_S - (SECONDS - _gpu_start))); }

if [[ "${PAPERSTACK_GPU_SETUP_DONE:-0}" == "1" ]]; then
  # The core's wheel there registers paperstack's pytest plugin (entry point): no -p needed.
  echo "gpu.sh: using tools/gpu-sweep's setup (no install); budget ${GPU_BUDGET_S} s"
else
  _wheels="${WHEELS:-$ROOT/.whl}"
  : >"$OUT/pip.txt"
  if compgen -G "$_wheels/*.whl" >/dev/null &&
      ! "$PY" -m pip install --quiet --no-deps --no-index "$_wheels"/*.whl >>"$OUT/pip.txt" 2>&1; then
    echo "gpu.sh: pip could not install $_wheels/*.whl (see $OUT/pip.txt); going on without them"
  fi
  if "$PY" -m pip install --quiet --no-deps --no-build-isolation "$ROOT/shared" "$PKG" \
      >>"$OUT/pip.txt" 2>&1; then
    echo "gpu.sh: installed paperstack-core and $_dist (pip --no-deps)"
  else
    echo "gpu.sh: pip could not build offline (see $OUT/pip.txt); running from the source trees"
    export PYTHONPATH="$ROOT/shared/src:$PKG/src${PYTHONPATH:+:$PYTHONPATH}"
    PYTEST_PLUGIN=(-p paperstack.testing)
  fi
fi

"$PY" - "$@" <<'PY' | tee "$OUT/env.txt"
import importlib.util
import platform
import sys

try:
    import torch
except ImportError:
    sys.exit("gpu.sh: torch is not installed for this python; run this on the GPU machine")
if not torch.cuda.is_available():
    sys.exit("gpu.sh: no CUDA device visible to torch; run this on the GPU machine")
missing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"gpu.sh: missing here (no network; put their wheels in $WHEELS): {', '.join(missing)}")
print(f"gpu.sh: {torch.cuda.get_device_name(0)}; python {platform.python_version()}, "
      f"torch {torch.__version__} (CUDA {torch.version.cuda})")
for name in ("triton", "transformers", "trl", "accelerate", *sys.argv[1:]):
    if importlib.util.find_spec(name) is not None:
        print(f"gpu.sh: {name} {getattr(importlib.import_module(name), '__version__', '?')}")
PY

gpu_tests() {
  local seconds="$1"
  shift
  if ! "$PY" -c "import pytest" 2>/dev/null; then
    echo "gpu.sh: pytest is not installed here; gpu tests skipped" | tee "$OUT/gpu-tests.txt"
    return 0
  fi
  local status=0
  (cd "$PKG" && timeout "$seconds" "$PY" -m pytest -q -rA -m gpu -p no:cacheprovider \
    "${PYTEST_PLUGIN[@]}" "$@" tests) 2>&1 | tee "$OUT/gpu-tests.txt" || status=$?
  if [[ "$status" -eq 5 ]]; then
    echo "gpu.sh: no gpu-marked tests selected" | tee -a "$OUT/gpu-tests.txt"
    return 0
  fi
  return "$status"
}

#!/usr/bin/env bash
# One-shot GPU check for nf12-format: CUDA tests, then fused GEMV vs cuBLAS across sizes.
# Usage: benchmarks/gpu_bench.sh [OUT_DIR]   (needs nf12-format[torch,triton] and a CUDA GPU)
set -euo pipefail
out="${1:-reports/nf12-format/bench-cuda}"
here="$(cd "$(dirname "$0")/.." && pwd)"
env -u TRITON_INTERPRET python -m pytest -q -m gpu "$here/tests"
env -u TRITON_INTERPRET nf12 bench --device cuda --repeats 10 --out "$out"

#!/usr/bin/env bash
# mosa-rl on a GPU, one command, under 8 minutes on a bare H200 (no downloads):
#   bash packages/mosa-rl/benchmarks/gpu.sh        (from the repository root)
# 1. installs shared/ and the package with --no-deps over the machine's own torch/transformers
#    (trl 1.16, accelerate and datasets must be there too; wheels in .whl/ are installed first);
# 2. runs the gpu-marked tests (bf16 body with an fp32 head through trl on CUDA);
# 3. `mosa bench --device cuda --shape qwen2.5-0.5b`: a few GRPO steps of a random model with
#    Qwen2.5-0.5B's shape (bf16, 151,936-token vocabulary), MOSA vs token-KL step time and peak
#    memory as ratios, and the profile term's cost against K.
# Results go to $OUT (else a temporary folder). Never sets TRITON_INTERPRET.
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-deps --no-index .whl/*.whl
fi
python3 -m pip install -q --no-deps ./shared ./packages/mosa-rl
python3 - <<'PY'
import importlib, sys
missing = [m for m in ("trl", "accelerate", "datasets", "safetensors", "tokenizers")
           if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"gpu.sh: missing {', '.join(missing)}: put their wheels in .whl/ (no network here)")
import trl
print("torch", __import__("torch").__version__, "transformers", __import__("transformers").__version__, "trl", trl.__version__)
PY
export OMP_NUM_THREADS=4 TOKENIZERS_PARALLELISM=false
set -o pipefail
( cd packages/mosa-rl && timeout 180 python3 -m pytest -q -m gpu -p no:cacheprovider tests ) 2>&1 | tee "$OUT/gpu-tests.log"
timeout 300 mosa bench --device cuda --shape qwen2.5-0.5b --steps 4 --no-progress --out "$OUT/bench" 2>&1 | tee "$OUT/bench.log"
cp "$OUT/bench/bench.json" "$OUT/bench/bench.md" "$OUT/" 2>/dev/null || true
echo "gpu.sh: done; results in $OUT"

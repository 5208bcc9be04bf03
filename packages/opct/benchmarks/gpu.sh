#!/usr/bin/env bash
# opct on a GPU, one command, meant to take under 8 minutes on a bare H200 (no downloads):
#   bash packages/opct/benchmarks/gpu.sh        (from the repository root)
# 1. installs shared/ and the package with --no-deps over the machine's own torch/transformers
#    (trl 1.16, accelerate and datasets must be there too; wheels in .whl/ are installed first);
# 2. saves a random model with Qwen2.5-0.5B's body shape (hidden 896, 24 layers, 14 heads, 2 KV
#    heads) behind the toy world's character tokenizer, in bf16;
# 3. `opct bench --device cuda --model DIR`: a few OPCT steps against as many SFT steps on the
#    same pairs, step time and peak CUDA memory as ratios paired per repeat.
# Results go to $OUT (else a temporary folder). Never sets TRITON_INTERPRET.
# Not yet run on a GPU: no device was lent to the session that wrote it.
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-deps --no-index .whl/*.whl
fi
python3 -m pip install -q --no-deps ./shared ./packages/opct
export OMP_NUM_THREADS=4 TOKENIZERS_PARALLELISM=false
MODEL="$OUT/random-0.5b"
python3 - "$MODEL" <<'PY'
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from paperstack import tiny

tok = tiny.build_tokenizer(model_max_length=2048)
config = LlamaConfig(
    vocab_size=len(tok), hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
    num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=2048,
    tie_word_embeddings=True, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
    eos_token_id=tok.eos_token_id, torch_dtype="bfloat16",
)
torch.manual_seed(0)
model = LlamaForCausalLM(config).to(torch.bfloat16)
model.save_pretrained(sys.argv[1])
tok.save_pretrained(sys.argv[1])
print("saved", sum(p.numel() for p in model.parameters()) / 1e6, "M parameters")
PY
timeout 360 opct bench --device cuda --model "$MODEL" --repeats 3 --steps 3 --no-progress \
  --out "$OUT/bench" 2>&1 | tee "$OUT/bench.log"
cp "$OUT/bench/bench.json" "$OUT/bench/bench.md" "$OUT/" 2>/dev/null || true
echo "gpu.sh: done; results in $OUT"

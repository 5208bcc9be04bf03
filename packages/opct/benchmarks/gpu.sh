#!/usr/bin/env bash
# opct on a GPU, one command, meant to take under 8 minutes on a bare H200 (no downloads):
#   bash packages/opct/benchmarks/gpu.sh        (from anywhere in the checkout)
# 1. tools/gpu-prelude.sh installs shared/ and the package with --no-deps over the machine's own
#    torch/transformers (trl 1.16, accelerate and datasets must be there too; wheels in .whl/
#    are installed first); the package has no gpu-marked tests, its CUDA path is the bench;
# 2. saves a random model with Qwen2.5-0.5B's body shape (hidden 896, 24 layers, 14 heads, 2 KV
#    heads) behind the toy world's character tokenizer, in bf16;
# 3. `opct bench --device cuda --model DIR`: a few OPCT steps against as many SFT steps on the
#    same pairs, step time and peak CUDA memory as ratios paired per repeat.
# Results go to $OUT (default: reports/opct/gpu). Never sets TRITON_INTERPRET.
# Not yet run on a GPU: no device was lent to the session that wrote it.
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" opct \
  trl accelerate datasets safetensors
MODEL="$OUT/random-0.5b"
"$PY" - "$MODEL" <<'PY'
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
timeout 360 "$PY" -m opct.cli bench --device cuda --model "$MODEL" --repeats 3 --steps 3 --no-progress \
  --out "$OUT/bench" 2>&1 | tee "$OUT/bench.log"
cp "$OUT/bench/bench.json" "$OUT/bench/bench.md" "$OUT/"
echo "gpu.sh: done; results in $OUT"

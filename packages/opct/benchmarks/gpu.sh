#!/usr/bin/env bash
# opct on a lent GPU, one step of tools/gpu-sweep (budget GPU_BUDGET_S, 40 s there): the training
# step cost of OPCT's loss (the frozen initial model on the clean prompt as teacher, the policy on
# the wrapped prompt as student, reverse KL over the whole vocabulary at the response tokens,
# opct.consistency_divergence) against the BCT/SFT step (cross-entropy on the same response under
# the wrapped prompt), forward + backward, on a Qwen2.5-0.5B-shaped random-weight model in bf16
# (built on the GPU: no download), timed interleaved with paperstack.bench (median of per-repeat
# ratios, 95% interval). Sampling the on-policy response is not timed (it is the same for both).
#
#   bash packages/opct/benchmarks/gpu.sh                 # alone: GPU_BUDGET_S defaults to 480
#   python3 tools/gpu-sweep --only opct                  # as the sweep runs it
#
# Correctness row and claim: at theta = theta_0 with the same prompt on both sides the OPCT loss
# is exactly 0 (student and teacher are one function). The paper gives no cost number: no speed
# claim. Writes $OUT/bench.json + bench.md. The older `opct bench` (trl steps, minutes) is not
# run here.
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" opct transformers
"$PY" - "$ROOT" "$OUT" "$(gpu_left)" <<'PY'
import copy
import sys
import time

start = time.monotonic()
root, out, left = sys.argv[1], sys.argv[2], float(sys.argv[3])
deadline = start + left - 4
sys.path.insert(0, f"{root}/tools")

import torch
import torch.nn.functional as F
from _gpu import write_bench
from opct import consistency_divergence
from paperstack.bench import compare_speed
from paperstack.records import Claim, Row
from transformers import LlamaConfig, LlamaForCausalLM

dev, B, P_WRAP, P_CLEAN, R = "cuda", 8, 96, 64, 128
SHAPE = dict(vocab_size=151_936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
             num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=2048,
             tie_word_embeddings=True)  # fmt: skip
torch.manual_seed(0)
with torch.device(dev):
    student = LlamaForCausalLM(LlamaConfig(**SHAPE)).to(torch.bfloat16)
teacher = copy.deepcopy(student).eval().requires_grad_(False)  # theta_0, frozen
gen = torch.Generator(device=dev).manual_seed(0)
V = SHAPE["vocab_size"]
wrapped = torch.randint(0, V, (B, P_WRAP), device=dev, generator=gen)
clean = torch.randint(0, V, (B, P_CLEAN), device=dev, generator=gen)
response = torch.randint(0, V, (B, R), device=dev, generator=gen)
mask = torch.ones(B, R, dtype=torch.bool, device=dev)
mask[1::2, R // 2 :] = False  # ragged responses


def response_logits(model, prompt):
    ids = torch.cat([prompt, response], dim=1)
    return model(input_ids=ids).logits[:, prompt.shape[1] - 1 : -1]  # predicts each response token


def sft_step():
    student.zero_grad(set_to_none=True)
    logits = response_logits(student, wrapped)
    loss = F.cross_entropy(logits[mask].float(), response[mask])
    loss.backward()
    return loss.detach()


def opct_step():
    student.zero_grad(set_to_none=True)
    with torch.no_grad():
        target = response_logits(teacher, clean)
    loss = consistency_divergence(response_logits(student, wrapped), target, mask)
    loss.backward()
    return loss.detach()


with torch.no_grad():  # correctness first: it is cheap and must not depend on the budget
    same = consistency_divergence(response_logits(student, clean), response_logits(teacher, clean),
                                  mask).item()  # fmt: skip
rows = [Row(system="opct", metric="loss_same_prompt_at_theta0", value=same, n=1)]
claims = [Claim.compare(
    "opct_zero_at_theta0_same_prompt", "the OPCT loss is exactly 0 when student and teacher "
    "are the same weights on the same prompt", rows, ("opct", "loss_same_prompt_at_theta0", None),
    "le", 0.0, exact=True)]  # fmt: skip
cmp = compare_speed(
    {"sft (bct)": sft_step, "opct": opct_step}, baseline="sft (bct)", repeats=15, warmup=2,
    check=None, sync=torch.cuda.synchronize, seed=0,
    budget_s=max(2.0, deadline - time.monotonic() - 3), min_repeats=6,
)
rows += cmp.rows(split="0.5b")
config = {"shape": SHAPE, "batch": B, "wrapped_prompt": P_WRAP, "clean_prompt": P_CLEAN,
          "response": R, "dtype": "bfloat16", "bench": cmp.to_dict()}  # fmt: skip
write_bench(out, "opct", rows, claims, config,
            f"One training step's loss forward + backward, batch {B}, response {R} tokens, "
            "Qwen2.5-0.5B-shaped random model in bf16; `speedup_vs_sft (bct)` < 1 means the "
            "OPCT step costs more (it adds the teacher's forward).")
print(f"gpu.sh: opct {cmp.speedup('opct')[0]:.2f}x sft; same-prompt loss {same:g}; "
      f"{time.monotonic() - start:.0f} s", flush=True)
PY

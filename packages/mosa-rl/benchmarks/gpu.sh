#!/usr/bin/env bash
# mosa-rl on a lent GPU, one step of tools/gpu-sweep (budget GPU_BUDGET_S, 40 s there): the cost
# of MOSA's regulariser against GRPO's token-level KL (k3 on the sampled tokens, as trl computes
# it), forward and backward from the policy's logits, at Qwen2.5-0.5B's 151,936-token vocabulary
# in bf16 (8 completions x 512 tokens), timed interleaved with paperstack.bench (median of
# per-repeat ratios, 95% interval). K = 16 and 64 ranks (the notes' range).
#
#   bash packages/mosa-rl/benchmarks/gpu.sh              # alone: GPU_BUDGET_S defaults to 480
#   python3 tools/gpu-sweep --only mosa-rl               # as the sweep runs it
#
# Correctness row and claim: the MOSA term on the GPU (bf16 logits, fp32 softmax) against the
# paper's equation computed here in float64 on the CPU from the same logits, within 1e-4. The
# paper gives no cost number: no speed claim. Writes $OUT/bench.json + bench.md after each K
# (partial results survive the budget). The older `mosa bench` (GRPO steps of a 0.5B model,
# minutes) is not run here.
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" mosa-rl
"$PY" - "$ROOT" "$OUT" "$(gpu_left)" <<'PY'
import sys
import time

start = time.monotonic()
root, out, left = sys.argv[1], sys.argv[2], float(sys.argv[3])
deadline = start + left - 4
sys.path.insert(0, f"{root}/tools")

import torch
from _gpu import write_bench
from mosa_rl import mosa_loss
from paperstack.bench import compare_speed
from paperstack.records import Claim, Row

dev, B, T, V = "cuda", 8, 512, 151_936
gen = torch.Generator(device=dev).manual_seed(0)
policy = (torch.randn(B, T, V, device=dev, generator=gen) * 3).to(torch.bfloat16)
ref = (policy.float() + 0.5 * torch.randn(B, T, V, device=dev, generator=gen)).to(torch.bfloat16)
mask = torch.ones(B, T, dtype=torch.bool, device=dev)
mask[:, T * 3 // 4 :] = torch.arange(B, device=dev)[:, None] % 2 == 0  # ragged completions
tokens = torch.randint(0, V, (B, T), device=dev, generator=gen)
rows, claims = [], []
config = {"batch": B, "tokens": T, "vocab": V, "dtype": "bfloat16", "ks": []}


def token_kl():
    """trl's GRPO KL: k3 = exp(ref - logp) - (ref - logp) - 1 on the sampled tokens."""
    z = policy.detach().requires_grad_(True)
    logp = z.float().log_softmax(-1).gather(-1, tokens[..., None])[..., 0]
    with torch.no_grad():
        ref_logp = ref.float().log_softmax(-1).gather(-1, tokens[..., None])[..., 0]
    d = ref_logp - logp
    loss = ((d.exp() - d - 1) * mask).sum() / mask.sum()
    loss.backward()
    return z.grad


def profile64(z, m, k):
    """P-bar in float64: the mean over masked tokens of the sorted top-k probabilities + tail."""
    p = z[m].double().softmax(-1)
    top = p.topk(k, dim=-1).values
    return torch.cat([top, (1 - top.sum(-1, keepdim=True)).clamp_min(0)], -1).mean(0)


def mosa(k):
    def run():
        z = policy.detach().requires_grad_(True)
        mosa_loss(z, ref, mask, k).backward()
        return z.grad
    return run


for k in (16, 64):
    split = f"K={k}"
    if time.monotonic() > deadline - 8:
        print(f"gpu.sh: no time left for {split}; stopping", flush=True)
        break
    cmp = compare_speed(
        {"token-kl (k3)": token_kl, "mosa": mosa(k)}, baseline="token-kl (k3)", repeats=15,
        warmup=2, check=None, sync=torch.cuda.synchronize, seed=0,
        budget_s=max(2.0, (deadline - time.monotonic()) / 2 - 3), min_repeats=6,
    )
    rows += cmp.rows(split=split)
    # The same term from the paper's equation in float64 on the CPU, from the same (bf16)
    # logits of one completion: KL(P || Q) of the mean sorted top-K profiles plus tail.
    with torch.no_grad():
        got = mosa_loss(policy[:1], ref[:1], mask[:1], k).item()
        P, Q = (profile64(z[:1].cpu(), mask[:1].cpu(), k) for z in (policy, ref))
        want = (P * (P / Q.clamp_min(1e-10)).log()).sum().item()
    rows.append(Row(system="mosa", metric="abs_err_vs_float64_cpu", value=abs(got - want), n=1,
                    split=split))  # fmt: skip
    claims.append(Claim.compare(
        f"mosa_gpu_matches_float64_{k}", f"the MOSA term on the GPU is within 1e-4 of float64 "
        f"on the CPU (K = {k})", rows, ("mosa", "abs_err_vs_float64_cpu", split), "le", 1e-4,
        exact=True))  # fmt: skip
    config["ks"].append(k)
    config[f"bench_{k}"] = cmp.to_dict()
    write_bench(out, "mosa-rl", rows, claims, config,
                f"MOSA's regulariser vs GRPO's token KL, forward + backward from [{B}, {T}, {V}] "
                "bf16 logits; `speedup_vs_token-kl (k3)` < 1 means MOSA's term costs more.")
    print(f"gpu.sh: {split}: mosa {cmp.speedup('mosa')[0]:.2f}x token-kl", flush=True)
print(f"gpu.sh: done in {time.monotonic() - start:.0f} s", flush=True)
PY

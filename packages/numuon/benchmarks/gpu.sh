#!/usr/bin/env bash
# numuon on a lent GPU, one step of tools/gpu-sweep (budget GPU_BUDGET_S, 40 s there): the
# optimizer step time of NuMuon (rank ratio 1/4, the package default, and 1/16) against
# torch.optim.Muon on Llama-3-8B-shaped matrices (4096 x 4096 attention, 14336 x 4096 MLP), fp32
# parameters, timed interleaved with paperstack.bench (median of per-repeat ratios, 95% interval);
# plus the correctness row: NuMuon's first update against the exact top-k SVD of the gradient (a
# planted spectrum with a gap at k, so the top-k subspace is well defined).
#
#   bash packages/numuon/benchmarks/gpu.sh                 # alone: GPU_BUDGET_S defaults to 480
#   python3 tools/gpu-sweep --only numuon                  # as the sweep runs it
#
# The paper gives no step-time number (it names "SVD overhead" as a limit), so there is no speed
# claim: the rows are the measurement. Writes $OUT/bench.json and bench.md after each shape
# (partial results survive the budget). The older `numuon bench` (tests + rank sweep, minutes)
# is not run here.
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" numuon
"$PY" - "$ROOT" "$OUT" "$(gpu_left)" <<'PY'
import math
import sys
import time

start = time.monotonic()
root, out, left = sys.argv[1], sys.argv[2], float(sys.argv[3])
deadline = start + left - 4  # the interpreter's exit and the sweep's bookkeeping
sys.path.insert(0, f"{root}/tools")

import torch
from _gpu import write_bench
from numuon import NuMuon
from paperstack.bench import compare_speed
from paperstack.records import Row

dev = "cuda"
SHAPES = [(4096, 4096), (14336, 4096)]
RANKS = {"numuon-r1/4": 0.25, "numuon-r1/16": 1 / 16}
rows, config = [], {"shapes": [list(s) for s in SHAPES], "ranks": RANKS, "dtype": "float32"}


def planted(shape, k, gen):
    """A gradient with singular values 1 (top k) and 0.01 below: a clear gap at k."""
    m, n = shape
    u, _ = torch.linalg.qr(torch.randn(m, min(m, n), device=dev, generator=gen))
    v, _ = torch.linalg.qr(torch.randn(n, min(m, n), device=dev, generator=gen))
    s = torch.full((min(m, n),), 0.01, device=dev)
    s[:k] = 1.0
    return (u * s) @ v.T, u[:, :k] @ v[:, :k].T


for shape in SHAPES:
    split = f"{shape[0]}x{shape[1]}"
    if time.monotonic() > deadline - 12:
        print(f"gpu.sh: no time left for {split}; stopping", flush=True)
        break
    gen = torch.Generator(device=dev).manual_seed(0)
    grads = [torch.randn(shape, device=dev, generator=gen) for _ in range(2)]
    params, opts = {}, {}
    for name in ("muon", *RANKS):
        params[name] = torch.nn.Parameter(torch.zeros(shape, device=dev))
        if name == "muon":
            opts[name] = torch.optim.Muon([params[name]], lr=0.02)
        else:
            opts[name] = NuMuon([params[name]], lr=0.02, rank_schedule=RANKS[name])
    calls = {"n": 0}

    def stepper(name):
        def step():
            params[name].grad = grads[calls["n"] % 2]
            opts[name].step()
            calls["n"] += 1
        return step

    cmp = compare_speed(
        {name: stepper(name) for name in params}, baseline="muon", repeats=15, warmup=2,
        check=None, sync=torch.cuda.synchronize, seed=0,
        budget_s=max(2.0, (deadline - time.monotonic()) / 2 - 4), min_repeats=6,
    )
    rows += cmp.rows(split=split)
    # Correctness: one NuMuon step from zero on a planted gradient is -lr * s * U_k V_k^T.
    for name, ratio in RANKS.items():
        k = math.ceil(ratio * min(shape))
        g, target = planted(shape, k, gen)
        p = torch.nn.Parameter(torch.zeros(shape, device=dev))
        opt = NuMuon([p], lr=1.0, rank_schedule=ratio)
        p.grad = g
        opt.step()
        update = -p.detach()
        scale = (update.norm() / target.norm()).item()  # Muon's shape scale, whatever it is
        err = ((update / scale - target).norm() / target.norm()).item()
        rows.append(Row(system=name, metric="update_rel_err_vs_svd", value=err, n=1,
                        split=split, unit="relative Frobenius"))
    write_bench(out, "numuon", rows, [], config,
                "NuMuon's step against torch.optim.Muon on the GPU (fp32 parameters), "
                "interleaved repeats; `speedup_vs_muon` < 1 means NuMuon's step is slower.")
    print(f"gpu.sh: {split}: " + ", ".join(
        f"{n} {cmp.speedup(n)[0]:.2f}x" for n in RANKS), flush=True)
print(f"gpu.sh: done in {time.monotonic() - start:.0f} s; {out}/bench.json", flush=True)
PY

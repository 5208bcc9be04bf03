#!/usr/bin/env bash
# pall-lns on a lent GPU, one step of tools/gpu-sweep (budget GPU_BUDGET_S, 60 s there): the LM
# selector's decision latency on CUDA against the CPU of the same machine (SCIP stays on the CPU
# either way; what a GPU changes is how fast the selector answers, which decides whether the
# asynchronous deployment keeps up with the sub-MIPs). Same model, same contexts, timed
# interleaved with paperstack.bench (median of per-repeat ratios, 95% interval), fp32 on both so
# the decisions can be compared: the correctness row counts decisions that differ (claim: none).
# Two sizes: the package's own selector (paperstack.tiny's `tiny` preset, character tokenizer),
# then, if the budget allows, a Qwen2.5-0.5B-shaped random model behind the same tokenizer.
#
#   bash packages/pall-lns/benchmarks/gpu.sh             # alone: GPU_BUDGET_S defaults to 480
#   python3 tools/gpu-sweep --only pall-lns              # as the sweep runs it
#
# Contexts are synthetic (random search states of a 5-operator pool, the text the trained selector
# reads); the weights are random, which does not change the cost. The paper gives no latency
# number: no speed claim. The older script's `pall demo --quick` on both devices (minutes) and
# the gpu-marked tests are not run here (`pytest -m gpu` runs those). Writes $OUT/bench.json +
# bench.md after each size (partial results survive the budget).
source "$(dirname "${BASH_SOURCE[0]}")/../../../tools/gpu-prelude.sh" pall-lns transformers
"$PY" - "$ROOT" "$OUT" "$(gpu_left)" <<'PY'
import random
import sys
import time

start = time.monotonic()
root, out, left = sys.argv[1], sys.argv[2], float(sys.argv[3])
deadline = start + left - 4
sys.path.insert(0, f"{root}/tools")

import numpy as np
import torch
from _gpu import write_bench
from pall_lns.context import Context, Event
from pall_lns.lm import LMSelector
from paperstack import tiny
from paperstack.bench import compare_speed, set_threads
from transformers import LlamaConfig, LlamaForCausalLM

dev, N_OPS = "cuda", 5
N_CTX = {"tiny": 8, "0.5b": 2}  # contexts per call: a 0.5B forward on the CPU is slow
threads = set_threads()
rng = random.Random(0)
labels = tuple(f"op{i}" for i in range(N_OPS))


def context():
    history = tuple(
        Event(rng.randrange(N_OPS), rng.uniform(-0.1, 0.5), rng.random() < 0.4,
              rng.choice(["optimal", "timelimit", "infeasible"]), rng.uniform(0.01, 2.0))
        for _ in range(rng.randrange(0, 6))
    )  # fmt: skip
    return Context(
        n_ops=N_OPS, op_labels=labels, n_vars=rng.randrange(500, 20_000),
        n_rows=rng.randrange(200, 10_000), density=rng.uniform(1e-4, 1e-2),
        int_frac=rng.random(), progress=rng.random(), iteration=rng.randrange(200),
        stagnation=rng.randrange(20), k_frac=rng.uniform(0.05, 0.5), gap=rng.random(),
        history=history, op_mean=tuple(rng.uniform(-0.1, 0.5) for _ in range(N_OPS)),
        op_count=tuple(rng.randrange(40) for _ in range(N_OPS)),
    )  # fmt: skip


all_contexts = [context() for _ in range(max(N_CTX.values()))]
tok = tiny.build_tokenizer(model_max_length=4096)
SIZES = {
    "tiny": lambda: tiny.build_model("tiny", tok, 0),
    "0.5b": lambda: LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tok), hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=4096,
        tie_word_embeddings=True, pad_token_id=tok.pad_token_id)),
}  # fmt: skip
rows, claims = [], []
config = {"n_ops": N_OPS, "contexts": N_CTX, "threads": threads, "sizes": []}


def decide(selector, contexts):
    return lambda: np.array([int(np.argmax(selector.scores(c))) for c in contexts])


for size, build in SIZES.items():
    if time.monotonic() > deadline - (15 if size == "tiny" else 30):
        print(f"gpu.sh: no time left for {size}; stopping", flush=True)
        break
    torch.manual_seed(0)
    model = build().float().eval()
    cpu = LMSelector(model, tok, N_OPS, path=out, device="cpu")
    cuda = LMSelector(__import__("copy").deepcopy(model), tok, N_OPS, path=out, device=dev)
    cmp = compare_speed(
        {"cpu": decide(cpu, all_contexts[: N_CTX[size]]),
         "cuda": decide(cuda, all_contexts[: N_CTX[size]])}, baseline="cpu", repeats=15, warmup=2,
        check=lambda o, r: float(np.sum(o != r)), tolerance=0.0, sync=torch.cuda.synchronize,
        seed=0, budget_s=max(2.0, (deadline - time.monotonic()) / 2 - 6), min_repeats=6,
    )
    split = size
    rows += cmp.rows(split=split)
    claims.append(cmp.correctness_claim("cuda", rows, split=split,
                                        id=f"lm_cuda_decisions_match_cpu_{size}"))  # fmt: skip
    config["sizes"].append(size)
    config[f"bench_{size}"] = cmp.to_dict()
    write_bench(out, "pall-lns", rows, claims, config,
                f"LM selector decisions on synthetic contexts (per call, by size: {N_CTX}), "
                f"fp32, {threads} CPU threads for the CPU side; `speedup_vs_cpu` > 1 means "
                "CUDA answers faster; "
                "`max_abs_diff_vs_cpu` is the number of differing decisions.")
    print(f"gpu.sh: {size}: cuda {cmp.speedup('cuda')[0]:.2f}x cpu", flush=True)
print(f"gpu.sh: done in {time.monotonic() - start:.0f} s", flush=True)
PY

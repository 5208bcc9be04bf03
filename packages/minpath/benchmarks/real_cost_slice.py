"""Timed slice of ``minpath demo --real`` (its cost per step, README "Real-model arm"): LoRA SFT
of SmolLM2-135M-Instruct at batch 8 on 64 validation-seed (99) raw and MinPath traces, 1 and 5
steps each (the per-step cost is the difference over 4 steps), then greedy generation of 16
validation problems (evaluation seed 1001) by the last model; CPU and wall seconds into OUT
(default slice.json). One thread. Run (about 10 minutes at load 3-6 on the shared CPU):

    OMP_NUM_THREADS=1 python packages/minpath/benchmarks/real_cost_slice.py /tmp/slice.json
"""

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
from minpath.demo import compress_traces, training_sets
from minpath.finetune import generate
from minpath.real import REAL, _Arm
from minpath.traces import verbose_traces


def main(out_path: str) -> None:
    torch.set_num_threads(1)
    s = REAL
    arm = _Arm(s.model, s, "cpu", print)
    traces = verbose_traces(64, seed=99, split="train", task=s.task)
    comp = compress_traces(traces, s.task)
    sets, ratio = training_sets(comp, 99)
    out: dict = {"ratio": ratio}
    model = tok = None
    for name in ("raw", "minpath"):
        pairs = [(t.question, x) for t, x in zip(traces, sets[name], strict=True)]
        for steps in (1, 5):
            arm.settings = replace(s, steps=steps)
            c0, w0 = time.process_time(), time.perf_counter()
            model, tok, res = arm.train(pairs, 99)
            out[f"{name}_{steps}"] = {
                "cpu": time.process_time() - c0,
                "wall": time.perf_counter() - w0,
                "trainer_wall": res.seconds,
                "loss": res.losses,
            }
            print(name, steps, out[f"{name}_{steps}"], flush=True)
    test = verbose_traces(16, seed=1001, split="test", task=s.task)
    c0, w0 = time.process_time(), time.perf_counter()
    gens, _ = generate(model, tok, [t.question for t in test], max_new_tokens=s.max_new_tokens)
    out["gen16_minpath5"] = {
        "cpu": time.process_time() - c0,
        "wall": time.perf_counter() - w0,
        "tokens": sum(g.tokens for g in gens),
    }
    print(out["gen16_minpath5"])
    Path(out_path).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "slice.json")

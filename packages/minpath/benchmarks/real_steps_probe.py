"""Validation probe for shrinking ``minpath demo --real`` to the hour (issue #51): does SmolLM2
fine-tuned by LoRA on raw verbose traces for fewer steps still solve the task (the arm's premise)?

Validation seed 99 only (its 600 training CoTs; 60 problems of evaluation seed 1001, the run's own
validation problems): no reported seed or test problem is touched. Trains ``raw`` for STEPS
steps at REAL's batch, learning rate and LoRA, times it, then decodes the problems greedily and
writes accuracy, tokens and seconds into OUT. One thread. Run:

    OMP_NUM_THREADS=1 python packages/minpath/benchmarks/real_steps_probe.py 100 /tmp/probe.json
"""

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
from minpath.real import REAL, _Arm


def main(steps: int, out_path: str) -> None:
    torch.set_num_threads(1)
    s = replace(REAL, steps=steps, validation_test=60)
    arm = _Arm(s.model, s, "cpu", print)
    c0, w0 = time.process_time(), time.perf_counter()
    out = arm.seed(s.validation_seed, s.validation_eval_seed, s.validation_test, ("raw",))
    raw = out["systems"]["raw"]
    result = {"steps": steps, "n_test": s.validation_test, "accuracy": raw["accuracy"],
              "tokens": raw["tokens"], "train_seconds": raw["train_seconds"],
              "gen_seconds": raw["gen_seconds"], "losses": raw.get("losses"),
              "cpu": time.process_time() - c0, "wall": time.perf_counter() - w0}  # fmt: skip
    print(result, flush=True)
    Path(out_path).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])

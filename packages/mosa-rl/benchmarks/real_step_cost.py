"""Cost of one system's GRPO steps in ``mosa demo --real`` (README, "The real-model arm"):
wall seconds and peak resident memory (sampled every 50 ms) of ``mosa_rl.demo.run_system`` on
validation seed 100 with the declared configuration (``demo.REAL``), STEPS steps. One thread.
Run one system at a time (each peaks near 18 GB). From a checkout with the mosa-rl venv:

    OMP_NUM_THREADS=1 PYTHONPATH=shared/src:packages/mosa-rl/src \\
        python packages/mosa-rl/benchmarks/real_step_cost.py mosa 1
"""

import dataclasses
import json
import sys
import threading
import time

import torch
from mosa_rl import demo

SYSTEMS = {
    "mosa": demo.System(demo.MOSA, mosa_beta=3.0),
    "tokenkl": demo.System(demo.TOKENKL, beta=0.04),
    "nokl": demo.System(demo.NOKL),
}


def main(name: str, steps: int) -> None:
    torch.set_num_threads(1)
    config = dataclasses.replace(demo.REAL, grpo_steps=steps)
    peak = [0]

    def watch() -> None:
        while True:
            with open("/proc/self/statm") as f:
                peak[0] = max(peak[0], int(f.read().split()[1]) * 4096)
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    _, _, log = demo.run_system(config, SYSTEMS[name], demo.REAL.validation_seed, config.model)
    print(json.dumps({"system": name, "steps": steps, "seconds": log["seconds"],
                      "peak_rss_gb": peak[0] / 1e9,
                      "rewards": [h.get("reward") for h in log["history"]]}))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))

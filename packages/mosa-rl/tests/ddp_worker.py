"""Run by ``accelerate launch --num_processes 2`` from test_distributed.py (not a test itself).

Two GRPO steps of MOSATrainer on a micro model, on the CPU with gloo. Every call of the pooled
profile is recorded (this rank's sums, the all-reduced sums, the token count, the KL), and at
the end a checksum of the trained weights, into ``<out>/rank<r>.json``.
"""

import json
import sys
from pathlib import Path

import mosa_rl.trainer as trainer_module
import torch
from mosa_rl import MOSATrainer
from mosa_rl.loss import pooled_profile
from test_trainer import _config  # this script's folder is on sys.path

from paperstack import tasks, tiny
from paperstack.testing import end_distributed


def main(out: Path) -> None:
    torch.set_num_threads(1)
    calls: list[dict] = []

    def recording(local, global_sums, tokens):
        p = pooled_profile(local, global_sums, tokens)
        calls.append(
            {
                "local": local.detach().tolist(),
                "global": global_sums.detach().tolist(),
                "tokens": float(tokens),
                "pooled": p.detach().tolist(),
            }
        )
        return p

    trainer_module.pooled_profile = recording
    tok = tiny.build_tokenizer()
    model = tiny.build_model("micro", tok, seed=0)
    task = tasks.get("countdown")
    data = task.to_dataset(task.generate(16, seed=0), conversational=True)

    def reward(completions, **_):
        return [-float(len(str(c))) for c in completions]

    # the unit tests' trainer config; per-device batch 4 (x 2 ranks = one group of 4 per rank)
    args = _config(out, per_device_train_batch_size=4, ddp_backend="gloo")
    trainer = MOSATrainer(model, reward, args, train_dataset=data, processing_class=tok)
    trainer.train()
    rank = trainer.accelerator.process_index
    weights = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
    record = {
        "rank": rank,
        "world": trainer.accelerator.num_processes,
        "calls": calls,
        "kl": [h["mosa/kl"] for h in trainer.state.log_history if "mosa/kl" in h],
        "weights": [float(weights.sum()), float(weights.abs().sum())],
    }
    (out / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    end_distributed()  # a clean exit for every rank

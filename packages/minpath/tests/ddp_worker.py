"""Run by ``accelerate launch --num_processes 2`` from test_distributed.py (not a test itself).

Three SFT steps of :func:`minpath.sft` on MinPath traces with a micro model, on the CPU with
gloo; each rank writes its world size, its losses and a checksum of its final weights into
``<out>/rank<r>.json``.
"""

import json
import sys
from pathlib import Path

import torch
from minpath import SFTSettings, sft, verbose_traces
from minpath.demo import compress_traces

from paperstack import tiny
from paperstack.tasks import Arithmetic
from paperstack.testing import end_distributed


def main(out: Path) -> None:
    torch.set_num_threads(1)
    tok = tiny.build_tokenizer()
    model = tiny.build_model("micro", tok, seed=0)
    comp = compress_traces(verbose_traces(24, seed=0), Arithmetic(min_ops=2, max_ops=3))
    pairs = [(t.question, text) for t, text in zip(comp.traces, comp.minpath, strict=True)]
    settings = SFTSettings(steps=3, batch_size=4, learning_rate=1e-2, logging_steps=1)
    result = sft(model, tok, pairs, settings, ddp_backend="gloo")
    trainer = result.extra["trainer"]
    rank = trainer.accelerator.process_index
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    record = {
        "rank": rank,
        "world": trainer.accelerator.num_processes,
        "steps": result.steps,
        "losses": result.losses,
        "weights": [float(weights.sum()), float(weights.abs().sum())],
    }
    (out / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    end_distributed()  # a clean exit for every rank

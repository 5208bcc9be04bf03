"""A few unlearning steps under ``accelerate launch --num_processes 2 --cpu`` (gloo).

Each rank builds the same micro model, runs :class:`ra2_unlearn.UnlearnTrainer` for a few
steps for each method named and writes what it ended with to ``OUT/<method>-rank<r>.json``:
the world size the Trainer saw, the steps it took, the per-tensor sums of the trained weights.
The test checks that both ranks took part and ended with identical weights (DDP averaged their
gradients).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import torch
from ra2_unlearn.config import UnlearnConfig
from ra2_unlearn.data import ForgetRetainCollator, ForgetRetainDataset, encode, fact_splits
from ra2_unlearn.trainer import UnlearnTrainer, build_anchor_bank, training_arguments

from paperstack import tiny
from paperstack.tasks import FactWorld
from paperstack.testing import end_distributed


def run(out: Path, method: str) -> None:
    tok = tiny.build_tokenizer()
    model = tiny.build_model("micro", tok, seed=0)
    ref = copy.deepcopy(model)
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    splits = fact_splits(FactWorld(n_entities=6), n_forget=2)
    # A random micro model predicts no forget label, so RA^2 attracts every forget token here
    # (attract="all") to have something to train on; the anchors still exclude by support.
    extra = {"attract": "all"} if method == "ra2" else {}
    cfg = UnlearnConfig(method=method, layer=1, k=2, **extra)  # type: ignore[arg-type]
    anchors = build_anchor_bank(ref, tok, splits.retain, cfg) if method == "ra2" else None
    data = ForgetRetainDataset(encode(tok, splits.forget), encode(tok, splits.retain))
    args = training_arguments(3, 1e-2, 2, seed=0, output_dir=str(out / f"trainer-{method}"))
    trainer = UnlearnTrainer(
        model, ref, cfg, args, data, ForgetRetainCollator(int(tok.pad_token_id)), anchors=anchors
    )
    trainer.train()
    rank = trainer.args.process_index
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, start[n])]
    record = {
        "rank": rank,
        "world_size": trainer.args.world_size,
        "backend": str(torch.distributed.get_backend())
        if torch.distributed.is_initialized()
        else None,
        "steps": trainer.state.global_step,
        "changed": changed,
        "weights": [float(p.detach().double().sum()) for p in model.parameters()],
        "losses": [part["loss"] for part in trainer.loss_parts],
    }
    (out / f"{method}-rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    torch.set_num_threads(1)
    for name in sys.argv[2].split(","):
        run(Path(sys.argv[1]), name)
    end_distributed()  # a clean exit for every rank

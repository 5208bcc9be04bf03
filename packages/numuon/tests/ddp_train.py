"""Train a micro Llama with NuMuon for a few steps, alone or under ``accelerate launch``.

Run by ``test_integration.py``: once as ``accelerate launch --multi_gpu --num_processes 2`` with
``Accelerator(cpu=True)`` (DDP over gloo on the CPU; NuMuon shards its SVD work across the two
ranks) and once as a plain single process on
the same global batches. Rank 0 writes ``OUT/weights.safetensors`` (the final weights) and
``OUT/run.json`` (how many update directions each rank computed, and whether the ranks ended
with identical weights).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from accelerate import Accelerator
from numuon import Cosine, NuMuon, param_groups
from numuon.toy import ModelShape, build_llama
from safetensors.torch import save_file

from paperstack.testing import end_distributed
from paperstack.tiny import build_tokenizer

GLOBAL_BATCH = 8
STEPS = 3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True)
    rank, world = accelerator.process_index, accelerator.num_processes
    tok = build_tokenizer()
    model = build_llama(ModelShape(32, 64, 2, 2), tok, 16, seed=0)
    opt = NuMuon(
        param_groups(model), lr=0.02, rank_schedule=Cosine(1.0, 0.25, STEPS), adamw_lr=1e-3
    )
    model, opt = accelerator.prepare(model, opt)
    data = torch.randint(
        8, len(tok), (GLOBAL_BATCH * STEPS, 17), generator=torch.Generator().manual_seed(1)
    )
    local = GLOBAL_BATCH // world
    model.train()
    for step in range(STEPS):
        start = step * GLOBAL_BATCH + rank * local
        x = data[start : start + local]
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        accelerator.backward(loss)
        opt.step()
    inner = accelerator.unwrap_model(model)
    checksum = torch.stack([p.detach().double().sum() for p in inner.parameters()])
    checksums = accelerator.gather(checksum.reshape(1, -1))
    computed = accelerator.gather(torch.tensor([opt.optimizer.directions_computed]))
    if accelerator.is_main_process:
        args.out.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous() for k, v in inner.state_dict().items()}
        state.pop("lm_head.weight", None)  # tied to the embedding
        save_file(state, str(args.out / "weights.safetensors"))
        report = {
            "world": world,
            "backend": str(accelerator.state.backend),
            "directions_computed": computed.tolist(),
            "ranks_identical": bool((checksums == checksums[0]).all()),
            "matrices": sum(
                len(g["params"]) for g in opt.optimizer.param_groups if g["use_numuon"]
            ),
        }
        (args.out / "run.json").write_text(json.dumps(report))
    accelerator.wait_for_everyone()
    end_distributed()  # the gloo group torn down before exit, with a watchdog (no trackers here)


if __name__ == "__main__":
    main()

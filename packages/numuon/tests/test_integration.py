"""NuMuon inside the ecosystem: the Hugging Face Trainer and torch.distributed (DDP)."""

import torch
import torch.distributed as dist
from numuon import NuMuon, param_groups
from numuon.toy import ModelShape, build_llama

from paperstack.tiny import build_tokenizer


def _micro():
    tok = build_tokenizer()
    return build_llama(ModelShape(32, 64, 1, 2), tok, 16, seed=0), tok


def test_hf_trainer_takes_numuon_through_optimizers(tmp_path):
    from transformers import Trainer, TrainingArguments

    model, tok = _micro()
    gen = torch.Generator().manual_seed(0)
    rows = [
        {"input_ids": ids, "labels": ids}
        for ids in torch.randint(8, len(tok), (8, 16), generator=gen).tolist()
    ]
    before = model.model.layers[0].mlp.up_proj.weight.detach().clone()
    opt = NuMuon(param_groups(model), lr=0.02, rank_schedule=0.5, adamw_lr=1e-3)
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=4,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=rows, optimizers=(opt, None))
    trainer.train()
    after = model.model.layers[0].mlp.up_proj.weight.detach()
    assert not torch.equal(before, after)
    assert int(opt.state[model.model.layers[0].mlp.up_proj.weight]["step"]) == 2


def test_ddp_replica_steps_like_a_single_process(tmp_path):
    """Under DDP gradients are all-reduced before step(); NuMuon's step is then the same
    deterministic function on every rank (here: one rank, compared with no DDP at all)."""
    single, _ = _micro()
    replica, _ = _micro()
    ids = torch.randint(8, 100, (2, 16), generator=torch.Generator().manual_seed(1))
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        ddp = torch.nn.parallel.DistributedDataParallel(replica)
        opts = [NuMuon(param_groups(m), rank_schedule=0.5, seed=3) for m in (single, replica)]
        for model, opt in zip((single, ddp), opts, strict=True):
            for _ in range(2):
                opt.zero_grad()
                model(input_ids=ids, labels=ids).loss.backward()
                opt.step()
    finally:
        dist.destroy_process_group()
    for a, b in zip(single.parameters(), replica.parameters(), strict=True):
        torch.testing.assert_close(a, b)

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


# ------------------------------------------------------------------ accelerate launch, 2 ranks


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_script(tmp_path, name, launcher):
    """Start ``ddp_train.py`` under ``launcher``; returns the process and its output folder."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("ddp_train.py")
    out = tmp_path / name
    # HF_HOME in the test's folder: no accelerate config of the user's changes the launch.
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HOME": str(tmp_path / "hf"),
    }
    cmd = [sys.executable, *launcher, str(script), "--out", str(out)]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    return proc, out


def _finish(proc, out):
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output[-3000:]
    return out


def test_accelerate_launch_two_ranks_shards_the_svd_work_and_matches_one_process(tmp_path):
    """``accelerate launch --num_processes 2`` on the CPU (gloo): each rank computes the update
    of half the matrices, the all-gather leaves both ranks with identical weights, and those
    equal a single process stepping on the same global batches.

    ``--multi_gpu`` selects accelerate's multi-process launcher (torch.distributed.run), which
    is what starts two processes here; ``--cpu`` would pick its single-process launcher (or
    mpirun). The script's ``Accelerator(cpu=True)`` then makes it DDP over gloo on the CPU.
    """
    import json

    from safetensors.torch import load_file

    launch = [
        "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(_free_port()),
    ]  # fmt: skip
    # Both at once: the single-process reference runs while the two ranks start up.
    two_proc, two_out = _start_script(tmp_path, "two", launch)
    one_proc, one_out = _start_script(tmp_path, "one", [])
    one = _finish(one_proc, one_out)
    two = _finish(two_proc, two_out)
    report = json.loads((two / "run.json").read_text())
    alone = json.loads((one / "run.json").read_text())
    assert report["world"] == 2
    assert report["backend"] == "gloo"
    assert alone["world"] == 1
    assert report["ranks_identical"]
    steps = 3
    total = report["matrices"] * steps
    assert sum(report["directions_computed"]) == total  # every update computed exactly once
    assert alone["directions_computed"] == [total]
    assert max(report["directions_computed"]) <= total // 2 + steps  # split about evenly
    a, b = load_file(two / "weights.safetensors"), load_file(one / "weights.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=2e-5, rtol=1e-4, msg=key)

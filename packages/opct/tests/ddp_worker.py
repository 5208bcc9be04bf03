"""Run by ``accelerate launch --num_processes 2`` from test_distributed.py (not a test itself).

Two OPCT steps of :class:`opct.OPCTTrainer` on the micro base model, on the CPU with gloo. Each
rank records the prompts it generated for, the divergence it logged, a checksum of the trained
student and of the frozen teacher before and after, into ``<out>/rank<r>.json``.
"""

import json
import sys
from pathlib import Path

import torch
from opct import OPCTConfig, OPCTTrainer
from opct.harness import pairs_dataset
from opct.pairs import mixed_pairs
from opct.world import AlignmentWorld

from paperstack import tiny
from paperstack.testing import end_distributed


def _checksum(model: torch.nn.Module) -> list[float]:
    flat = torch.cat([p.detach().flatten().double() for p in model.parameters()])
    return [float(flat.sum()), float(flat.abs().sum())]


def main(model_dir: str, out: Path) -> None:
    torch.set_num_threads(1)
    model, tok = tiny.load(model_dir)
    start = _checksum(model)
    trainer = OPCTTrainer(
        model,
        args=OPCTConfig(
            output_dir=str(out / "trainer"), max_steps=2, per_device_train_batch_size=2,
            max_completion_length=8, learning_rate=1e-2, use_cpu=True, report_to="none",
            save_strategy="no", logging_steps=1, disable_tqdm=True, ddp_backend="gloo",
            seed=0,
        ),
        train_dataset=pairs_dataset(mixed_pairs(AlignmentWorld(), 16, seed=0)),
        processing_class=tok,
    )  # fmt: skip
    teacher_before = _checksum(trainer.teacher_model)
    seen: list[str] = []
    generate = trainer._generate_and_score_completions

    def recording(inputs):  # what this rank trains on
        seen.extend(str(x["prompt"][-1]["content"]) for x in inputs)
        return generate(inputs)

    trainer._generate_and_score_completions = recording  # type: ignore[method-assign]
    trainer.train()
    rank = trainer.accelerator.process_index
    record = {
        "rank": rank,
        "world": trainer.accelerator.num_processes,
        "steps": trainer.state.global_step,
        "prompts": seen,
        "divergence": [
            h["opct/divergence"] for h in trainer.state.log_history if "opct/divergence" in h
        ],
        "start": start,
        "student": _checksum(trainer.model),
        "teacher_before": teacher_before,
        "teacher_after": _checksum(trainer.teacher_model),
    }
    (out / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
    end_distributed()  # a clean exit for every rank

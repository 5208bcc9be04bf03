"""Run by ``accelerate launch --num_processes 2`` from test_distributed.py (not a test itself).

Two GRPO steps through trl's GRPOTrainer (multi-turn rollout_func) and two DPO steps through the
episode DPOTrainer, data-parallel on the CPU with gloo, on a micro auditor. Each rank plays its
own share of the episodes; at the end it writes the world size, its episode count and a
checksum of the trained weights into ``<out>/<objective>-rank<r>.json``.
"""

import json
import sys
from pathlib import Path

import torch
from probe_audit import domains
from probe_audit.auditors import ModelAuditor
from probe_audit.policy import check_episode
from probe_audit.training import TrainConfig
from probe_audit.trl_training import train_with_trl

from paperstack import tiny
from paperstack.testing import end_distributed


def _reward(episode, domain, target):
    episode.violations = check_episode(episode, domain)
    return {"total": float(sum(len(e.text) for e in episode.events if e.kind == "user"))}


def main(out: Path) -> None:
    torch.set_num_threads(1)
    worlds = {n: domains.get(n) for n in domains.NAMES}
    targets = {n: domains.rule_target(n) for n in domains.NAMES}
    for objective in ("grpo", "dpo"):
        tok = tiny.build_tokenizer()
        model = tiny.build_model("micro", tok, 0)
        start = float(sum(p.detach().abs().sum() for p in model.parameters()))
        auditor = ModelAuditor(model, tok, seed=0, max_turn_tokens=6)
        config = TrainConfig(objective=objective, steps=2, scenarios_per_step=1, group_size=2,
                             max_turns=2, seed=0)  # fmt: skip
        result = train_with_trl(auditor, worlds, targets, _reward, config)
        trainer = result["trainer"]
        rank = trainer.accelerator.process_index
        weights = torch.cat([p.detach().flatten() for p in model.parameters()])
        record = {
            "rank": rank,
            "world": trainer.accelerator.num_processes,
            "steps": trainer.state.global_step,
            "episodes": result["rollout"].episodes,
            "start": start,
            "weights": [float(weights.sum()), float(weights.abs().sum())],
        }
        (out / f"{objective}-rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    end_distributed()  # a clean exit for every rank

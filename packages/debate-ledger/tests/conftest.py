from __future__ import annotations

import numpy as np
import pytest
from debate_ledger.families import Family, ScriptedDebater
from debate_ledger.questions import shipped_mcq
from debate_ledger.runner import DebateConfig, run_debates


@pytest.fixture(scope="session")
def small_ledger(tmp_path_factory: pytest.TempPathFactory):
    """A ledger of three scripted families (40 questions, 3 agents, rounds 0..2, 1 resample)."""
    path = tmp_path_factory.mktemp("ledger") / "ledger.jsonl"
    questions = shipped_mcq()
    cfg = DebateConfig(agents=3, rounds=2, resamples=1, batch_size=64)
    for fam in (
        Family("a", accuracy=0.7, conformity=0.2, parse_fail=0.05),
        Family("b", accuracy=0.5, conformity=0.8),
        Family("c", accuracy=0.6, conformity=0.5, parse_fail=0.1),
    ):
        run_debates(
            ScriptedDebater.for_questions(fam, questions),
            questions,
            path,
            family=fam.name,
            config=cfg,
        )
    return path


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)

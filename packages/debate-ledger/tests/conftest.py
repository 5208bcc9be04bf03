from __future__ import annotations

import os

# One torch thread in the tests (and in the transformers serve they start, which inherits it):
# on shared cores more threads only spin.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pytest
from debate_ledger.families import Profile, ScriptedDebater
from debate_ledger.questions import shipped_mcq
from debate_ledger.runner import DebateConfig, run_debates

THREE = (
    ("fa", Profile("a", accuracy=0.7, conformity=0.2, parse_fail=0.05)),
    ("fb", Profile("b", accuracy=0.5, conformity=0.8)),
    ("fc", Profile("c", accuracy=0.6, conformity=0.5, parse_fail=0.1, position_bias=0.2)),
)


@pytest.fixture(scope="session")
def small_ledger(tmp_path_factory: pytest.TempPathFactory):
    """A ledger of three scripted models in three families (40 questions, 3 agents, rounds
    0..2, 2 resamples: the vote baseline is call-matched)."""
    path = tmp_path_factory.mktemp("ledger") / "ledger.jsonl"
    questions = shipped_mcq()
    cfg = DebateConfig(agents=3, rounds=2, resamples=2, max_new_tokens=64)
    for family, profile in THREE:
        run_debates(
            ScriptedDebater.for_questions(profile, questions),
            questions,
            path,
            family=family,
            config=cfg,
        )
    return path


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)

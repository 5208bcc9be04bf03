"""The paperstack conformance suite (paperstack.testing.conformance) on progress-advantage's
command line."""

from dataclasses import replace

import pytest
from progress_advantage.cli import cli

from paperstack.testing.conformance import conformance_tests


@pytest.fixture(autouse=True)
def _smallest_demo(monkeypatch):
    """Every in-process demo run of the suite (--quick, and each checkpoint's) shrunk to
    seconds: a smaller MDP sweep, and fewer and shorter problems, candidates and rollouts."""
    from progress_advantage import demo

    quick = demo.DemoConfig.quick()
    lm = replace(quick.lm, rl=replace(quick.lm.rl, max_completion_length=16), n_test=4,
                 n_candidates=2, mc_trajectories=2, max_new_tokens=16)  # fmt: skip
    small = replace(quick, mdp=replace(quick.mdp, max_iterations=100, groups=20, val_groups=10),
                    lm=lm)  # fmt: skip
    monkeypatch.setattr(demo.DemoConfig, "quick", classmethod(lambda cls: small))


test_conformance = conformance_tests(cli)

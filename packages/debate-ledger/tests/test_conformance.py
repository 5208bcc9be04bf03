"""The paperstack conformance suite (paperstack.testing.conformance) on debate-ledger's commands."""

import dataclasses
import functools

import pytest
from debate_ledger import demo as demo_module
from debate_ledger.cli import cli

from paperstack.testing.conformance import conformance_tests

test_conformance = conformance_tests(cli)

_QUICK = demo_module.DemoConfig.quick


@pytest.fixture(autouse=True)
def _smaller_quick_demo(monkeypatch):
    """The quick demo on 4 questions, fewer simulated debates and 8-token answers (a random
    checkpoint never stops on its own), so each ``demo --model CKPT`` costs seconds; the
    protocol (agents, rounds, resamples) is the quick one's."""
    small = dataclasses.replace(_QUICK(), n_facts=2, n_mcq=2, sim_debates=2000, resume_questions=1)
    monkeypatch.setattr(demo_module.DemoConfig, "quick", classmethod(lambda cls: small))
    short = functools.partial(demo_module.DebateConfig, max_new_tokens=8)
    monkeypatch.setattr(demo_module, "DebateConfig", short)

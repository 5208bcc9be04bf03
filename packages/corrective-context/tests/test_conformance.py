"""The paperstack conformance suite (paperstack.testing.conformance) on corrective-context's
command line."""

from dataclasses import replace

import pytest
from corrective_context import demo
from corrective_context.cli import cli

from paperstack.testing.conformance import conformance_tests


@pytest.fixture(autouse=True)
def _small_quick_demo(monkeypatch):
    """In-process runs of demo --quick: 12 queries, a 40-step learner (as tests/test_demo.py)."""
    small = replace(demo.QUICK, queries=12, learner=replace(demo.QUICK.learner, steps=40))
    monkeypatch.setattr(demo, "QUICK", small)


test_conformance = conformance_tests(cli)

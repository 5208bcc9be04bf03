"""The paperstack conformance suite (paperstack.testing.conformance) on saga's command line."""

import pytest
from saga_attention import demo
from saga_attention.cli import cli
from test_demo import MICRO

from paperstack.testing.conformance import conformance_tests


@pytest.fixture(autouse=True)
def _micro_quick(monkeypatch):
    """In-process runs (demo --quick, convert --quick) use the micro config: seconds each."""
    monkeypatch.setattr(demo, "QUICK", MICRO)


test_conformance = conformance_tests(cli)

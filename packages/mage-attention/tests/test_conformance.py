"""The paperstack conformance suite (paperstack.testing.conformance) on mage's command line."""

from dataclasses import replace

import pytest
from mage_attention import demo
from mage_attention.cli import cli
from test_demo import MICRO

from paperstack.testing.conformance import conformance_tests


@pytest.fixture(autouse=True)
def _micro_quick(monkeypatch):
    """In-process runs of demo --quick use the micro config: seconds each."""
    monkeypatch.setattr(demo, "QUICK", MICRO)
    monkeypatch.setattr(demo, "FULL", replace(MICRO, sequences=4))


test_conformance = conformance_tests(cli)

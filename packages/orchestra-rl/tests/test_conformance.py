"""The paperstack conformance suite (paperstack.testing.conformance) on orchestra's commands."""

import pytest
from orchestra_rl import cli as cli_module

from paperstack.testing.conformance import conformance_tests

test_conformance = conformance_tests(cli_module.cli)


@pytest.fixture(autouse=True)
def _two_sizes_two_updates(monkeypatch):
    """The quick demo on N = 2 and 4 with two REINFORCE updates (tests/test_demo.py's run)."""
    monkeypatch.setattr(cli_module, "SIZES", (2, 4))
    monkeypatch.setitem(cli_module.QUICK, "iterations", 2)

"""The paperstack conformance suite (paperstack.testing.conformance) on probe's commands."""

import pytest
from probe_audit import cli as cli_module

from paperstack.testing.conformance import conformance_tests

test_conformance = conformance_tests(cli_module.cli)


@pytest.fixture(autouse=True)
def _smaller_quick_demo(monkeypatch):
    """The quick protocol with an auditor pre-trained 3 steps and a 2-step target (the sizes of
    tests/test_demo.py's run), so the suite's demo costs seconds."""
    small = {"pretrain_steps": 3, "eval_per_domain": 1, "turn_tokens": 8, "target_steps": 2}
    for key, value in small.items():
        monkeypatch.setitem(cli_module.QUICK, key, value)

"""The paperstack conformance suite (paperstack.testing.conformance) on nf12's command line."""

import pytest
from nf12 import demo
from nf12.cli import cli

from paperstack.testing.conformance import conformance_tests


@pytest.fixture(autouse=True)
def _small_quick_demo(monkeypatch):
    """The in-process runs use a smaller --quick: one small Qwen3, two repeats, one group."""
    small = demo.DemoConfig(qwen_hidden=64, qwen_layers=1, qwen_vocab=64, repeats=2, groups=(8,))
    monkeypatch.setattr(demo, "QUICK", small)


test_conformance = conformance_tests(cli)

"""The paperstack conformance suite (paperstack.testing.conformance) on opct's command line."""

from dataclasses import replace

import pytest
from opct.cli import cli

from paperstack.testing.conformance import conformance_tests


@pytest.fixture(autouse=True)
def _smallest_demo(monkeypatch):
    """Every in-process demo, bench and sweep run of the suite (--quick, and each
    checkpoint's) shrunk to seconds: one step of two pairs, a few short evaluation items
    (tests/test_demo.py runs the real --quick)."""
    from opct import demo

    small = replace(demo.QUICK, pairs=8, steps=1, batch_size=2, max_completion_length=8,
                    capability_n=4, tries=1, eval_facts=2)  # fmt: skip
    monkeypatch.setattr(demo, "QUICK", small)


test_conformance = conformance_tests(cli)

"""The paperstack conformance suite (paperstack.testing.conformance) on ra2's command line."""

from __future__ import annotations

from dataclasses import replace

import pytest
from ra2_unlearn.cli import cli

from paperstack.testing import conformance


@pytest.fixture(autouse=True)
def _smallest_demo(micro_demo, monkeypatch):
    """Every in-process demo run of the suite (--quick, and each checkpoint's) shrunk to
    seconds: the micro setting, RA^2 alone, one learning rate."""
    from ra2_unlearn import demo

    monkeypatch.setattr(demo, "QUICK", replace(micro_demo, methods=("ra2",), lr_grid=(1.0,)))


test_conformance = conformance.conformance_tests(cli)

"""The paperstack conformance suite (paperstack.testing.conformance) on numuon's command line."""

from dataclasses import replace

import pytest
from numuon import demo
from numuon.cli import cli

from paperstack.testing.conformance import conformance_tests


@pytest.fixture(autouse=True)
def _small_quick_demo(monkeypatch):
    """In-process runs of demo --quick: small batches and evaluation sets (seconds a checkpoint;
    the declared --steps 2 --seeds 0 cut the training)."""
    small = replace(demo.QUICK, batch_size=2, train_examples=64, val_sequences=4,
                    calib_sequences=4, reductions=(0.4, 0.6, 0.8))  # fmt: skip
    monkeypatch.setattr(demo, "QUICK", small)


test_conformance = conformance_tests(cli)

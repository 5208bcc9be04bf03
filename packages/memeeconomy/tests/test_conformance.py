"""The paperstack conformance suite (paperstack.testing.conformance) on memeeconomy's commands."""

import pytest
from memeeconomy import demo as demo_module
from memeeconomy.cli import cli

from paperstack.testing.conformance import conformance_tests

test_conformance = conformance_tests(cli)


@pytest.fixture(autouse=True)
def _smaller_verifier_splits(monkeypatch):
    """The quick demo's verifiers on a fifth of its examples, so the suite's run costs seconds."""
    monkeypatch.setattr(
        demo_module, "QUICK_SIZES", {"train": 48, "val": 16, "test_id": 20, "test_ho": 20}
    )

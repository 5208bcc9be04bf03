"""The paperstack conformance suite (paperstack.testing.conformance) on pall's commands."""

import dataclasses

import pytest
from pall_lns import lm
from pall_lns.cli import cli

from paperstack.testing.conformance import conformance_tests

test_conformance = conformance_tests(cli)


@pytest.fixture(autouse=True)
def _two_step_quick_recipe(monkeypatch):
    """The quick demo fine-tunes its selector LM for 2 steps instead of 20, so each checkpoint's
    ``demo --model CKPT`` costs seconds (the declared args already shrink the solving)."""
    monkeypatch.setattr(lm, "QUICK_RECIPE", dataclasses.replace(lm.QUICK_RECIPE, steps=2))

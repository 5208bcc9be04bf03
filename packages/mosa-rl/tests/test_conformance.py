"""The paperstack conformance suite (paperstack.testing.conformance) on mosa's command line."""

from dataclasses import replace

import pytest
from mosa_rl.cli import cli

from paperstack.testing.conformance import conformance_tests


@pytest.fixture(autouse=True)
def _smallest_demo(tiny_demo, monkeypatch):
    """Every in-process demo run of the suite (--quick, and each checkpoint's) shrunk to
    seconds: conftest's tiny setting with --quick's fixed betas (no validation grid)."""
    from mosa_rl import demo

    fixed = {k: getattr(demo.QUICK, k) for k in ("token_kl_beta", "mosa_beta", "mosa_forward_beta")}
    monkeypatch.setattr(demo, "QUICK", replace(tiny_demo, **fixed))


test_conformance = conformance_tests(cli)

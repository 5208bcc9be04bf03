"""The paperstack conformance suite (paperstack.testing.conformance) on pace's command line."""

import pytest
from pace_scheduler.cli import cli

from paperstack.testing.conformance import conformance_tests


@pytest.fixture(autouse=True)
def _tiny(tiny_demo):
    """In-process runs use the tiny demo plan and the micro toy model (tests/conftest.py)."""


test_conformance = conformance_tests(cli)

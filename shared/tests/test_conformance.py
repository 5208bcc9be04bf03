"""The paperstack conformance suite on the core's own command line (``paperstack``)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from paperstack.cli import cli
from paperstack.testing.conformance import conformance_tests

test_conformance = conformance_tests(cli)

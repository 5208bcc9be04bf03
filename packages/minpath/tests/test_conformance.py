"""The paperstack conformance suite (paperstack.testing.conformance) on minpath's command line."""

import pytest
from minpath.cli import cli

from paperstack.testing.conformance import conformance_tests

# demo-quick, full-disk and the model checks fine-tune in this process: see conftest.frozen_heap
pytestmark = pytest.mark.usefixtures("frozen_heap")

test_conformance = conformance_tests(cli)

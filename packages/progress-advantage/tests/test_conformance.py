"""The paperstack conformance suite (paperstack.testing.conformance) on progress-advantage's command line."""

from progress_advantage.cli import cli

from paperstack.testing.conformance import conformance_tests

test_conformance = conformance_tests(cli)

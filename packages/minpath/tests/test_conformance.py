"""The paperstack conformance suite (paperstack.testing.conformance) on minpath's command line."""

from minpath.cli import cli

from paperstack.testing.conformance import conformance_tests

test_conformance = conformance_tests(cli)

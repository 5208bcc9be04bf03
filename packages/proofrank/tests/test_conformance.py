"""The paperstack conformance suite (paperstack.testing.conformance) on proofrank's commands."""

from proofrank.cli import cli

from paperstack.testing.conformance import conformance_tests

test_conformance = conformance_tests(cli)

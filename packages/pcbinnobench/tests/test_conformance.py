"""The paperstack conformance suite (paperstack.testing.conformance) on pcbinnobench's commands."""

from pcbinnobench.cli import cli

from paperstack.testing.conformance import conformance_tests

test_conformance = conformance_tests(cli)

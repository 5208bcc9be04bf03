"""The paperstack conformance suite (paperstack.testing.conformance) on this command line: --help,
demo --quick (also killed with SIGTERM), --out, --model on every checkpoint of the zoo, as
declared in pyproject.toml's [tool.paperstack.conformance]."""

from paperstack.testing.conformance import conformance_tests

from tmpl_import.cli import cli

test_conformance = conformance_tests(cli)

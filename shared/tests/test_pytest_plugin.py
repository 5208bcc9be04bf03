"""paperstack's pytest plugin (the ``pytest11`` entry point) leaves other projects alone.

Installed with any package, the plugin is loaded in every pytest run of that environment. A
project that does not opt in runs its own ``slow`` and ``gpu`` tests as it decides; one that sets
``paperstack_skip_slow_gpu = true`` gets the skipping the packages of this repository use. Each
case runs pytest on a fresh project (pytester, in process: the installed entry-point plugins are
loaded as in a user's shell).
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

TESTS = """
import pytest

@pytest.mark.slow
def test_slow():
    pass

@pytest.mark.gpu
def test_gpu():
    pass

def test_plain():
    pass
"""

MARKERS = """
markers = [
  "slow: the project's own slow tests",
  "gpu: the project's own gpu tests",
]
"""


def _project(pytester: pytest.Pytester, opt_in: str | None) -> None:
    ini = '[tool.pytest.ini_options]\naddopts = "--strict-markers --strict-config"\n' + MARKERS
    if opt_in is not None:
        ini += f"paperstack_skip_slow_gpu = {opt_in}\n"
    pytester.makefile(".toml", pyproject=ini)
    pytester.makepyfile(test_two=TESTS)


def test_a_project_that_does_not_opt_in_runs_its_slow_and_gpu_tests(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester, None)
    result = pytester.runpytest("--trace-config")
    result.assert_outcomes(passed=3)
    # the plugin was loaded, and skipped nothing
    result.stdout.fnmatch_lines(["*registered*paperstack.testing*"])


def test_opting_out_explicitly_is_the_same(pytester: pytest.Pytester) -> None:
    _project(pytester, "false")
    pytester.runpytest().assert_outcomes(passed=3)


def test_a_project_that_opts_in_skips_slow_unless_asked(pytester: pytest.Pytester) -> None:
    from paperstack.testing import cuda_available

    _project(pytester, "true")
    gpu = 1 if cuda_available() else 0
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1 + gpu, skipped=2 - gpu)
    result.stdout.fnmatch_lines(["*slow: run with --paperstack-run-slow or -m slow*"])
    pytester.runpytest("--paperstack-run-slow").assert_outcomes(passed=2 + gpu, skipped=1 - gpu)
    pytester.runpytest("-m", "slow").assert_outcomes(passed=1, deselected=2)


def test_a_project_with_its_own_run_slow_option_still_starts(pytester: pytest.Pytester) -> None:
    """The pytest docs' own recipe (a conftest adding ``--run-slow``) must not clash with ours."""
    _project(pytester, None)
    pytester.makeconftest(
        """
import pytest

def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False)

def pytest_collection_modifyitems(config, items):
    if not config.getoption("--run-slow"):
        for item in items:
            if item.get_closest_marker("slow"):
                item.add_marker(pytest.mark.skip(reason="own rule"))
"""
    )
    pytester.runpytest().assert_outcomes(passed=2, skipped=1)
    pytester.runpytest("--run-slow").assert_outcomes(passed=3)

"""The GitHub workflows use action versions that still run on GitHub today."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

WORKFLOWS = sorted((Path(__file__).resolve().parents[2] / ".github" / "workflows").glob("*.yml"))

#: The oldest major of each action that runs on GitHub's current runners (Node 24); actions/cache
#: below 4.2 no longer works at all (the cache service it spoke to was retired).
MINIMUM = {
    "actions/checkout": 6,
    "actions/setup-python": 6,
    "actions/cache": 5,
    "actions/upload-artifact": 7,
    "actions/download-artifact": 8,
}


def _uses() -> list[tuple[str, str, str]]:
    found = []
    for wf in WORKFLOWS:
        for name, ref in re.findall(r"uses:\s*([\w./-]+)@([\w./-]+)", wf.read_text()):
            found.append((wf.name, name, ref))
    return found


def test_there_are_workflows() -> None:
    assert {w.name for w in WORKFLOWS} >= {"ci.yml", "release.yml"}
    assert _uses()


@pytest.mark.parametrize(("workflow", "action", "ref"), _uses())
def test_actions_are_on_a_current_major(workflow: str, action: str, ref: str) -> None:
    if action not in MINIMUM:
        assert action == "pypa/gh-action-pypi-publish"
        assert ref == "release/v1"  # the branch its maintainers tell users to follow
        return
    major = re.match(r"v(\d+)", ref)
    assert major, f"{workflow}: {action}@{ref} is not a version tag"
    assert int(major.group(1)) >= MINIMUM[action], f"{workflow}: {action}@{ref} is too old"


def test_isolation_runs_only_for_packages_with_a_cli() -> None:
    ci = next(w for w in WORKFLOWS if w.name == "ci.yml").read_text()
    assert "--with-cli" in ci
    assert "needs.plan.outputs.with_cli" in ci

"""Fixtures for the tests of tools/: throw-away git repositories shaped like this one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent
ROOT = TOOLS.parent
sys.path.insert(0, str(TOOLS))

GIT_ENV = {
    "GIT_AUTHOR_NAME": "paperstack tests",
    "GIT_AUTHOR_EMAIL": "tests@example.invalid",
    "GIT_COMMITTER_NAME": "paperstack tests",
    "GIT_COMMITTER_EMAIL": "tests@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@pytest.fixture(autouse=True)
def _git_identity(monkeypatch, tmp_path):
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    # No user or system git configuration leaks in (signing, hooks, default branch...).
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))


def run_tool(name: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``tools/<name>`` the way a person does (a separate process)."""
    return subprocess.run(
        [sys.executable, str(TOOLS / name), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=os.environ.copy(),
    )


class Repo:
    """A git repository with the layout of paperstack: shared/ plus packages/<dist>/."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(self.root), *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def commit(self, message: str) -> None:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)

    def add_package(
        self, dist: str, import_name: str | None = None, version: str = "0.1.0"
    ) -> None:
        imp = import_name or dist.replace("-", "_")
        self.write(
            f"packages/{dist}/pyproject.toml",
            f"""\
            [project]
            name = "{dist}"
            dynamic = ["version"]
            dependencies = ["paperstack-core>=0.1,<1"]

            [project.scripts]
            {dist} = "{imp}.cli:main"

            [tool.hatch.version]
            path = "src/{imp}/__init__.py"

            [tool.hatch.build.targets.wheel]
            packages = ["src/{imp}"]
            """,
        )
        self.write(f"packages/{dist}/src/{imp}/__init__.py", f'__version__ = "{version}"\n')
        self.write(
            f"packages/{dist}/CHANGELOG.md", f"# Changelog\n\nAll notable changes to {dist}.\n"
        )

    def release(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_tool("release", *args, "--root", str(self.root))

    def changed(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_tool("changed-packages", *args, "--root", str(self.root))


@pytest.fixture
def repo(tmp_path) -> Repo:
    """shared/ (paperstack-core 0.1.0) and the packages alpha and alpha-vision, on main."""
    r = Repo(tmp_path / "repo")
    r.root.mkdir()
    r.git("init", "-q", "-b", "main")
    r.write(
        "shared/pyproject.toml",
        """\
        [project]
        name = "paperstack-core"
        dynamic = ["version"]

        [project.scripts]
        paperstack = "paperstack.cli:main"

        [tool.hatch.version]
        path = "src/paperstack/__init__.py"

        [tool.hatch.build.targets.wheel]
        packages = ["src/paperstack"]
        """,
    )
    r.write("shared/src/paperstack/__init__.py", '__version__ = "0.1.0"\n')
    r.write("shared/CHANGELOG.md", "# Changelog\n")
    r.add_package("alpha")
    r.add_package("alpha-vision", "alpha_vision")
    r.write("README.md", "# test repo\n")
    r.write("noxfile.py", "\n")
    r.commit("initial")
    return r

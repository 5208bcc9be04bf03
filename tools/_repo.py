"""What the repository tools share: package discovery and the changed-package rule.

Standard library only (it runs under any Python 3.11 and inside nox). Nothing here keeps a
hand-written list of packages: every package is found from ``packages/*/pyproject.toml`` plus the
core in ``shared/pyproject.toml``, and its import name, command and extras are read from that file.

``[tool.paperstack]`` in a package's pyproject may name extras:

- ``test-extras``: extras installed for its tests and type check (default: none);
- ``demo-extras``: extras its ``demo`` needs, installed by ``isolation`` and ``reproduce``.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
CORE_DIST = "paperstack-core"
CORE_DIR = "shared"
PACKAGES_DIR = "packages"
CONSTRAINTS = "tools/constraints.txt"

# The core's extras when shared/pyproject.toml has no [tool.paperstack] table of its own.
_CORE_DEFAULTS = {"test-extras": ["torch", "http", "embed"], "demo-extras": ["torch"]}

# Paths (relative to the repository root) whose change can break every package: the core and
# the tooling that installs, tests and releases them.
_EVERYTHING_PREFIXES = (f"{CORE_DIR}/", "tools/", ".github/", ".ci/")
_EVERYTHING_FILES = ("noxfile.py", "pyproject.toml")


class RepoError(Exception):
    """A repository tool cannot go on; the message is one line a person can act on."""


@dataclass(frozen=True)
class Package:
    """One installable project of the repository, as its pyproject.toml describes it."""

    dist: str
    path: Path  # the project directory (absolute)
    import_name: str
    cli: str | None  # first [project.scripts] entry, if any
    version_file: Path  # [tool.hatch.version] path (absolute)
    test_extras: tuple[str, ...]
    demo_extras: tuple[str, ...]

    @property
    def is_core(self) -> bool:
        return self.dist == CORE_DIST

    def rel(self, root: Path = ROOT) -> str:
        """The project directory relative to ``root`` (posix), e.g. ``packages/nf12-format``."""
        return self.path.relative_to(root).as_posix()

    def spec(self, extras: tuple[str, ...] = ()) -> str:
        """A pip/uv requirement for the directory itself, with extras: ``./shared[torch]``."""
        return f"{self.path}[{','.join(extras)}]" if extras else str(self.path)


def read_package(project_dir: Path) -> Package:
    """Read one project's metadata from ``project_dir/pyproject.toml``."""
    pyproject = project_dir / "pyproject.toml"
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RepoError(f"{pyproject}: cannot read: {exc}") from None
    project = data.get("project") or {}
    dist = project.get("name")
    if not isinstance(dist, str) or not dist:
        raise RepoError(f"{pyproject}: [project].name is missing")
    tool = data.get("tool") or {}
    wheel_pkgs = (((tool.get("hatch") or {}).get("build") or {}).get("targets") or {}).get(
        "wheel", {}
    ).get("packages") or []
    import_name = Path(wheel_pkgs[0]).name if wheel_pkgs else dist.replace("-", "_")
    scripts = project.get("scripts") or {}
    cli = next(iter(scripts), None)
    version_path = ((tool.get("hatch") or {}).get("version") or {}).get("path")
    version_file = project_dir / (version_path or f"src/{import_name}/__init__.py")
    own = tool.get("paperstack")
    if own is None and dist == CORE_DIST:
        own = _CORE_DEFAULTS
    own = own or {}
    return Package(
        dist=dist,
        path=project_dir.resolve(),
        import_name=import_name,
        cli=cli,
        version_file=version_file.resolve(),
        test_extras=tuple(own.get("test-extras", ())),
        demo_extras=tuple(own.get("demo-extras", ())),
    )


def discover(root: Path = ROOT) -> list[Package]:
    """The core first, then every ``packages/*/pyproject.toml`` in name order. Empty is fine."""
    found: list[Package] = []
    if (root / CORE_DIR / "pyproject.toml").is_file():
        found.append(read_package(root / CORE_DIR))
    for pyproject in sorted((root / PACKAGES_DIR).glob("*/pyproject.toml")):
        found.append(read_package(pyproject.parent))
    seen: dict[str, Path] = {}
    for pkg in found:
        if pkg.dist in seen:
            raise RepoError(f"{pkg.path}: dist name {pkg.dist!r} already used by {seen[pkg.dist]}")
        seen[pkg.dist] = pkg.path
    return found


def by_dist(dist: str, root: Path = ROOT) -> Package:
    """The package named ``dist`` (the core is ``paperstack-core``)."""
    packages = discover(root)
    for pkg in packages:
        if pkg.dist == dist:
            return pkg
    names = ", ".join(p.dist for p in packages) or "none"
    raise RepoError(f"no package named {dist!r} (known: {names})")


def git(root: Path, *args: str) -> str:
    """Run git in ``root`` and return its stdout; a failure becomes a one-line RepoError."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise RepoError("git is not installed") from None
    if proc.returncode != 0:
        msg = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise RepoError(f"git {' '.join(args)}: {msg}")
    return proc.stdout


def changed_files(base: str, root: Path = ROOT) -> list[str]:
    """Files that differ between ``merge-base(base, HEAD)`` and the working tree, plus untracked
    files (so that a local run also sees work not committed yet)."""
    merge_base = git(root, "merge-base", base, "HEAD").strip()
    files = set(git(root, "diff", "--name-only", "--no-renames", merge_base).splitlines())
    files |= set(git(root, "ls-files", "--others", "--exclude-standard").splitlines())
    return sorted(f for f in files if f)


def affects_everything(path: str) -> bool:
    """The core and the shared tooling count as a change to every package."""
    return path in _EVERYTHING_FILES or path.startswith(_EVERYTHING_PREFIXES)


def select_changed(files: list[str], packages: list[Package], root: Path = ROOT) -> list[Package]:
    """Map changed files to packages: ``packages/<dir>/...`` selects that package; the core
    (``shared/``), ``noxfile.py``, ``pyproject.toml``, ``tools/``, ``.github/`` and ``.ci/``
    select all. Other files (README.md, reports/...) select none."""
    if any(affects_everything(f) for f in files):
        return list(packages)
    dirs = {
        f.split("/")[1] for f in files if f.startswith(f"{PACKAGES_DIR}/") and f.count("/") >= 2
    }
    return [
        p
        for p in packages
        if not p.is_core
        and p.path.name in dirs
        and p.path.parent == (root / PACKAGES_DIR).resolve()
    ]


def changed_packages(base: str, root: Path = ROOT) -> list[Package]:
    """The packages a change since ``base`` (a git ref) touches, in discovery order."""
    return select_changed(changed_files(base, root), discover(root), root)


def dump(dists: list[str], as_json: bool) -> str:
    return json.dumps(dists) if as_json else "".join(f"{d}\n" for d in dists)

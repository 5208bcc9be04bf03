import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from _repo import CONSTRAINTS, read_package
from conftest import ROOT, TOOLS, run_tool


def scaffold(tmp_path, *args):
    dest = tmp_path / "packages"
    proc = run_tool("new-package", *args, "--dest", str(dest))
    return proc, dest


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["Bad_Name"], "dist 'Bad_Name'"),
        (["two--dashes"], "dist 'two--dashes'"),
        (["good", "--import", "class"], "--import 'class'"),
        (["good", "--import", "Has-Dash"], "--import 'Has-Dash'"),
        (["good", "--cli", "no spaces"], "--cli 'no spaces'"),
        (["paperstack-core"], "belongs to the core"),
        (["good", "--import", "paperstack"], "belongs to the core"),
        (["tmpl-dist"], "placeholder"),
    ],
)
def test_bad_names_are_one_line_errors(tmp_path, args, message):
    proc, dest = scaffold(tmp_path, *args)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert message in proc.stderr
    assert not any(dest.glob("*/pyproject.toml"))


def test_refuses_to_overwrite(tmp_path):
    proc, _ = scaffold(tmp_path, "nf12-format")
    assert proc.returncode == 0, proc.stderr
    again, _ = scaffold(tmp_path, "nf12-format")
    assert again.returncode == 2
    assert "already exists" in again.stderr


def test_output_keeps_the_contract(tmp_path):
    proc, dest = scaffold(tmp_path, "nf12-format", "--import", "nf12", "--cli", "nf12")
    assert proc.returncode == 0, proc.stderr
    pkg_dir = dest / "nf12-format"
    for rel in [
        "pyproject.toml",
        "README.md",
        "CHANGELOG.md",
        "src/nf12/__init__.py",
        "src/nf12/py.typed",
        "src/nf12/cli.py",
        "tests/test_demo.py",
        "tests/test_conformance.py",
        "benchmarks/README.md",
    ]:
        assert (pkg_dir / rel).is_file(), rel
    leftovers = [
        str(p) for p in pkg_dir.rglob("*") if p.is_file() and "tmpl" in p.read_text().lower()
    ]
    assert leftovers == []
    meta = tomllib.loads((pkg_dir / "pyproject.toml").read_text())
    assert meta["build-system"]["build-backend"] == "hatchling.build"
    assert meta["project"]["name"] == "nf12-format"
    assert meta["project"]["dynamic"] == ["version"]
    assert "paperstack-core>=0.2,<1" in meta["project"]["dependencies"]
    assert not any("==" in d for d in meta["project"]["dependencies"])
    assert not any(d.startswith("torch") for d in meta["project"]["dependencies"])
    assert meta["project"]["scripts"] == {"nf12": "nf12.cli:main"}
    assert meta["tool"]["hatch"]["version"]["path"] == "src/nf12/__init__.py"
    assert "test" in meta["dependency-groups"]
    pytest_ini = meta["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in pytest_ini["addopts"]
    assert {m.split(":")[0] for m in pytest_ini["markers"]} >= {"slow", "gpu"}
    pkg = read_package(pkg_dir)
    assert (pkg.dist, pkg.import_name, pkg.cli) == ("nf12-format", "nf12", "nf12")
    readme = (pkg_dir / "README.md").read_text()
    for section in [
        "## Install",
        "## One-minute demo",
        "## API in one example",
        "## CLI",
        "## Results",
        "## Differences from the paper",
    ]:
        assert section in readme
    cli = (pkg_dir / "src/nf12/cli.py").read_text()
    assert "ContractCLI(" in cli  # the common flags and flow come from the core
    assert '"--dataset"' in cli  # the package's own flag
    assert "class Nf12FormatError" not in cli  # the error class is named for the import name
    assert "class Nf12Error" in (pkg_dir / "src/nf12/estimators.py").read_text()


def test_defaults_derive_import_and_cli_from_dist(tmp_path):
    proc, dest = scaffold(tmp_path, "progress-advantage")
    assert proc.returncode == 0, proc.stderr
    pkg = read_package(dest / "progress-advantage")
    assert (pkg.import_name, pkg.cli) == ("progress_advantage", "progress-advantage")


def _ruff():
    for candidate in (shutil.which("ruff"), str(Path(sys.executable).parent / "ruff")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


@pytest.mark.skipif(_ruff() is None, reason="ruff is not installed")
@pytest.mark.parametrize(("dist", "extra"), [("ra2-unlearn", ["--cli", "ra2"]), ("minpath", [])])
def test_output_passes_the_repository_lint(tmp_path, dist, extra):
    """Generated into a copy of the repository's ruff settings, the package lints clean (the
    import order depends on the names, so new-package sorts imports with ruff)."""
    fake_root = tmp_path / "root"
    (fake_root / "packages").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", fake_root / "pyproject.toml")
    env = {**os.environ, "PATH": f"{Path(_ruff()).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [sys.executable, str(TOOLS / "new-package"), dist, *extra, "--dest", "packages"],
        cwd=fake_root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for args in (["check", "."], ["format", "--check", "."]):
        lint = subprocess.run(
            [_ruff(), *args], cwd=fake_root, capture_output=True, text=True, check=False
        )
        assert lint.returncode == 0, lint.stdout + lint.stderr


def _uv():
    for candidate in (shutil.which("uv"), str(Path(sys.executable).parent / "uv")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def _find_links():
    if os.environ.get("UV_FIND_LINKS"):
        return os.environ["UV_FIND_LINKS"]
    return ",".join(os.environ.get("PIP_FIND_LINKS", "").split())


@pytest.mark.skipif(_uv() is None, reason="uv is not installed (the nox session installs it)")
def test_scaffolded_package_installs_alone_and_keeps_the_contract(tmp_path):
    """End to end: generate, install core + package alone in a fresh venv (no torch), run the
    demo, then its own tests."""
    proc, dest = scaffold(tmp_path, "mosa-rl", "--cli", "mosa")
    assert proc.returncode == 0, proc.stderr
    pkg_dir = dest / "mosa-rl"
    uv = _uv()
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env.update(UV_CONSTRAINT=str(ROOT / CONSTRAINTS), UV_PYTHON_DOWNLOADS="never")
    if _find_links():
        env["UV_FIND_LINKS"] = _find_links()

    def run(*cmd, cwd=None):
        result = subprocess.run(
            [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, f"{cmd}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return result

    run(uv, "venv", "--quiet", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    install = [uv, "pip", "install", "--quiet", "--python", python, "-c", ROOT / CONSTRAINTS]
    run(*install, ROOT / "shared", pkg_dir)

    def has(module):
        code = f"import importlib.util as u; print(u.find_spec({module!r}) is not None)"
        return run(python, "-c", code).stdout.strip() == "True"

    assert not has("torch"), "core + the scaffolded package pulled torch"
    assert not has("pytest"), "test tools leaked into the runtime install"
    out = tmp_path / "demo"
    run(venv / "bin" / "mosa", "--help")
    demo = run(venv / "bin" / "mosa", "demo", "--quick", "--out", out, cwd=tmp_path)
    assert "held /" in demo.stdout
    assert "not held /" in demo.stdout
    assert (out / "results.json").is_file()
    assert (out / "report.md").is_file()
    run(python, "-m", "paperstack.cli", "check", out / "results.json")

    groups = tomllib.loads((pkg_dir / "pyproject.toml").read_text())["dependency-groups"]
    run(*install, *groups["test"])
    tests = run(python, "-m", "pytest", "-q", "-m", "not gpu and not slow", cwd=pkg_dir)
    assert " passed" in tests.stdout
    assert not has("torch")

    run(*install, *groups["typecheck"])
    run(python, "-m", "mypy", "--config-file", ROOT / "pyproject.toml", pkg_dir / "src")

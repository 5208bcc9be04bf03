"""The command line every paperstack package keeps, written once.

A package's ``cli.py`` builds a :class:`ContractCLI`, registers its ``demo`` and ``bench``
functions (and any commands of its own), and exposes ``main``::

    cli = ContractCLI("mosa", "mosa-rl", __version__, __doc__)

    @cli.demo(seeds=3, arguments=lambda p: p.add_argument("--steps", type=int))
    def demo(run: Run) -> Report:
        rows, claims = ...  # the package's reproduction, on run.seeds, run.device, run.model
        return Report(rows, claims, title="mosa-rl: demo", intro="...")

    main = cli.main

Both commands get the common flags: ``--out`` (a directory; an existing file is refused),
``--quick``, ``--seed`` (the first seed), ``--seeds`` (``0,1,2`` or ``0-4``: the seeds
themselves), ``--device`` (``cpu``, ``cuda[:N]``; one clear error when the device is not there),
``--model`` (a hub id or a local path; a local path that does not exist is one error at once,
not a minute of hub retries), ``--no-progress``, ``--parts DIR`` (where the run's resumable
parts are kept, default ``OUT/.parts``: :meth:`Run.resumable`, :mod:`paperstack.resume`). The
common flow is then the same everywhere:
check the flags, prepare the output folder, collect the manifest, run, write ``results.json``
(``bench.json`` for bench) atomically, write ``report.md`` with the figures, print every claim
with its verdict, and exit 0, also when claims do not hold (a claim that fails is a result, not
an error). A run that fails on its input removes the output folder it created, if still empty,
and exits 2 with one line.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import importlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from paperstack import preregistration, resume
from paperstack.errors import PaperstackError, cli_guard
from paperstack.progress import Progress, quiet_libraries
from paperstack.records import (
    VERDICT_TEXT,
    Claim,
    Manifest,
    Results,
    Row,
    output_dir,
    prepare_out_dir,
    verdict_counts,
    write_results,
)
from paperstack.resume import PARTS_DIRNAME, Parts

__all__ = [
    "ContractCLI",
    "Report",
    "Run",
    "check_device",
    "check_model",
    "fraction",
    "non_negative_int",
    "parse_seeds",
    "positive_float",
    "positive_int",
    "positive_int_list",
    "seed_int",
    "settled_heap",
    "trl_precision_args",
]

#: What a Hugging Face hub id looks like: ``name`` or ``owner/name``; anything else is a path.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


def check_model(value: str | None) -> str | None:
    """``--model``: a hub id is passed on; a local path must exist; a preset of
    :mod:`paperstack.models` (``smollm2-135m-instruct``) becomes its converted folder.

    Anything that is not shaped like a hub id (``/abs``, ``./rel``, ``~/x``, ``a/b/c``) is a
    local path, and a missing one is refused at once: otherwise transformers takes it for a hub
    id and retries the network for about a minute before failing.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        raise PaperstackError("--model: empty value")
    from paperstack import models

    if models.is_preset(text) and not os.path.exists(text):
        return str(models.model_path(text))  # one line when its wheel is missing
    expanded = os.path.expanduser(text)
    if os.path.islink(expanded) and not os.path.exists(expanded):
        target = os.readlink(expanded)
        raise PaperstackError(f"--model {text}: a dangling symbolic link (to {target})")
    if os.path.exists(expanded):
        if not os.path.isdir(expanded) and not text.endswith((".gguf", ".safetensors")):
            raise PaperstackError(f"--model {text}: is a file, not a model directory")
        return expanded
    if not _HUB_ID.match(text) or text.startswith(".") or os.sep in text.replace("/", "", 1):
        raise PaperstackError(f"--model {text}: no such directory")
    return text


def check_device(value: str) -> str:
    """``--device``: ``cpu`` always; ``cuda``, ``cuda:N``, ``mps`` only where torch sees them."""
    text = value.strip().lower()
    if text == "cpu":
        return "cpu"
    match = re.fullmatch(r"(cuda|mps|xpu)(?::(\d+))?", text)
    if match is None:
        raise PaperstackError(f"--device {value}: not a device (cpu, cuda, cuda:N, mps)")
    try:
        import torch
    except ImportError:
        raise PaperstackError(
            f"--device {value}: needs torch, which is not installed (only cpu works without it)"
        ) from None
    kind, index = match.group(1), int(match.group(2) or 0)
    if kind == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build of torch" if torch.version.cuda is None else "no CUDA device"
            raise PaperstackError(f"--device {value}: not available here ({build}); use cpu")
        if index >= torch.cuda.device_count():
            raise PaperstackError(
                f"--device {value}: only {torch.cuda.device_count()} CUDA device(s) here"
            )
    elif kind == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise PaperstackError(f"--device {value}: MPS is not available here; use cpu")
    elif not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        raise PaperstackError(f"--device {value}: XPU is not available here; use cpu")
    return text


#: The largest seed: numpy's generators take seeds below 2**32, and torch's fit in 64 bits.
MAX_SEED = 2**32 - 1
#: At most this many seeds in one ``--seeds`` (a typo such as ``0-1000000`` is refused at once).
MAX_SEEDS = 10_000


def seed_int(text: str) -> int:
    """argparse type of ``--seed``: an integer in ``[0, 2**32 - 1]`` (what every RNG accepts)."""
    value = int(_number(text, int))
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_SEED}, got {text}")
    return value


def parse_seeds(text: str) -> tuple[int, ...]:
    """``0,1,2`` or ``0-4`` (inclusive) or a mix (``0-2,7``): distinct seeds in
    ``[0, 2**32 - 1]``, at most :data:`MAX_SEEDS` of them."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d{1,20})(?:-(\d{1,20}))?", part)
        if m is None:
            raise argparse.ArgumentTypeError(f"not seeds: {text!r} (use 0,1,2 or 0-4)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi > MAX_SEED:
            raise argparse.ArgumentTypeError(f"seed {hi} is above the largest seed {MAX_SEED}")
        if hi < lo:
            raise argparse.ArgumentTypeError(f"empty seed range {part!r}")
        if hi - lo + 1 + len(seeds) > MAX_SEEDS:
            raise argparse.ArgumentTypeError(f"more than {MAX_SEEDS} seeds in {text!r}")
        seeds.extend(range(lo, hi + 1))
    if not seeds:
        raise argparse.ArgumentTypeError(f"no seeds in {text!r}")
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"repeated seed in {text!r}")
    return tuple(seeds)


@dataclasses.dataclass
class Run:
    """What a package's ``demo`` or ``bench`` function is given: the checked common flags, the
    package's own flags (``args``), the output folder (already created and writable), and ways
    to tell the user how far it is."""

    prog: str
    command: str
    args: argparse.Namespace
    out: Path
    quick: bool
    seed: int
    seeds: tuple[int, ...]
    device: str
    model: str | None
    show_progress: bool
    #: The run's resumable parts (:mod:`paperstack.resume`); None: every part is computed.
    parts: Parts | None = None

    def resumable(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()``'s JSON value, kept as the part ``key`` so that a rerun of the same
        command, flags and code loads it instead (:mod:`paperstack.resume`: the key
        must name what the value depends on besides the flags, e.g. ``f"seed-{seed}"``)."""
        if self.parts is None:
            return Parts(self.out, "", "", self.command, {}, None, why_not="no parts folder").get(
                key, compute
            )
        return self.parts.get(key, compute)

    def log(self, message: str) -> None:
        """One line on stderr, prefixed by the program's name."""
        print(f"{self.prog}: {message}", file=sys.stderr, flush=True)

    def progress(self, total: int | None, description: str, interval: float = 10.0) -> Progress:
        """A progress bar on a terminal, periodic lines otherwise, nothing with --no-progress."""
        return Progress(total, description, enabled=self.show_progress, interval=interval)


@dataclasses.dataclass
class Report:
    """What a ``demo`` or ``bench`` function returns: the rows and the claims computed from
    them, the manifest's extra config, and the report's text and figures (files it wrote into
    ``run.out``)."""

    rows: list[Row]
    claims: list[Claim] = dataclasses.field(default_factory=list)
    title: str | None = None
    intro: str = ""
    figures: Sequence[str | os.PathLike[str]] = ()
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    summary: str | None = None


RunFunction = Callable[[Run], Report]
ArgumentAdder = Callable[[argparse.ArgumentParser], Any]


@dataclasses.dataclass
class _Spec:
    name: str
    func: RunFunction
    help: str
    arguments: ArgumentAdder | None
    seeds: int
    quick_seeds: int
    model: str | None
    devices: tuple[str, ...] | None
    filename: str
    report: bool


class ContractCLI:
    """A package's command line: ``demo`` and ``bench`` with the common flags and flow, plus the
    package's own commands (:meth:`command`). ``doc`` is the CLI module's docstring; its first
    paragraph is the description ``--help`` shows."""

    def __init__(self, prog: str, dist: str, version: str, doc: str | None = None) -> None:
        self.prog = prog
        self.dist = dist
        self.version = version
        self.description = (doc or "").strip().split("\n\n")[0] or f"the {dist} command line"
        self._specs: dict[str, _Spec] = {}
        self._commands: dict[str, tuple[str, ArgumentAdder | None, Callable[..., int]]] = {}

    # ------------------------------------------------------------------ registration

    def demo(
        self,
        *,
        arguments: ArgumentAdder | None = None,
        seeds: int = 1,
        quick_seeds: int = 1,
        model: str | None = None,
        devices: Sequence[str] | None = None,
        help: str = "run the reproduction; write results.json, report.md and figures",
    ) -> Callable[[RunFunction], RunFunction]:
        """Register the ``demo`` function. ``seeds``/``quick_seeds``: how many seeds from
        ``--seed`` a full/quick run uses unless ``--seeds`` names them. ``model``: what
        ``--model`` means for this package (its help text), or None if it takes no model.
        ``devices``: the device kinds it supports (``("cpu",)``), or None for any torch sees."""
        return self._register("demo", arguments, seeds, quick_seeds, model, devices, help,
                              "results.json", True)  # fmt: skip

    def bench(
        self,
        *,
        arguments: ArgumentAdder | None = None,
        seeds: int = 1,
        quick_seeds: int = 1,
        model: str | None = None,
        devices: Sequence[str] | None = None,
        help: str = "measure speed and memory against the baselines; write bench.json",
    ) -> Callable[[RunFunction], RunFunction]:
        """Register the ``bench`` function (writes ``bench.json`` and ``bench.md``)."""
        return self._register("bench", arguments, seeds, quick_seeds, model, devices, help,
                              "bench.json", False)  # fmt: skip

    def _register(
        self,
        name: str,
        arguments: ArgumentAdder | None,
        seeds: int,
        quick_seeds: int,
        model: str | None,
        devices: Sequence[str] | None,
        help: str,
        filename: str,
        report: bool,
    ) -> Callable[[RunFunction], RunFunction]:
        if seeds < 1 or quick_seeds < 1:
            raise ValueError("seeds and quick_seeds must be >= 1")

        def decorate(func: RunFunction) -> RunFunction:
            self._specs[name] = _Spec(
                name, func, help, arguments, seeds, quick_seeds, model,
                tuple(devices) if devices is not None else None, filename, report,
            )  # fmt: skip
            return func

        return decorate

    def command(
        self, name: str, help: str, arguments: ArgumentAdder | None = None
    ) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
        """Register a package command of its own: ``func(args) -> exit status``."""

        def decorate(func: Callable[[argparse.Namespace], int]) -> Callable[..., int]:
            self._commands[name] = (help, arguments, func)
            return func

        return decorate

    # ------------------------------------------------------------------ parsing

    def parser(self) -> argparse.ArgumentParser:
        """The whole command line (for ``--help`` and for tests)."""
        p = argparse.ArgumentParser(prog=self.prog, description=self.description)
        p.add_argument("--version", action="version", version=f"{self.dist} {self.version}")
        sub = p.add_subparsers(dest="command", required=True)
        for spec in self._specs.values():
            sp = sub.add_parser(spec.name, help=spec.help, description=spec.help)
            self._common(sp, spec)
            if spec.arguments is not None:
                spec.arguments(sp)
        for name, (help_text, arguments, _) in self._commands.items():
            sp = sub.add_parser(name, help=help_text, description=help_text)
            if arguments is not None:
                arguments(sp)
            _bound_seed_flags(sp)
        return p

    @staticmethod
    def _common(p: argparse.ArgumentParser, spec: _Spec) -> None:
        what = "results.json, report.md" if spec.report else "bench.json, bench.md"
        p.add_argument("--out", type=Path, required=True, help=f"directory for {what}")
        p.add_argument("--quick", action="store_true", help="the one-minute version (CI)")
        p.add_argument("--seed", type=seed_int, default=0, help="first seed (default 0)")
        runs = f"{spec.seeds} seed(s) from --seed, {spec.quick_seeds} with --quick"
        p.add_argument("--seeds", type=parse_seeds, default=None, help=f"seeds (default: {runs})")
        p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")
        p.add_argument(
            "--model",
            default=None,
            help=spec.model or "not used: this command builds its own models",
        )
        p.add_argument("--no-progress", action="store_true", help="no progress bars or lines")
        p.add_argument(
            "--parts",
            type=_folder_path,
            default=None,
            help="folder of the run's resumable parts (default OUT/.parts): a rerun of the same "
            "code with the same flags loads the parts already computed; processes with "
            "disjoint --seeds can share one",
        )

    # ------------------------------------------------------------------ running

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Parse ``argv`` and run the command; bad input is one line and exit status 2."""
        return int(cli_guard(self.prog)(self._main)(argv))

    def _main(self, argv: Sequence[str] | None) -> int:
        raw = list(sys.argv[1:] if argv is None else argv)
        _refuse_empty_out(raw)
        check_cache_env()
        args = self.parser().parse_args(raw)
        if args.command in self._commands:
            return int(self._commands[args.command][2](args))
        return self._run(self._specs[args.command], args)

    def _run(self, spec: _Spec, args: argparse.Namespace) -> int:
        quiet_libraries()
        if args.model is not None and spec.model is None:
            raise PaperstackError(
                f"--model {args.model}: {self.prog} {spec.name} builds its own models"
            )
        model = check_model(args.model)
        device = check_device(args.device)
        if spec.devices is not None and device.split(":")[0] not in spec.devices:
            raise PaperstackError(
                f"--device {args.device}: {self.prog} {spec.name} runs on "
                + ", ".join(spec.devices)
            )
        count = spec.quick_seeds if args.quick else spec.seeds
        seeds = args.seeds if args.seeds is not None else tuple(args.seed + i for i in range(count))
        if max(seeds) > MAX_SEED:
            raise PaperstackError(
                f"--seed {args.seed}: its {count} seeds run past the largest seed {MAX_SEED}"
            )
        # Read before anything runs or is created: what the command declared it would claim
        # and the design history its report lists (a malformed declaration or CHANGELOG entry
        # stops here, not after an hour of training).
        declared = preregistration.fingerprint(spec.func, spec.name, vars(args))
        # The design history of the table this run is bound to (``demo --real`` for a variant).
        table = declared["table"] if declared is not None else spec.name
        history = preregistration.history_for(spec.func, table)
        if args.parts is not None:
            prepare_out_dir(args.parts)  # a bad --parts fails now, not at the first part's end
        with output_dir(args.out) as out:
            run = Run(
                prog=self.prog,
                command=spec.name,
                args=args,
                out=out,
                quick=bool(args.quick),
                seed=seeds[0],
                seeds=seeds,
                device=device,
                model=model,
                show_progress=not args.no_progress,
            )
            config = {
                k: v
                for k, v in vars(args).items()
                if k not in ("command", "out", "no_progress", "parts")
            }
            config.update(seeds=list(seeds), device=device, model=model)
            manifest = Manifest.collect(self.dist, self.version, seed=seeds[0], config=config)
            manifest = manifest.model_copy(update={"preregistration": declared})
            code, why_not = resume.code_identity(_code_folders(spec.func))
            run.parts = Parts(
                args.parts if args.parts is not None else out / PARTS_DIRNAME,
                self.dist,
                self.version,
                spec.name,
                vars(args),
                code,
                log=run.log,
                revision=manifest.git_revision,
                why_not=why_not,
            )
            started = time.perf_counter()
            report = spec.func(run)
            seconds = time.perf_counter() - started
            manifest = manifest.model_copy(
                update={
                    "config": {**manifest.config, **_jsonable(report.config)},
                    "resumed": run.parts.resumed or None,
                }
            )
            results = Results(manifest=manifest.finish(), rows=report.rows, claims=report.claims)
            path = write_results(out / spec.filename, results)
            from paperstack.report import write_report

            title = report.title or f"{self.dist} {self.version}: {spec.name}"
            name = "report.md" if spec.report else "bench.md"
            write_report(
                out, results, title, report.intro, report.figures, name=name, history=history
            )
        if declared is not None and declared["binding"]:
            decl = preregistration.from_json(spec.name, declared["declared"])
            complete = bool(report.claims)  # no claims at all: a user's own data, say
            for problem in preregistration.deviations(report.claims, decl, complete=complete):
                print(
                    f"{self.prog}: warning: {problem} in {declared['path']} "
                    "(`paperstack check` fails this file)",
                    file=sys.stderr,
                )
        for claim in report.claims:
            print(f"{self.prog}: {claim.id}: {VERDICT_TEXT[claim.verdict]} ({claim.describe()})")
        counts = f"{verdict_counts(report.claims)}, " if report.claims else ""
        extra = f"; {report.summary}" if report.summary else ""
        print(f"{self.prog}: wrote {path} ({counts}{seconds:.0f} s){extra}")
        return 0


@contextlib.contextmanager
def settled_heap(*imports: str) -> Iterator[None]:
    """Import ``imports`` (``"trl.SFTTrainer"``: a module, or a module's attribute, which
    imports a lazy package's submodule), then move every object alive now out of the garbage
    collector's reach (:func:`gc.freeze`) until the block ends.

    Why: accelerate's ``free_memory()`` runs a full ``gc.collect()`` at the end of every
    ``Trainer.train()``, and a full collection walks every live object. With torch,
    transformers, trl and datasets imported that is about half a million objects, 0.3-0.6 s a
    call on a 2-core CPU: a third of a ``demo --quick`` that runs a few dozen short trl
    trainings (measured in minpath and meta-pref). What is frozen is what lives for the whole
    run anyway (garbage is collected first); objects the run creates are collected as before.
    A caller that froze its heap already (a test session's fixture) keeps it as it is."""
    for name in imports:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            module, _, attr = name.rpartition(".")
            if not module:
                raise
            getattr(importlib.import_module(module), attr)
    if gc.get_freeze_count():
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _number(text: str, kind: type[int] | type[float]) -> float:
    import math

    if len(text.strip()) > 400:  # int() of a huge digit string is slow, and no flag needs it
        raise argparse.ArgumentTypeError(f"out of range: {text[:20]}... ({len(text)} characters)")
    try:
        value = kind(text)
    except ValueError:
        name = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"not {name}: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    if kind is int and abs(value) > _MAX_INT:
        raise argparse.ArgumentTypeError(f"out of range (at most {_MAX_INT}), got {text}")
    return value


#: The largest integer a flag takes: what fits a signed 64-bit integer (numpy, torch, C).
_MAX_INT = 2**63 - 1


def _folder_path(text: str) -> Path:
    """A folder flag's value: a non-empty path (``Path("")`` would be the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path; name a folder")
    return Path(text)


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (``--steps``, ``--repeats``)."""
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = int(_number(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (``--lr``, ``--time-limit``)."""
    value = float(_number(text, float))
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0 (a loss weight, a margin)."""
    value = float(_number(text, float))
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def fraction(text: str) -> float:
    """argparse type: a number in [0, 1]."""
    value = float(_number(text, float))
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def positive_int_list(text: str) -> tuple[int, ...]:
    """argparse type: a comma-separated list of integers >= 1 (``--contexts 4096,8192``)."""
    parts = [x.strip() for x in text.split(",") if x.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"no values in {text!r}")
    try:
        return tuple(positive_int(x) for x in parts)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


_non_negative = non_negative_int


def _refuse_empty_out(argv: Sequence[str]) -> None:
    """``--out ""`` would mean the current folder (``Path("")`` is ``.``) and overwrite a
    results.json there: refused for every command, the package's own ones too."""
    for i, arg in enumerate(argv):
        value: str | None = None
        if arg == "--out" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--out="):
            value = arg.split("=", 1)[1]
        if value is not None and not value.strip():
            raise PaperstackError("--out: empty path; name the output directory")


def check_cache_env() -> None:
    """``PAPERSTACK_CACHE`` naming a file (or a dangling link) is refused before any work, in
    one line, by every command (not only by the ones that reach the cache an hour in)."""
    value = os.environ.get("PAPERSTACK_CACHE")
    if not value:
        return
    path = Path(value).expanduser()
    if path.is_symlink() and not path.exists():
        raise PaperstackError(f"PAPERSTACK_CACHE={value}: a dangling symbolic link")
    if path.exists() and not path.is_dir():
        raise PaperstackError(f"PAPERSTACK_CACHE={value}: exists and is not a directory")


def _bound_seed_flags(parser: argparse.ArgumentParser) -> None:
    """A package command's own ``--seed`` declared as a bare ``int`` gets the contract's range
    (:func:`seed_int`): a seed beyond 2**32 - 1 or below 0 is refused at parse time, not after
    a minute of work inside numpy."""
    for action in parser._actions:
        if "--seed" in action.option_strings and action.type in (int, None):
            action.type = seed_int


def _jsonable(obj: dict[str, Any]) -> dict[str, Any]:
    import json

    return dict(json.loads(json.dumps(obj, default=str)))


def trl_precision_args(bf16: bool = False) -> dict[str, Any]:
    """Fields for a trl config (``SFTConfig``, ``DPOConfig``, ``RewardConfig``, ``GRPOConfig``,
    ...) that set its precision and activation checkpointing explicitly:
    ``{"bf16": bf16, "fp16": False, <checkpointing>: False}``.

    Why: trl 1.16's configs turn ``bf16`` on (``None`` resolves to ``True``) and activation
    checkpointing on by default, also with ``use_cpu=True``. On a CPU without bf16 instructions
    that is bf16 autocast (a SmolLM2 reward-model epoch 24 times slower in meta-pref) plus a
    second forward in every backward; and accelerate leaves the trained model's ``forward``
    wrapped in that autocast, so evaluations after training run in bf16 as well. The
    checkpointing field's name comes from the installed transformers (5.x renamed
    ``gradient_checkpointing`` to ``activation_checkpointing``; the old name warns)."""
    import dataclasses as dc

    from transformers import TrainingArguments

    names = {f.name for f in dc.fields(TrainingArguments)}
    field = "activation_checkpointing" if "activation_checkpointing" in names else (
        "gradient_checkpointing")  # fmt: skip
    return {"bf16": bf16, "fp16": False, field: False}


def _code_folders(func: Callable[..., Any]) -> list[Path]:
    """The folders of code a command runs: the core's package and the command's own (where
    ``func`` is defined), which a resumable part's fingerprint pins (:mod:`paperstack.resume`)."""
    import paperstack

    folders = [Path(paperstack.__file__).resolve().parent]
    module = sys.modules.get(getattr(func, "__module__", ""), None)
    where = getattr(module, "__file__", None)
    if where:
        own = Path(where).resolve().parent
        if own not in folders:
            folders.append(own)
    return folders

"""Pre-registration: what a demo will claim, declared before it runs, and what changed since.

A reviewer believes a verdict only if the claim, its margin, its seeds and its stopping rule were
fixed before the numbers were seen. Each package therefore ships
``src/<module>/preregistration.toml``, one table per command::

    [demo]
    seeds = [0, 1, 2]                       # the reported run's seeds
    stopping = "200 steps per seed, no early stopping"

    [demo.claims.method_beats_baseline]
    lhs = ["method", "accuracy", "test"]    # system, metric[, split]
    rhs = ["baseline", "accuracy", "test"]  # or a number
    op = "gt"
    margin = 0.0
    requires = ["premise_base_sycophantic"] # premises gating it, if any
    optional = false                        # true: absent from some runs (quick, no GPU)

The command's run reads the file, embeds the table and the file's sha256 in the manifest
(``manifest.preregistration``) and compares its claims with it. ``paperstack check`` repeats
the comparison against the declaration *at the run's git revision* (``git show``), so a claim,
margin or gate edited after the run, or declared in the same uncommitted tree that ran it,
cannot pass as pre-registered: ``claims(results) == declared(revision)`` or the check fails.
Seeds differing from the declared ones are a user's own run, reported, not refused.

Design history: a package's CHANGELOG.md carries a section ``## Design history`` of lines::

    - 2026-12-05 demo: seeds: moved to 3-7 after seeds 0-2 were seen (exploratory)
    - 2026-12-06 demo --real: task: one-operation problems (validation seed 100)
    - 2026-12-07 00:46 UTC demo --real: design: a second design, declared before its rerun

(date, optional time of day in UTC, command, kind, text), one per change of design, seed set,
margin, claim, statistic, task or budget made after an earlier run of that command. The command
is the declaration's table: ``demo`` for the toy demo, ``demo --real`` for its real-model
variant, so a change to one arm is listed in that arm's report only. :func:`design_history`
parses it and every report.md lists the entries for its command, so the report alone tells a
reader what was decided after looking. A report refreshed later (``paperstack collect``) lists
apart the entries recorded after its run: dated after the day the run started, or dated that
day with a time after the run's start (an entry of the run's day without a time counts as
before it, so give the time when a change and a run share a day).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypeAlias

from paperstack.errors import PaperstackError

#: The file each package ships next to its ``__init__.py``.
FILENAME = "preregistration.toml"
#: What a design-history line may say changed.
KINDS = ("design", "seeds", "margin", "claim", "statistic", "task", "budget")
_OPS = ("gt", "ge", "lt", "le", "within")


class PreregistrationError(PaperstackError):
    """A declaration file that cannot be read, or results that do not match it."""


@dataclasses.dataclass(frozen=True)
class DeclaredClaim:
    """One claim as declared: which rows it compares, how, with which margin and premises."""

    id: str
    lhs: tuple[str, ...]
    rhs: tuple[str, ...] | float
    op: str
    margin: float
    requires: tuple[str, ...] = ()
    optional: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "lhs": list(self.lhs),
            "rhs": self.rhs if isinstance(self.rhs, float) else list(self.rhs),
            "op": self.op,
            "margin": self.margin,
            "requires": list(self.requires),
            "optional": self.optional,
        }


@dataclasses.dataclass(frozen=True)
class Declaration:
    """One command's pre-registration."""

    command: str
    claims: dict[str, DeclaredClaim]
    seeds: tuple[int, ...] | None = None
    stopping: str = ""
    retroactive: str | None = None
    #: The table's name in the file (the command, or e.g. ``"demo --real"`` for a variant).
    name: str = ""
    #: A variant's config flag: the table binds runs where ``config[when]`` is set.
    when: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "when": self.when,
            "seeds": None if self.seeds is None else list(self.seeds),
            "stopping": self.stopping,
            "retroactive": self.retroactive,
            "claims": {k: c.to_json() for k, c in self.claims.items()},
        }


def _key(value: Any, where: str) -> tuple[str, ...]:
    if (
        not isinstance(value, list)
        or not 2 <= len(value) <= 3
        or not all(isinstance(v, str) for v in value)
    ):
        raise PreregistrationError(f"{where}: expected [system, metric] or [system, metric, split]")
    return tuple(value)


def _claim(cid: str, data: Any, where: str) -> DeclaredClaim:
    if not isinstance(data, dict):
        raise PreregistrationError(f"{where}: expected a table")
    unknown = set(data) - {"lhs", "rhs", "op", "margin", "requires", "optional"}
    if unknown:
        raise PreregistrationError(f"{where}: unknown field {sorted(unknown)[0]!r}")
    for name in ("lhs", "rhs", "op"):
        if name not in data:
            raise PreregistrationError(f"{where}: missing field {name!r}")
    rhs_raw = data["rhs"]
    rhs: tuple[str, ...] | float
    if isinstance(rhs_raw, (int, float)) and not isinstance(rhs_raw, bool):
        rhs = float(rhs_raw)
    else:
        rhs = _key(rhs_raw, f"{where}.rhs")
    if data["op"] not in _OPS:
        raise PreregistrationError(f"{where}.op: {data['op']!r} is not one of {', '.join(_OPS)}")
    margin = data.get("margin", 0.0)
    if not isinstance(margin, (int, float)) or isinstance(margin, bool):
        raise PreregistrationError(f"{where}.margin: expected a number, got {margin!r}")
    requires = data.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise PreregistrationError(f"{where}.requires: expected a list of claim ids")
    return DeclaredClaim(
        id=cid,
        lhs=_key(data["lhs"], f"{where}.lhs"),
        rhs=rhs,
        op=data["op"],
        margin=float(margin),
        requires=tuple(requires),
        optional=bool(data.get("optional", False)),
    )


def parse(text: str, source: str = FILENAME) -> dict[str, Declaration]:
    """Every command's :class:`Declaration` in a ``preregistration.toml`` text; a malformed file
    is one :class:`PreregistrationError` naming ``source`` and the field."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PreregistrationError(f"{source}: not valid TOML ({exc})") from None
    out: dict[str, Declaration] = {}
    for name, table in data.items():
        where = f"{source}: [{name}]"
        if not isinstance(table, dict):
            raise PreregistrationError(f"{where}: expected a table")
        command = table.get("command", name)
        when = table.get("when")
        if not isinstance(command, str) or (when is not None and not isinstance(when, str)):
            raise PreregistrationError(f"{where}: 'command' and 'when' are strings")
        seeds = table.get("seeds")
        if seeds is not None and (
            not isinstance(seeds, list) or not all(isinstance(s, int) for s in seeds)
        ):
            raise PreregistrationError(f"{where}.seeds: expected a list of integers")
        claims = table.get("claims", {})
        if not isinstance(claims, dict):
            raise PreregistrationError(f"{where}.claims: expected a table of claims")
        out[name] = Declaration(
            command=command,
            name=name,
            when=when,
            claims={cid: _claim(cid, c, f"{where}.claims.{cid}") for cid, c in claims.items()},
            seeds=None if seeds is None else tuple(seeds),
            stopping=str(table.get("stopping", "")),
            retroactive=table.get("retroactive"),
        )
    return out


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[bytes] | None:
    try:
        return subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, timeout=15, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None


def _repo_relative(path: Path, top_module: str) -> str | None:
    """``path``'s place in the git checkout it was read from, as tracked there: the file itself
    when it is tracked (an editable install, PYTHONPATH), else the checkout's one tracked
    ``*/src/<top_module>/preregistration.toml`` (a non-editable install into a venv inside the
    checkout, as ``nox -s reproduce`` makes, or run from the checkout's folder); None outside."""
    for folder in (path.parent, Path.cwd()):
        done = _git(folder, "rev-parse", "--show-toplevel")
        if done is None or done.returncode != 0:
            continue
        top = Path(done.stdout.decode().strip())
        try:
            rel = path.resolve().relative_to(top.resolve()).as_posix()
        except ValueError:
            rel = None
        if rel is not None:
            tracked = _git(top, "ls-files", "--error-unmatch", "--", rel)
            if tracked is not None and tracked.returncode == 0:
                return rel
        found = _git(top, "ls-files", "--", f"*src/{top_module}/{FILENAME}")
        names = found.stdout.decode().split() if found is not None and found.returncode == 0 else []
        if len(names) == 1:
            return names[0]
    return None


#: What locates a package: a function of it, a module name, or a file inside it.
Anchor: TypeAlias = str | Path | Callable[..., Any]


def package_dir(anchor: Anchor) -> Path | None:
    """The folder of the top-level package ``anchor`` belongs to.

    Found from the source file, not the module name, so a run as ``python -m pkg.cli`` or
    ``python path/to/pkg/cli.py`` (where the module is ``__main__``) finds its declaration and
    CHANGELOG as an installed console script does: from the file, up while ``__init__.py``
    is there."""
    if callable(anchor) and not isinstance(anchor, (str, Path)):
        code = getattr(anchor, "__code__", None)
        file = Path(code.co_filename) if code is not None else None
    elif isinstance(anchor, Path):
        file = anchor
    else:
        top = anchor.split(".")[0]
        try:
            found = Path(str(resources.files(top)))
        except (ModuleNotFoundError, TypeError, ValueError):
            return None
        file = found / "__init__.py"
    if file is None or not file.exists():
        return None
    folder = file.resolve().parent if file.is_file() else file.resolve()
    if not (folder / "__init__.py").is_file():
        return None
    while (folder.parent / "__init__.py").is_file():
        folder = folder.parent
    return folder


def declaration_file(anchor: Anchor) -> Path | None:
    """The ``preregistration.toml`` shipped in the top-level package of ``anchor``, if any."""
    folder = package_dir(anchor)
    path = folder / FILENAME if folder is not None else None
    return path if path is not None and path.is_file() else None


def select(
    declarations: Mapping[str, Declaration], command: str, config: Mapping[str, Any] | None
) -> Declaration | None:
    """The declaration a run of ``command`` with ``config`` is held to: a table whose ``when``
    flag is set in the config (``["demo --real"]`` with ``when = "real"``), else the command's
    table without ``when``."""
    mine = [d for d in declarations.values() if d.command == command]
    flagged = [d for d in mine if d.when and (config or {}).get(d.when)]
    if flagged:
        return flagged[0]
    plain = [d for d in mine if not d.when]
    return plain[0] if plain else None


def fingerprint(
    anchor: Anchor, command: str, config: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """What a run records in ``manifest.preregistration``: the file's repository path (or its
    package path outside a checkout), its sha256, the command, the table chosen for this run
    (:func:`select`) and its content; None when the package declares nothing for it."""
    path = declaration_file(anchor)
    if path is None:
        return None
    raw = path.read_bytes()
    top = path.parent.name
    source = _repo_relative(path, top) or f"{top}/{FILENAME}"
    decl = select(parse(raw.decode("utf-8"), source), command, config)
    if decl is None:
        return None
    return {
        "path": source,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "command": command,
        "table": decl.name,
        # Decided from the command line, before the run's own config can shadow its keys.
        "binding": declared_run(config or {}),
        "declared": decl.to_json(),
    }


def from_json(command: str, data: Mapping[str, Any]) -> Declaration:
    """A :class:`Declaration` back from ``manifest.preregistration['declared']``."""
    claims = {
        cid: DeclaredClaim(
            id=cid,
            lhs=tuple(c["lhs"]),
            rhs=float(c["rhs"]) if isinstance(c["rhs"], (int, float)) else tuple(c["rhs"]),
            op=c["op"],
            margin=float(c["margin"]),
            requires=tuple(c.get("requires", ())),
            optional=bool(c.get("optional", False)),
        )
        for cid, c in data.get("claims", {}).items()
    }
    seeds = data.get("seeds")
    return Declaration(
        command=command,
        when=data.get("when"),
        claims=claims,
        seeds=None if seeds is None else tuple(seeds),
        stopping=str(data.get("stopping", "")),
        retroactive=data.get("retroactive"),
    )


def _as_key(ref: Any) -> tuple[str, ...]:
    key = (ref.system, ref.metric) + ((ref.split,) if ref.split is not None else ())
    return tuple(key)


def deviations(claims: Sequence[Any], decl: Declaration, *, complete: bool = True) -> list[str]:
    """How ``claims`` (the run's :class:`paperstack.records.Claim` list) differ from ``decl``:
    an undeclared claim, a changed comparison, margin, operator or premise, and (``complete``)
    a declared, non-optional claim the run did not make."""
    out: list[str] = []
    seen = set()
    for c in claims:
        seen.add(c.id)
        d = decl.claims.get(c.id)
        if d is None:
            out.append(f"claim {c.id!r} is not declared")
            continue
        rhs = c.rhs if isinstance(c.rhs, float) else _as_key(c.rhs)
        have = (_as_key(c.lhs), rhs, c.op, c.margin, tuple(c.requires))
        want = (d.lhs, d.rhs, d.op, d.margin, d.requires)
        names = ("lhs", "rhs", "op", "margin", "requires")
        for name, h, w in zip(names, have, want, strict=True):
            if h != w:
                out.append(f"claim {c.id!r}: {name} {_show(h)} where {_show(w)} was declared")
    if complete:
        out += [
            f"declared claim {cid!r} is missing"
            for cid, d in decl.claims.items()
            if cid not in seen and not d.optional
        ]
    return out


def declared_run(config: Mapping[str, Any]) -> bool:
    """Whether a run's config is the declared experiment: not ``--quick`` (a smoke run with
    its own smaller systems) and not ``--model`` (a user's own checkpoint)."""
    return not config.get("quick", False) and config.get("model") is None


def _show(v: Any) -> str:
    if isinstance(v, tuple):
        return "/".join(map(str, v)) if all(isinstance(x, str) for x in v) else str(list(v))
    return repr(v)


def at_revision(revision: str, path: str, where: Path) -> bytes | None:
    """The file ``path`` (repository-relative) at ``revision`` (``-dirty`` stripped) of the
    repository holding ``where``, else of the current folder's (results written outside the
    checkout); None when the revision or the file is not there."""
    rev = revision.removesuffix("-dirty")
    for folder in (where if where.is_dir() else where.parent, Path.cwd()):
        done = _git(folder, "show", f"{rev}:{path}")
        if done is not None and done.returncode == 0:
            return done.stdout
    return None


def check(results: Any, where: Path) -> str:
    """Compare ``results`` with the declaration at its revision (else the one it embeds).

    Returns the sentence ``paperstack check`` prints; raises :class:`PreregistrationError`
    when a claim differs from the declaration. ``where`` is the results file (its repository
    is searched for the revision)."""
    m = results.manifest
    pre = m.preregistration
    if not pre:
        return "no pre-registration (the run predates it, or its package declares nothing)"
    command = pre["command"]
    if not pre.get("binding", declared_run(m.config)):
        return (
            "not enforced (a --quick or --model run is not the declared experiment; "
            "claims are compared only for the declared configuration)"
        )
    text = None
    source = "the declaration it embeds"
    if m.git_revision:
        text = at_revision(m.git_revision, pre["path"], where)
    broken = ""
    if text is not None:
        try:
            parse(text.decode("utf-8"))
        except PreregistrationError:
            # The committed file did not parse (an unquoted claim id): no valid declaration
            # existed at the revision, as with a file not committed yet.
            text, broken = None, " (the file at its revision is not valid TOML)"
    if text is not None:
        table = pre.get("table", command)
        decl = parse(text.decode("utf-8"), f"{pre['path']}@{m.git_revision[:12]}").get(table)
        if decl is None:
            raise PreregistrationError(
                f"manifest.preregistration: {pre['path']} at {m.git_revision[:12]} declares no "
                f"[{table}]"
            )
        source = f"{pre['path']} at {m.git_revision.removesuffix('-dirty')[:12]}"
    else:
        decl = from_json(command, pre["declared"])
        if broken:
            source += broken
        elif m.git_revision:
            source += " (not at its revision: declared in an uncommitted tree or a new file)"
    # A run that makes no claim at all (a user's own data) is not the declared experiment.
    found = deviations(results.claims, decl, complete=bool(results.claims))
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise PreregistrationError(
            f"field 'claims': {found[0]}{more}, against {source}: claims must be declared "
            "before the run"
        )
    seeds = m.config.get("seeds")
    note = ""
    if decl.seeds is not None and seeds is not None and tuple(seeds) != decl.seeds:
        note = f"; seeds {list(seeds)} are not the declared {list(decl.seeds)} (a user's run)"
    return f"claims match {source}{note}"


# -- design history ----------------------------------------------------------------------------

_LINE = re.compile(
    r"^- (?P<date>\d{4}-\d{2}-\d{2})(?: (?P<time>(?:[01]\d|2[0-3]):[0-5]\d) UTC)? "
    r"(?P<command>[\w-]+(?: --[\w-]+)*): (?P<kind>[a-z]+): (?P<text>.+)$"
)


@dataclasses.dataclass(frozen=True)
class Change:
    """One design-history entry."""

    date: str
    command: str
    kind: str
    text: str
    #: ``HH:MM`` (UTC) or ``""``: what orders a change against a run of the same day.
    time: str = ""

    @property
    def when(self) -> str:
        """The date, and the time of day where the entry gives one."""
        return f"{self.date} {self.time} UTC" if self.time else self.date


def design_history(changelog: str, source: str = "CHANGELOG.md") -> list[Change]:
    """The entries of the ``## Design history`` section of a CHANGELOG text, oldest first.

    Continuation lines (indented) join the entry above; a line that starts with ``- `` but does
    not read ``- YYYY-MM-DD [HH:MM UTC] command: kind: text`` with a known kind is an error
    naming it, so a typo cannot drop a change from every report silently. ``command`` may carry
    flags that name a declaration table (``demo --real``)."""
    lines = changelog.splitlines()
    try:
        start = next(i for i, s in enumerate(lines) if s.strip().lower() == "## design history")
    except StopIteration:
        return []
    out: list[Change] = []
    for number, line in enumerate(lines[start + 1 :], start + 2):
        if line.startswith("## ") or line.startswith("# "):
            break
        if line.startswith("- "):
            match = _LINE.match(line.rstrip())
            if match is None or match["kind"] not in KINDS:
                raise PreregistrationError(
                    f"{source}:{number}: a design-history line reads "
                    f"'- YYYY-MM-DD [HH:MM UTC] command: kind: text' with kind one of "
                    f"{', '.join(KINDS)}: "
                    f"{line[:80]!r}"
                )
            fields = match.groupdict()
            out.append(Change(**{**fields, "time": fields["time"] or ""}))
        elif line.startswith((" ", "\t")) and line.strip() and out:
            last = out[-1]
            out[-1] = dataclasses.replace(last, text=f"{last.text} {line.strip()}")
    return sorted(out, key=lambda c: (c.date, c.time))


def changelog_for(anchor: Anchor) -> Path | None:
    """The CHANGELOG.md of the checkout the package of ``anchor`` runs from (``src/<module>``
    two folders below it; for an install inside a checkout, or run from one, the checkout's
    tracked copy), or None for an installed wheel elsewhere, which carries no CHANGELOG."""
    pkg_dir = package_dir(anchor)
    if pkg_dir is None:
        return None
    candidate = pkg_dir.parent.parent / "CHANGELOG.md"
    if pkg_dir.parent.name == "src" and candidate.is_file():
        return candidate
    # A non-editable install run from inside its checkout (nox's test and reproduce sessions):
    # the checkout's one tracked src/<module>, as for the declaration.
    for folder in (pkg_dir, Path.cwd()):
        top = _git(folder, "rev-parse", "--show-toplevel")
        if top is None or top.returncode != 0:
            continue
        root = Path(top.stdout.decode().strip())
        found = _git(root, "ls-files", "--", f"*src/{pkg_dir.name}/__init__.py")
        names = found.stdout.decode().split() if found is not None and found.returncode == 0 else []
        if len(names) == 1:
            tracked = (root / names[0]).parent.parent.parent / "CHANGELOG.md"
            if tracked.is_file():
                return tracked
    return None


def history_section(
    changes: Sequence[Change] | None, command: str, *, later: Sequence[Change] = ()
) -> str:
    """The report's ``## Design history`` section for ``command``: the changes this run came
    after, and (``later``: recorded since the run, so not in its results; what ``paperstack
    collect`` finds) the changes a rerun would apply."""
    head = "## Design history\n\n"
    if changes is None:
        return head + "_not available: the package ran from an install without its CHANGELOG_\n"
    after = [c for c in later if c.command == command]
    mine = [c for c in changes if c.command == command and c not in after]
    if not mine:
        text = head + (
            f"No change of design, seeds, margins, claims or statistics of `{command}` after an "
            "earlier run is recorded in the package's CHANGELOG.\n"
        )
    else:
        lines = [f"- {c.when} ({c.kind}): {c.text}" for c in mine]
        text = head + (
            "Changes made after an earlier run of this command (from the package's CHANGELOG); "
            "a run after a change marked exploratory does not confirm its claims:\n\n"
            + "\n".join(lines)
            + "\n"
        )
    if after:
        lines = [f"- {c.when} ({c.kind}): {c.text}" for c in after]
        text += (
            "\n**Recorded after this run** (not in these results: the command must be rerun "
            "to reflect them):\n\n" + "\n".join(lines) + "\n"
        )
    return text


def changes_since(results: Any, changes: Sequence[Change]) -> list[Change]:
    """The entries of ``changes`` made after the run of ``results`` started: recorded since, so
    not in its results. By the entry's date (and time of day, UTC, where it gives one), not by
    the CHANGELOG at the run's revision, because a history may be written down after the fact
    (its entries dated when the change was made). An entry of the run's own day counts as
    before it unless its time is later than the run's start (to the minute). A run that
    resumed parts computed earlier (``manifest.resumed``) started when its first part did."""
    started = _first_start(results.manifest)
    day = started[:10]
    if not day:
        return []
    clock = ""
    try:
        at = datetime.datetime.fromisoformat(started)
    except ValueError:
        at = None
    if at is not None:
        if at.tzinfo is not None:
            at = at.astimezone(datetime.timezone.utc)
        day, clock = at.strftime("%Y-%m-%d"), at.strftime("%H:%M")
    return [
        c
        for c in changes
        if c.date > day or (c.date == day and c.time and clock and c.time > clock)
    ]


def _first_start(manifest: Any) -> str:
    """The manifest's start, or its earliest resumed part's when that is earlier (both
    ISO 8601 times in UTC as paperstack writes them; one that does not parse is ignored)."""
    started = str(manifest.started or "")
    parts = getattr(manifest, "resumed", None) or []
    times = [started] + [str(p.get("started", "")) for p in parts]
    parsed = []
    for text in times:
        try:
            at = datetime.datetime.fromisoformat(text)
        except ValueError:
            continue
        if at.tzinfo is None:
            at = at.replace(tzinfo=datetime.timezone.utc)
        parsed.append((at, text))
    return min(parsed)[1] if parsed else started


def history_for(anchor: Anchor, command: str) -> str:
    """The report's design-history section for ``command`` of the package ``anchor`` belongs
    to, from its CHANGELOG; a malformed entry is an error (it would otherwise vanish from every
    report). What a command that writes its report without ``ContractCLI`` passes to
    :func:`paperstack.report.write_report` as ``history``."""
    path = changelog_for(anchor)
    if path is None:
        return history_section(None, command)
    return history_section(design_history(path.read_text(encoding="utf-8"), str(path)), command)


def preregistration_section(results: Any, where: Path | None = None) -> str:
    """The report's ``## Pre-registration`` section: the declaration's file and fingerprint,
    the stopping rule, declared against run seeds, and whether the claims match the declaration
    the run read. With ``where`` (the results file in a checkout: ``paperstack collect``), also
    the verdict of :func:`check` against the declaration at the run's git revision, so a claim
    declared in the same uncommitted tree that ran is marked as such in the report itself."""
    m = results.manifest
    pre = m.preregistration
    head = "## Pre-registration\n\n"
    if not pre:
        return head + "_none: this run predates the package's declaration_\n"
    decl = from_json(pre["command"], pre["declared"])
    enforced = bool(pre.get("binding", declared_run(m.config)))
    found = deviations(results.claims, decl, complete=bool(results.claims)) if enforced else []
    seeds = m.config.get("seeds")
    # The table the run was held to (``["demo --real"]``), not only its command's name.
    key = _bare_or_quoted(str(pre.get("table") or pre["command"]))
    lines = [
        f"- declared in `{pre['path']}` (sha256 {pre['sha256'][:12]}), `[{key}]`",
        f"- stopping rule: {decl.stopping or 'not stated'}",
        f"- seeds: declared {list(decl.seeds) if decl.seeds is not None else 'not fixed'}, "
        f"run {seeds}",
        "- claims: "
        + (
            "not compared (a --quick or --model run is not the declared experiment)"
            if not enforced
            else "all match the declaration"
            if not found
            else "DEVIATE: " + "; ".join(found)
        ),
    ]
    if decl.retroactive:
        lines.append(f"- retroactive: {decl.retroactive}")
    if where is not None and enforced:
        try:
            lines.append(f"- `paperstack check`: {check(results, where)}")
        except PreregistrationError as exc:
            lines.append(f"- `paperstack check`: FAILS: {exc}")
    return head + "\n".join(lines) + "\n"


def _toml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _bare_or_quoted(key: str) -> str:
    """A TOML key as written in a table header: bare when it may be (letters, digits, ``_``,
    ``-``), else quoted (a claim id with a dot would otherwise open a nested table)."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_str(key)


def _toml_key(ref: Any) -> str:
    if isinstance(ref, float):
        return repr(ref)
    return "[" + ", ".join(_toml_str(x) for x in _as_key(ref)) + "]"


def to_toml(
    results: Any, command: str, *, stopping: str = "", retroactive: str | None = None
) -> str:
    """A ``[command]`` table declaring what ``results`` claims and the seeds it ran: the way
    to write a declaration from a run on validation seeds, before the reported run."""
    m = results.manifest
    seeds = m.config.get("seeds")
    out = [f"[{_bare_or_quoted(command)}]"]
    if seeds is not None:
        out.append(f"seeds = {list(seeds)}")
    out.append(f"stopping = {_toml_str(stopping)}")
    if retroactive:
        out.append(f"retroactive = {_toml_str(retroactive)}")
    for c in results.claims:
        out += [
            "",
            f"[{_bare_or_quoted(command)}.claims.{_bare_or_quoted(c.id)}]",
            f"lhs = {_toml_key(c.lhs)}",
            f"rhs = {_toml_key(c.rhs)}",
            f'op = "{c.op}"',
            f"margin = {c.margin!r}",
        ]
        if c.requires:
            out.append("requires = [" + ", ".join(_toml_str(r) for r in c.requires) + "]")
    return "\n".join(out) + "\n"

"""What a run leaves behind: its manifest, its ``results.json``, its JSONL logs, written safely.

Every paperstack package reports through one schema so that ``nox -s reproduce`` can collect
all nineteen reports into one index, and so that a reader can check a claim against the numbers
it was computed from:

``results.json`` = ``{"schema": 1, "manifest": {...}, "rows": [...], "claims": [...]}``

- a *row* is one measured number: ``system`` (the method or baseline), ``metric``, ``value``,
  optional ``ci95`` (low, high), ``n`` (sample size) and ``split``;
- a *claim* is a comparison between rows (or a row and a constant) whose truth is computed by
  :meth:`Claim.compare` from the rows, never typed in. The comparison is stored with the claim, so
  :func:`load_results` recomputes every claim and rejects a file whose ``held`` disagrees.

Writes are crash-safe: :func:`atomic_write` writes a temporary file, fsyncs it and renames it over
the target, so a killed run leaves the old file or the new one, never half of one. JSONL logs are
append-only with one fsynced line per record; a torn last line (the process died mid-write) is
reported by :func:`read_jsonl` and dropped by :class:`JsonlWriter` when it reopens the file to
resume.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from paperstack.errors import PaperstackError

__all__ = [
    "SCHEMA_VERSION",
    "Claim",
    "JsonlWriter",
    "Manifest",
    "Results",
    "ResultsFormatError",
    "Row",
    "RowKey",
    "atomic_write",
    "atomic_write_json",
    "load_results",
    "prepare_out_dir",
    "read_jsonl",
    "write_results",
]

SCHEMA_VERSION = 1

#: Libraries whose versions a manifest records when they are installed.
TRACKED_LIBRARIES = (
    "paperstack-core",
    "numpy",
    "torch",
    "transformers",
    "tokenizers",
    "datasets",
    "trl",
    "accelerate",
    "triton",
    "vllm",
    "pyscipopt",
    "scipy",
)

Op = Literal["gt", "ge", "lt", "le", "within"]


class ResultsFormatError(PaperstackError):
    """A results file, JSONL log or record that does not follow the schema."""


# --------------------------------------------------------------------------- atomic writes


def _process_umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; restore at once
    os.umask(mask)
    return mask


_UMASK = _process_umask()  # read once at import, before any threads of ours exist


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` to ``path`` so that readers only ever see the old or the new content.

    The bytes go to a temporary file in the same directory (a rename is only atomic within one
    filesystem), are flushed and fsynced, and the file is renamed over ``path``; the directory is
    then fsynced so the rename itself survives a power cut. The file gets the mode a plain
    ``open(path, "w")`` would give (``0o666`` less the umask; an existing file keeps its mode),
    not the owner-only mode of the temporary file.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except OSError:
        mode = 0o666 & ~_UMASK
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)
    return target


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, indent: int = 2) -> Path:
    """:func:`atomic_write` of ``obj`` as JSON; NaN and infinities are refused (not JSON)."""
    try:
        text = json.dumps(obj, indent=indent, allow_nan=False, ensure_ascii=False)
    except ValueError as exc:
        raise ResultsFormatError(f"{path}: cannot write as JSON: {exc}") from None
    return atomic_write(path, text + "\n")


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def prepare_out_dir(path: str | os.PathLike[str]) -> Path:
    """Create the output directory of a run up front, failing in one line if it cannot be used.

    Checked before any work starts, so a ten-minute demo does not die at its last write because
    ``--out`` named a file or a read-only place.
    """
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise PaperstackError(f"--out {out}: exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise PaperstackError(f"--out {out}: cannot write there ({exc.strerror})") from None
    return out


# --------------------------------------------------------------------------- JSONL


class JsonlWriter:
    """Append-only JSONL log: one JSON object per line, each line flushed and fsynced.

    Reopening an existing file resumes it: a torn final line left by a killed process is cut off
    first, so the log stays parseable and nothing already complete is lost. Use as a context
    manager, or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._repair_tail()
        self._fh = open(self.path, "ab")  # noqa: SIM115 - held open across writes

    def _repair_tail(self) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as fh:
            data = fh.read()
            if data.endswith(b"\n"):
                return
            keep = data.rfind(b"\n") + 1  # 0 when the only line is torn
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record (a JSON object) as a single line."""
        try:
            line = json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise ResultsFormatError(f"{self.path}: record is not JSON: {exc}") from None
        self._fh.write(line.encode("utf-8") + b"\n")
        self._fh.flush()
        if self._fsync:
            os.fsync(self._fh.fileno())

    def write_many(self, records: Iterable[Mapping[str, Any]]) -> None:
        for record in records:
            self.write(record)

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def iter_jsonl(
    path: str | os.PathLike[str], *, allow_torn_tail: bool = False
) -> Iterator[dict[str, Any]]:
    """Yield the objects of a JSONL file, failing with one line that names the bad line.

    ``allow_torn_tail`` skips an incomplete final line (no newline, not valid JSON): what a killed
    writer leaves. By default it is an error, so a truncated file is never mistaken for a complete
    one.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ResultsFormatError(f"{p}: no such file") from None
    except OSError as exc:
        raise ResultsFormatError(f"{p}: cannot read: {exc.strerror}") from None
    lines = raw.split(b"\n")
    complete = raw.endswith(b"\n") or not raw
    if complete:
        lines = lines[:-1]
    for number, line in enumerate(lines, start=1):
        last = number == len(lines)
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            if last and not complete:
                if allow_torn_tail:
                    return
                raise ResultsFormatError(
                    f"{p}: line {number}: truncated record (file ends mid-line; the writer was "
                    "probably killed)"
                ) from None
            msg = getattr(exc, "msg", str(exc))
            raise ResultsFormatError(f"{p}: line {number}: invalid JSON: {msg}") from None
        if not isinstance(obj, dict):
            raise ResultsFormatError(
                f"{p}: line {number}: expected a JSON object, got {type(obj).__name__}"
            )
        if last and not complete and not allow_torn_tail:
            raise ResultsFormatError(
                f"{p}: line {number}: truncated record (no final newline; the writer was "
                "probably killed)"
            )
        yield obj


def read_jsonl(
    path: str | os.PathLike[str], *, allow_torn_tail: bool = False
) -> list[dict[str, Any]]:
    """All objects of a JSONL file; see :func:`iter_jsonl`."""
    return list(iter_jsonl(path, allow_torn_tail=allow_torn_tail))


# --------------------------------------------------------------------------- schema


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Manifest(_Model):
    """Who ran what, where: enough to rerun it and to see why two runs differ."""

    package: str
    version: str
    seed: int | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    command: list[str] = Field(default_factory=list)
    git_revision: str | None = None
    libraries: dict[str, str] = Field(default_factory=dict)
    host: dict[str, Any] = Field(default_factory=dict)
    started: str = ""
    finished: str | None = None

    @classmethod
    def collect(
        cls,
        package: str,
        version: str,
        seed: int | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        command: Sequence[str] | None = None,
    ) -> Manifest:
        """A manifest for the current process: git revision, library versions, host, start time."""
        return cls(
            package=package,
            version=version,
            seed=seed,
            config=_jsonable(dict(config or {})),
            command=list(sys.argv if command is None else command),
            git_revision=_git_revision(),
            libraries=library_versions(),
            host=_host(),
            started=_now(),
        )

    def finish(self) -> Manifest:
        """A copy stamped with the finishing time."""
        return self.model_copy(update={"finished": _now()})


class Row(_Model):
    """One measured number: ``value`` of ``metric`` for ``system`` on ``split``."""

    system: str = Field(min_length=1)
    metric: str = Field(min_length=1)
    value: float
    ci95: tuple[float, float] | None = None
    n: int | None = Field(default=None, ge=0)
    split: str | None = None
    unit: str | None = None

    @field_validator("value")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @field_validator("ci95")
    @classmethod
    def _ordered(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not v[0] <= v[1]:
            raise ValueError("low bound must not exceed high bound")
        return v

    @property
    def key(self) -> RowKey:
        return RowKey(system=self.system, metric=self.metric, split=self.split)


class RowKey(_Model):
    """Names one row: ``(system, metric)`` or ``(system, metric, split)``."""

    system: str
    metric: str
    split: str | None = None

    @classmethod
    def of(cls, ref: RowKey | Sequence[str | None]) -> RowKey:
        if isinstance(ref, RowKey):
            return ref
        parts = list(ref)
        if len(parts) not in (2, 3):
            raise ResultsFormatError(f"row reference {ref!r} must be (system, metric[, split])")
        return cls(
            system=str(parts[0]), metric=str(parts[1]), split=parts[2] if len(parts) == 3 else None
        )

    def __str__(self) -> str:
        return f"{self.system}/{self.metric}" + (f"[{self.split}]" if self.split else "")


_OPS: dict[str, str] = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "within": "|d| <="}


def _decide(op: str, d: float, margin: float) -> bool:
    if op == "gt":
        return d > margin
    if op == "ge":
        return d >= margin
    if op == "lt":
        return d < margin
    if op == "le":
        return d <= margin
    if op == "within":
        return abs(d) <= margin
    raise ResultsFormatError(f"claim op {op!r} is not one of {sorted(_OPS)}")


class Claim(_Model):
    """A paper's claim checked on this run's rows.

    With ``d = lhs - rhs`` (``rhs`` a row or a constant) the claim holds when
    ``d > margin`` (gt), ``d >= margin`` (ge), ``d < margin`` (lt), ``d <= margin`` (le) or
    ``|d| <= margin`` (within). Build claims with :meth:`compare`; ``held`` is derived.
    """

    id: str = Field(min_length=1)
    statement: str
    op: Op
    lhs: RowKey
    rhs: RowKey | float
    margin: float = 0.0
    lhs_value: float
    rhs_value: float
    held: bool

    @classmethod
    def compare(
        cls,
        id: str,
        statement: str,
        rows: Sequence[Row],
        lhs: RowKey | Sequence[str | None],
        op: Op,
        rhs: RowKey | Sequence[str | None] | float,
        margin: float = 0.0,
    ) -> Claim:
        """Evaluate ``lhs op rhs`` (shifted by ``margin``) on ``rows``; see the class docstring."""
        if op not in _OPS:
            raise ResultsFormatError(f"claim {id!r}: op {op!r} is not one of {sorted(_OPS)}")
        table = _index(rows)
        left = RowKey.of(lhs)
        lv = _lookup(table, left, id)
        if isinstance(rhs, (int, float)):
            right: RowKey | float = float(rhs)
            rv = float(rhs)
        else:
            right = RowKey.of(rhs)
            rv = _lookup(table, right, id)
        return cls(
            id=id,
            statement=statement,
            op=op,
            lhs=left,
            rhs=right,
            margin=float(margin),
            lhs_value=lv,
            rhs_value=rv,
            held=_decide(op, lv - rv, float(margin)),
        )

    def describe(self) -> str:
        """``ra2/acc (0.91) - rmu/acc (0.84) = 0.07 > 0``: the arithmetic behind ``held``."""
        right = str(self.rhs) if isinstance(self.rhs, RowKey) else "constant"
        return (
            f"{self.lhs} ({self.lhs_value:.4g}) - {right} ({self.rhs_value:.4g}) = "
            f"{self.lhs_value - self.rhs_value:.4g} {_OPS[self.op]} {self.margin:.4g}"
        )


def _index(rows: Sequence[Row]) -> dict[RowKey, float]:
    table: dict[RowKey, float] = {}
    for row in rows:
        if row.key in table:
            raise ResultsFormatError(f"duplicate row {row.key}")
        table[row.key] = row.value
    return table


def _lookup(table: Mapping[RowKey, float], key: RowKey, claim_id: str) -> float:
    try:
        return table[key]
    except KeyError:
        raise ResultsFormatError(
            f"claim {claim_id!r} names row {key}, which is not in rows"
        ) from None


class Results(_Model):
    """The whole ``results.json``: manifest, rows, and the claims computed from the rows."""

    schema_: int = Field(default=SCHEMA_VERSION, alias="schema")
    manifest: Manifest
    rows: list[Row]
    claims: list[Claim] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def check(self) -> Results:
        """Recompute every claim from the rows; raise if a stored claim disagrees with them."""
        if self.schema_ != SCHEMA_VERSION:
            raise ResultsFormatError(f"field 'schema': {self.schema_} is not {SCHEMA_VERSION}")
        table = _index(self.rows)
        ids: set[str] = set()
        for i, claim in enumerate(self.claims):
            if claim.id in ids:
                raise ResultsFormatError(f"field 'claims[{i}].id': duplicate claim {claim.id!r}")
            ids.add(claim.id)
            lv = _lookup(table, claim.lhs, claim.id)
            rv = claim.rhs if isinstance(claim.rhs, float) else _lookup(table, claim.rhs, claim.id)
            held = _decide(claim.op, lv - rv, claim.margin)
            if (lv, rv, held) != (claim.lhs_value, claim.rhs_value, claim.held):
                raise ResultsFormatError(
                    f"field 'claims[{i}]': claim {claim.id!r} does not follow from its rows "
                    f"(recomputed held={held})"
                )
        return self

    def row(self, system: str, metric: str, split: str | None = None) -> Row:
        """The row with this key (a :class:`ResultsFormatError` if there is none)."""
        key = RowKey(system=system, metric=metric, split=split)
        for r in self.rows:
            if r.key == key:
                return r
        raise ResultsFormatError(f"no row {key}")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def write_results(path: str | os.PathLike[str], results: Results) -> Path:
    """Check ``results`` and write it atomically as JSON. ``path`` may be a directory."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    results.check()
    return atomic_write_json(p, results.to_json())


def load_results(path: str | os.PathLike[str]) -> Results:
    """Read and validate a ``results.json`` (or a directory holding one).

    Every failure is one line naming the file and the field, e.g.
    ``out/results.json: field 'rows[2].value': Input should be a valid number``.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsFormatError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsFormatError(f"{p}: cannot read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsFormatError(
            f"{p}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    if not isinstance(data, dict):
        raise ResultsFormatError(f"{p}: expected a JSON object at the top level")
    try:
        results = Results.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = _field_path(err["loc"])
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ResultsFormatError(f"{p}: field '{where}': {err['msg']}{more}") from None
    try:
        return results.check()
    except ResultsFormatError as exc:
        raise ResultsFormatError(f"{p}: {exc}") from None


def _field_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("float", "RowKey", "tuple[float, float]", "function-after[_finite(), float]"):
            continue  # union-branch tags pydantic adds; not fields a user wrote
        else:
            out += ("." if out else "") + str(part)
    return out or "<root>"


# --------------------------------------------------------------------------- manifest helpers


def library_versions(names: Iterable[str] = TRACKED_LIBRARIES) -> dict[str, str]:
    """Installed versions of ``names`` (missing ones are left out)."""
    found: dict[str, str] = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _git_revision() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    rev = out.stdout.strip()
    try:
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        dirty = ""
    return rev + ("-dirty" if dirty else "") if rev else None


def _host() -> dict[str, Any]:
    host: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }
    torch = sys.modules.get("torch")  # only report CUDA if the run already imported torch
    if torch is not None:
        try:
            if torch.cuda.is_available():
                host["cuda_device"] = torch.cuda.get_device_name(0)
        except Exception:  # pragma: no cover - broken CUDA setups must not fail a report
            pass
    return host


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _jsonable(obj: Any) -> Any:
    """Config values as plain JSON (paths and tuples become strings and lists)."""
    return json.loads(json.dumps(obj, default=str))

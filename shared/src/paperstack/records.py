"""What a run leaves behind: its manifest, its ``results.json``, its JSONL logs, written safely.

Every paperstack package reports through one schema so that ``nox -s reproduce`` can collect
all nineteen reports into one index, and so that a reader can check a claim against the numbers
it was computed from:

``results.json`` = ``{"schema": 2, "manifest": {...}, "rows": [...], "claims": [...]}``

- a *row* is one measured number: ``system`` (the method or baseline), ``metric``, ``value``,
  optional ``ci95`` (low, high), ``n`` (sample size) and ``split``, and what a comparison needs:
  the per-seed or per-item values it averages (``seeds`` / ``items``, keyed by id) or, for a
  proportion, its ``k`` successes of ``n``;
- a *claim* is a comparison between rows (or a row and a constant) computed by
  :meth:`Claim.compare` from the rows, never typed in. Its verdict, *held*, *not_held* or
  *inconclusive*, comes from the 95% interval of the compared difference, never from two point
  estimates (:func:`judge`). The comparison is stored with the claim, so :func:`load_results`
  recomputes every claim and rejects a file whose verdict does not follow from its rows.

Writes are crash-safe: :func:`atomic_write` writes a temporary file, fsyncs it and renames it over
the target, so a killed run leaves the old file or the new one, never half of one. JSONL logs are
append-only with one fsynced line per record; a torn last line (the process died mid-write) is
reported by :func:`read_jsonl` and dropped by :class:`JsonlWriter` when it reopens the file to
resume.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import math
import os
import platform
import re
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from paperstack.errors import PaperstackError

__all__ = [
    "SCHEMA_VERSION",
    "VERDICT_TEXT",
    "Claim",
    "JsonlWriter",
    "Judgement",
    "Manifest",
    "Results",
    "ResultsFormatError",
    "Row",
    "RowKey",
    "atomic_write",
    "atomic_write_json",
    "iter_user_jsonl",
    "judge",
    "load_results",
    "output_dir",
    "prepare_out_dir",
    "read_jsonl",
    "redact_secrets",
    "revision_known",
    "save_figure",
    "strict_json_loads",
    "verdict_counts",
    "write_results",
]

SCHEMA_VERSION = 2

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
    if target.is_dir():
        raise PaperstackError(f"{target}: is a directory; name a file to write")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise PaperstackError(f"{target.parent}: exists and is not a directory") from None
    except OSError as exc:
        raise PaperstackError(f"{target.parent}: cannot create ({exc.strerror})") from None
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except OSError:
        mode = 0o666 & ~_UMASK
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise PaperstackError(f"{target}: cannot write there ({exc.strerror})") from None
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
    ``--out`` named a file, a dangling link, a read-only place or a full disk: a 4 KiB probe is
    written, flushed and removed (an empty file would still fit on a full file system). An empty
    path is refused (``Path("")`` would be the current folder). A folder this call created is
    removed again when the probe fails.
    """
    if not os.fspath(path).strip():
        raise PaperstackError("--out: empty path; name the output directory")
    out = Path(path)
    if out.is_symlink() and not out.exists():
        raise PaperstackError(f"--out {out}: a dangling symbolic link (to {os.readlink(out)})")
    if out.exists() and not out.is_dir():
        raise PaperstackError(f"--out {out}: exists and is not a directory")
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-test-") as fh:
            fh.write(b"\0" * 4096)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()
        raise PaperstackError(f"--out {out}: cannot write there ({exc.strerror})") from None
    return out


@contextlib.contextmanager
def output_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """:func:`prepare_out_dir` for a command's whole run: ``with output_dir(args.out) as out:``.

    When the body fails (an error, Ctrl-C, SIGTERM through ``cli_guard``) and this call created
    the folder, the folder is removed again if nothing was written into it, so a failed first
    run leaves no empty ``--out`` behind to confuse the rerun; a folder that existed before, or
    one holding what the run already wrote, is kept.
    """
    created = not Path(path).exists()
    out = prepare_out_dir(path)
    try:
        yield out
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()  # only succeeds on an empty directory
        raise


def save_figure(fig: Any, path: str | os.PathLike[str], **savefig: Any) -> Path:
    """Save a matplotlib figure atomically: rendered in memory, then :func:`atomic_write`.

    ``fig.savefig(path)`` straight to the final name leaves a 0-byte or torn image behind when
    the disk fills or the process is killed mid-write; here a reader sees the old image or the
    new one. The format comes from the suffix unless ``format=`` is given.
    """
    import io

    target = Path(path)
    buf = io.BytesIO()
    savefig.setdefault("format", target.suffix.lstrip(".") or "png")
    fig.savefig(buf, **savefig)
    return atomic_write(target, buf.getvalue())


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
        start = self._fh.tell()
        try:
            self._fh.write(line.encode("utf-8") + b"\n")
            self._fh.flush()
            if self._fsync:
                os.fsync(self._fh.fileno())
        except OSError:
            # A full disk mid-line: cut the torn line off so the log stays whole, then report.
            with contextlib.suppress(OSError, ValueError):
                self._fh.close()
                with open(self.path, "rb+") as fh:
                    fh.truncate(start)
                self._fh = open(self.path, "ab")  # noqa: SIM115
            raise

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


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows (NaN and infinities are refused)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} overflows a 64-bit float")
    return value


def strict_json_loads(text: str | bytes) -> Any:
    """``json.loads`` that refuses ``NaN``, ``Infinity`` and numbers that overflow to one
    (``1e999``): none is JSON, and each would pass into a verdict as a number."""
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)


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
    if b"\0" in raw:
        at = raw.index(b"\0")
        number = raw.count(b"\n", 0, at) + 1
        raise ResultsFormatError(
            f"{p}: line {number}: NUL bytes (zeros written in place of data: a crash before the "
            "data reached the disk, or not a JSONL file)"
        )
    lines = raw.split(b"\n")
    complete = raw.endswith(b"\n") or not raw
    if complete:
        lines = lines[:-1]
    for number, line in enumerate(lines, start=1):
        last = number == len(lines)
        if not line.strip():
            continue
        try:
            obj = strict_json_loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            if last and not complete and isinstance(exc, (json.JSONDecodeError, UnicodeError)):
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


def iter_user_jsonl(
    path: str | os.PathLike[str],
    *,
    what: str = "a JSONL file",
    error: type[Exception] = ResultsFormatError,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(where, object)`` for each non-blank line of a user's JSONL input file.

    ``where`` is ``"<path>: line <n>"``, so a loader's own field checks name the line the same
    way these do. Unlike :func:`iter_jsonl` (our own append-only logs, where a missing final
    newline means a killed writer) a hand-written file may end without a newline. Every failure
    is one ``error`` (a package passes its own error class) naming the file and, where there is
    one, the line: a directory, a missing or unreadable file, a UTF-16 file, a line that is not
    UTF-8 (with the byte and column), not JSON, or not a JSON object. A UTF-8 byte-order mark
    is accepted.
    """
    p = Path(path)
    if p.is_dir():
        raise error(f"{p}: is a directory, expected {what}")
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise error(f"{p}: no such file") from None
    except OSError as exc:
        raise error(f"{p}: cannot read ({exc.strerror or exc})") from None
    if raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark, as some editors write
        raw = raw[3:]
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise error(f"{p}: is UTF-16 encoded; expected {what} in UTF-8 (save it as UTF-8)")
    for number, line in enumerate(raw.split(b"\n"), start=1):
        where = f"{p}: line {number}"
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error(
                f"{where}: not UTF-8 text (byte 0x{line[exc.start]:02x} at column "
                f"{exc.start + 1}; save the file as UTF-8)"
            ) from None
        if not text.strip():
            continue
        try:
            obj = strict_json_loads(text)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: not JSON ({exc.msg})") from None
        except ValueError as exc:
            raise error(f"{where}: {exc}") from None
        if not isinstance(obj, dict):
            raise error(f"{where}: expected a JSON object, got {type(obj).__name__}")
        yield where, obj


# --------------------------------------------------------------------------- schema


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_SECRET_PARAMS = re.compile(
    r"(?P<key>[?&;](?:api[_-]?key|key|token|access[_-]?token|password|secret|sig)=)[^&#\s]+",
    re.IGNORECASE,
)


def redact_secrets(text: str) -> str:
    """``https://user:pw@host/v1?api_key=s`` -> ``https://***@host/v1?api_key=***``: what a URL
    may carry that must not land in a manifest, a cost card or a log."""
    text = _URL_CREDENTIALS.sub(r"\g<scheme>***@", text)
    return _SECRET_PARAMS.sub(r"\g<key>***", text)


def _redact(obj: Any) -> Any:
    if isinstance(obj, str):
        return redact_secrets(obj)
    if isinstance(obj, dict):
        return {k: _redact(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_redact(v) for v in obj]
    return obj


class Manifest(_Model):
    """Who ran what, where: enough to rerun it and to see why two runs differ."""

    package: str
    version: str
    seed: int | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    command: list[str] = Field(default_factory=list)
    git_revision: str | None = None
    #: For a run from a tree with uncommitted changes (``git_revision`` ends in ``-dirty``):
    #: ``{"diff_sha256": ..., "files": [...]}``, the hash of ``git diff HEAD`` and the changed
    #: and untracked paths, so a reader knows what the revision alone does not say.
    dirty: dict[str, Any] | None = None
    #: The command's declaration (:mod:`paperstack.preregistration`): the file's repository
    #: path, its sha256, the command and the declared claims, seeds and stopping rule, read
    #: before the run. None for a package that declares nothing (and for files before 0.3).
    preregistration: dict[str, Any] | None = None
    libraries: dict[str, str] = Field(default_factory=dict)
    host: dict[str, Any] = Field(default_factory=dict)
    started: str = ""
    finished: str | None = None
    #: The resumable parts (:mod:`paperstack.resume`) this run loaded instead of computing:
    #: ``[{"key", "file", "started", "seconds", "host", "revision"}]``, each computed by an earlier
    #: process with the same code and flags. None when every part was computed here.
    resumed: list[dict[str, Any]] | None = None

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
            config=_redact(_jsonable(dict(config or {}))),
            command=[redact_secrets(a) for a in (sys.argv if command is None else command)],
            git_revision=_git_revision(),
            dirty=_git_dirty(),
            libraries=library_versions(),
            host=_host(),
            started=_now(),
        )

    def finish(self) -> Manifest:
        """A copy stamped with the finishing time (and the load average then, beside the
        start's)."""
        host = dict(self.host)
        with contextlib.suppress(OSError, AttributeError):
            host["loadavg_at_finish"] = [round(x, 2) for x in os.getloadavg()]
        return self.model_copy(update={"finished": _now(), "host": host})


class Row(_Model):
    """One measured number: ``value`` of ``metric`` for ``system`` on ``split``.

    What a claim can be judged on comes with the row:

    - ``seeds`` or ``items``: the per-seed (or per-item) values the number averages, keyed by
      seed or item id, so two rows measured on the same seeds or items compare *paired*;
      ``value`` must be their mean;
    - ``k`` successes of ``n``: a proportion (``value == k / n``), compared by Newcombe's
      interval;
    - ``ci95``: the row's own 95% interval, used when nothing finer is there.

    Build them with :meth:`from_seeds`, :meth:`from_items` and :meth:`proportion`, which fill in
    ``value``, ``ci95`` and ``n`` consistently.
    """

    system: str = Field(min_length=1)
    metric: str = Field(min_length=1)
    value: float
    ci95: tuple[float, float] | None = None
    n: int | None = Field(default=None, ge=0)
    split: str | None = None
    unit: str | None = None
    k: int | None = Field(default=None, ge=0)
    seeds: dict[str, float] | None = None
    items: dict[str, float] | None = None

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
        if v is not None and not all(math.isfinite(b) for b in v):
            raise ValueError("bounds must be finite numbers")
        return v

    @field_validator("seeds", "items", mode="before")
    @classmethod
    def _string_keys(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            return {str(key): value for key, value in v.items()}
        return v

    @field_validator("seeds", "items")
    @classmethod
    def _finite_samples(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is not None:
            if not v:
                raise ValueError("must hold at least one value")
            if not all(math.isfinite(x) for x in v.values()):
                raise ValueError("every value must be a finite number")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Row:
        if self.seeds is not None and self.items is not None:
            raise ValueError("a row carries seeds or items, not both")
        samples = self.samples
        if samples is not None:
            mean = math.fsum(samples.values()) / len(samples)
            if not math.isclose(self.value, mean, rel_tol=1e-6, abs_tol=1e-9):
                raise ValueError(
                    f"value {self.value:.6g} is not the mean of its {self.sample_unit}s "
                    f"({mean:.6g})"
                )
        if self.k is not None:
            if self.n is None or self.n == 0 or self.k > self.n:
                raise ValueError(f"k={self.k} needs n >= k and n > 0 (a proportion k/n)")
            if not math.isclose(self.value, self.k / self.n, rel_tol=1e-9, abs_tol=1e-12):
                raise ValueError(f"value {self.value:.6g} is not k/n = {self.k}/{self.n}")
        return self

    @property
    def key(self) -> RowKey:
        return RowKey(system=self.system, metric=self.metric, split=self.split)

    @property
    def samples(self) -> dict[str, float] | None:
        """The per-seed or per-item values, whichever the row carries."""
        return self.seeds if self.seeds is not None else self.items

    @property
    def sample_unit(self) -> str | None:
        """``"seed"``, ``"item"`` or None."""
        return "seed" if self.seeds is not None else "item" if self.items is not None else None

    def interval(self) -> tuple[float, float] | None:
        """This row's own 95% interval: from its samples, its ``k/n``, else its ``ci95``."""
        from paperstack import stats

        if self.samples is not None:
            return _samples_ci(self.samples, self.sample_unit or "seed")
        if self.k is not None and self.n:
            return stats.wilson_ci(self.k, self.n)
        return self.ci95

    @classmethod
    def from_seeds(
        cls, system: str, metric: str, values: Mapping[Any, float], **fields: Any
    ) -> Row:
        """A row averaging per-seed ``values`` (``{seed: value}``), with a Student-t ``ci95``."""
        if not values:
            raise ResultsFormatError(f"row {system}/{metric}: no seed values")
        seeds = {str(k): float(v) for k, v in values.items()}
        mean = math.fsum(seeds.values()) / len(seeds)
        ci = _samples_ci(seeds, "seed")
        return cls(
            system=system, metric=metric, value=mean, ci95=ci, n=len(seeds), seeds=seeds, **fields
        )

    @classmethod
    def from_items(
        cls, system: str, metric: str, values: Mapping[Any, float], **fields: Any
    ) -> Row:
        """A row averaging per-item ``values`` (``{item id: value}``): bootstrap ``ci95``
        (Student t below ten items)."""
        if not values:
            raise ResultsFormatError(f"row {system}/{metric}: no item values")
        items = {str(k): float(v) for k, v in values.items()}
        mean = math.fsum(items.values()) / len(items)
        ci = _samples_ci(items, "item")
        return cls(
            system=system, metric=metric, value=mean, ci95=ci, n=len(items), items=items, **fields
        )

    @classmethod
    def proportion(cls, system: str, metric: str, k: int, n: int, **fields: Any) -> Row:
        """A proportion ``k / n`` with its Wilson ``ci95``."""
        from paperstack.stats import wilson_ci

        if n <= 0 or not 0 <= k <= n:
            raise ResultsFormatError(f"row {system}/{metric}: needs 0 <= k <= n and n > 0")
        return cls(
            system=system, metric=metric, value=k / n, ci95=wilson_ci(k, n), n=n, k=k, **fields
        )


def _samples_ci(samples: Mapping[str, float], unit: str) -> tuple[float, float]:
    from paperstack import stats

    values = list(samples.values())
    if unit == "item" and len(values) >= stats.MIN_BOOTSTRAP_N:
        return stats.bootstrap_ci(
            values, resamples=stats.VERDICT_RESAMPLES, seed=stats.VERDICT_SEED
        )[1]
    return stats.mean_ci(values)[1]


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

Verdict = Literal["held", "not_held", "inconclusive"]
#: How the interval of ``d`` was obtained, best information first.
Method = Literal[
    "exact",  # a deterministic identity: judged on the point values, no interval
    "paired-t",  # Student t over per-seed differences (or per-item, below ten items)
    "paired-bootstrap",  # paired percentile bootstrap over per-item differences
    "newcombe",  # two proportions: Newcombe's hybrid score interval
    "wilson",  # one proportion against a constant
    "t",  # per-seed values against a constant (or per-item, below ten items)
    "bootstrap",  # per-item values against a constant
    "normal",  # the two rows' own intervals combined (MOVER / normal approximation)
    "row-ci",  # one row's own interval against a constant
    "none",  # nothing to judge by: inconclusive
]


def _verdict(op: str, lo: float, hi: float, margin: float) -> Verdict:
    """Held when the whole interval lies past the margin in the claimed direction, not held
    when it lies wholly on the other side, inconclusive when it straddles."""
    if op == "gt":
        return "held" if lo > margin else "not_held" if hi <= margin else "inconclusive"
    if op == "ge":
        return "held" if lo >= margin else "not_held" if hi < margin else "inconclusive"
    if op == "lt":
        return "held" if hi < margin else "not_held" if lo >= margin else "inconclusive"
    if op == "le":
        return "held" if hi <= margin else "not_held" if lo > margin else "inconclusive"
    if op == "within":  # two one-sided tests: inside [-margin, margin] as a whole
        if -margin <= lo and hi <= margin:
            return "held"
        return "not_held" if lo > margin or hi < -margin else "inconclusive"
    raise ResultsFormatError(f"claim op {op!r} is not one of {sorted(_OPS)}")


def _exact_verdict(op: str, d: float, margin: float) -> Verdict:
    """A deterministic identity is true or false: the interval is the point itself."""
    if op == "within":
        return "held" if abs(d) <= margin else "not_held"
    return "held" if _verdict(op, d, d, margin) == "held" else "not_held"


class Judgement(NamedTuple):
    """What :func:`judge` finds: the point difference, its interval, how, over how many."""

    diff: float
    ci95: tuple[float, float] | None
    method: Method
    n: int | None
    verdict: Verdict


def judge(
    op: str, lhs: Row, rhs: Row | float, margin: float = 0.0, *, exact: bool = False
) -> Judgement:
    """The verdict on ``d = lhs - rhs`` against ``margin``, from the best information the rows
    carry: paired samples, then two proportions, then the rows' own intervals, else none.

    One seed, or an interval of zero width (spread unknowable), is inconclusive, never held;
    ``exact`` claims (deterministic identities) are judged on the point values.
    """
    from paperstack import stats

    if op not in _OPS:
        raise ResultsFormatError(f"claim op {op!r} is not one of {sorted(_OPS)}")
    rv = float(rhs) if not isinstance(rhs, Row) else rhs.value
    point = lhs.value - rv
    if exact:
        return Judgement(point, None, "exact", None, _exact_verdict(op, point, margin))

    ci: tuple[float, float] | None = None
    n: int | None = None
    method: Method = "none"
    if isinstance(rhs, Row):
        lu, ru = lhs.sample_unit, rhs.sample_unit
        ls, rs = lhs.samples, rhs.samples
        shared = set(ls or ()) & set(rs or ())
        if lu is not None and lu == ru and ls is not None and rs is not None and shared:
            point, ci, n = stats.paired_diff_ci(ls, rs, unit=lu)
            boot = lu == "item" and n >= stats.MIN_BOOTSTRAP_N
            method = "paired-bootstrap" if boot else "paired-t"
        elif lhs.k is not None and rhs.k is not None and lhs.n and rhs.n:
            ci = stats.newcombe_diff_ci(lhs.k, lhs.n, rhs.k, rhs.n)
            method, n = "newcombe", min(lhs.n, rhs.n)
        else:
            li, ri = lhs.interval(), rhs.interval()
            if li is not None and ri is not None:
                ci = stats.mover_diff_ci(lhs.value, li, rhs.value, ri)
                method = "normal"
                n = _min_n(lhs, rhs)
    else:
        if lhs.samples is not None:
            unit = lhs.sample_unit or "seed"
            size = len(lhs.samples)
            boot = unit == "item" and size >= stats.MIN_BOOTSTRAP_N
            method, n = ("bootstrap" if boot else "t"), size
            lo, hi = _samples_ci(lhs.samples, unit)
            ci = (lo - rv, hi - rv)
        elif lhs.k is not None and lhs.n:
            lo, hi = stats.wilson_ci(lhs.k, lhs.n)
            ci, method, n = (lo - rv, hi - rv), "wilson", lhs.n
        elif lhs.ci95 is not None:
            ci, method, n = (lhs.ci95[0] - rv, lhs.ci95[1] - rv), "row-ci", lhs.n
    # Zero width (up to rounding) means the spread was not seen, not that there is none.
    flat = ci is not None and ci[1] - ci[0] <= 1e-9 * max(1.0, abs(point))
    if ci is None or flat or (n is not None and n < 2):
        return Judgement(point, ci, method, n, "inconclusive")
    return Judgement(point, ci, method, n, _verdict(op, ci[0], ci[1], margin))


def _min_n(a: Row, b: Row) -> int | None:
    sizes = [r.n for r in (a, b) if r.n is not None]
    return min(sizes) if sizes else None


class Claim(_Model):
    """A paper's claim checked on this run's rows.

    With ``d = lhs - rhs`` (``rhs`` a row or a constant) the claim is that ``d > margin`` (gt),
    ``d >= margin`` (ge), ``d < margin`` (lt), ``d <= margin`` (le) or ``|d| <= margin``
    (within). Its ``verdict`` comes from the 95% interval of ``d`` (see :func:`judge`): *held*
    when the whole interval clears the margin in the claimed direction, *not_held* when it lies
    wholly on the other side, *inconclusive* otherwise. ``exact`` claims (a lossless round trip,
    a byte-identical rebuild) are deterministic and judged on the values. Build claims with
    :meth:`compare`; every judged field is derived and rechecked on load.

    A claim can rest on premises (``requires``: earlier claims of the same results, such as
    "the base model is sycophantic here" or "GRPO collapses pass@k on this toy"). When one of
    them is not held, the toy cannot show the effect, so the claim is *inconclusive* whatever
    its own interval says; ``unmet`` names those premises and ``diff``/``ci95`` still record
    what was measured.
    """

    id: str = Field(min_length=1)
    statement: str
    op: Op
    lhs: RowKey
    rhs: RowKey | float
    margin: float = 0.0
    exact: bool = False
    lhs_value: float
    rhs_value: float
    diff: float
    ci95: tuple[float, float] | None = None
    method: Method
    n: int | None = None
    verdict: Verdict
    held: bool
    requires: tuple[str, ...] = ()
    unmet: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _held_is_verdict(self) -> Claim:
        if self.held != (self.verdict == "held"):
            raise ValueError(f"held={self.held} contradicts verdict {self.verdict!r}")
        if not set(self.unmet) <= set(self.requires):
            raise ValueError(f"unmet {list(self.unmet)} are not among requires")
        if self.unmet and self.verdict != "inconclusive":
            raise ValueError(f"premises {list(self.unmet)} not held but verdict {self.verdict!r}")
        return self

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
        *,
        exact: bool = False,
        requires: Sequence[Claim] = (),
    ) -> Claim:
        """Judge ``lhs - rhs`` against ``margin`` on ``rows``; see the class docstring.

        ``requires``: the premise claims this one rests on; if any is not held, the verdict is
        inconclusive (and ``unmet`` names them)."""
        if op not in _OPS:
            raise ResultsFormatError(f"claim {id!r}: op {op!r} is not one of {sorted(_OPS)}")
        table = _index(rows)
        left = RowKey.of(lhs)
        lrow = _lookup(table, left, id)
        right: RowKey | float
        rrow: Row | float
        if isinstance(rhs, (int, float)):
            right = rrow = float(rhs)
        else:
            right = RowKey.of(rhs)
            rrow = _lookup(table, right, id)
        j = judge(op, lrow, rrow, float(margin), exact=exact)
        unmet = tuple(p.id for p in requires if p.verdict != "held")
        verdict: Verdict = "inconclusive" if unmet else j.verdict
        return cls(
            id=id,
            statement=statement,
            op=op,
            lhs=left,
            rhs=right,
            margin=float(margin),
            exact=exact,
            lhs_value=lrow.value,
            rhs_value=rrow.value if isinstance(rrow, Row) else rrow,
            diff=j.diff,
            ci95=j.ci95,
            method=j.method,
            n=j.n,
            verdict=verdict,
            held=verdict == "held",
            requires=tuple(p.id for p in requires),
            unmet=unmet,
        )

    @property
    def measured_verdict(self) -> Verdict:
        """The verdict this claim's own interval gives, premises aside: what a gate hides.

        A gated claim is inconclusive because the toy could not show the effect, but the
        difference was still measured; a reader must see whether it pointed for or against
        the method (``held``/``not_held`` here), not only that it was gated."""
        if self.exact:
            return _exact_verdict(self.op, self.diff, self.margin)
        if self.ci95 is None or (self.n is not None and self.n < 2):
            return "inconclusive"
        lo, hi = self.ci95
        if hi - lo <= 1e-9 * max(1.0, abs(self.diff)):
            return "inconclusive"
        return _verdict(self.op, lo, hi, self.margin)

    @property
    def gated_against(self) -> bool:
        """Inconclusive only by a premise gate, while its own interval lies against it."""
        return bool(self.unmet) and self.measured_verdict == "not_held"

    def premise_text(self) -> str:
        """``premise `base_sycophantic` not held; measured alone: not held`` when premises
        gated the claim, else ``""``."""
        if not self.unmet:
            return ""
        names = ", ".join(f"`{u}`" for u in self.unmet)
        gate = f"premise {names} not held" if len(self.unmet) == 1 else f"premises {names} not held"
        return f"{gate}; measured alone: {VERDICT_TEXT[self.measured_verdict]}"

    def interval_text(self) -> str:
        """``0.07 [0.02, 0.12]``: the difference and its interval (or ``exact``)."""
        if self.exact:
            return f"{self.diff:.4g} (exact)"
        if self.ci95 is None:
            return f"{self.diff:.4g} (no interval)"
        return f"{self.diff:.4g} [{self.ci95[0]:.4g}, {self.ci95[1]:.4g}]"

    def comparison(self) -> str:
        """``ra2/acc - rmu/acc > 0``: what the claim says about ``d``."""
        right = str(self.rhs) if isinstance(self.rhs, RowKey) else f"{self.rhs:.6g}"
        if self.op == "within":
            return f"|{self.lhs} - {right}| <= {self.margin:.6g}"
        return f"{self.lhs} - {right} {_OPS[self.op]} {self.margin:.6g}"

    def describe(self) -> str:
        """``ra2/acc - rmu/acc = 0.07 [0.02, 0.12] > 0 (newcombe, n=500): held``."""
        right = str(self.rhs) if isinstance(self.rhs, RowKey) else f"{self.rhs:.6g}"
        how = self.method + (f", n={self.n}" if self.n is not None else "")
        op = (
            f"{_OPS[self.op]} {self.margin:.6g}"
            if self.op != "within"
            else (f"within ±{self.margin:.6g}")
        )
        gate = f", {self.premise_text()}" if self.unmet else ""
        return (
            f"{self.lhs} - {right} = {self.interval_text()} {op} ({how}{gate}): "
            f"{VERDICT_TEXT[self.verdict]}"
        )


#: How a verdict reads in text: tables, CLI lines, the index.
VERDICT_TEXT: dict[str, str] = {
    "held": "held",
    "not_held": "not held",
    "inconclusive": "inconclusive",
}


def verdict_counts(claims: Sequence[Claim]) -> str:
    """``2 held / 1 not held / 3 inconclusive (1 gated, measured against)``: the count every
    summary prints; the parenthesis counts the inconclusive claims that a premise gate made
    inconclusive although their own interval lay against the method."""
    held = sum(c.verdict == "held" for c in claims)
    not_held = sum(c.verdict == "not_held" for c in claims)
    unsure = sum(c.verdict == "inconclusive" for c in claims)
    against = sum(c.gated_against for c in claims)
    extra = f" ({against} gated, measured against)" if against else ""
    return f"{held} held / {not_held} not held / {unsure} inconclusive{extra}"


def _index(rows: Sequence[Row]) -> dict[RowKey, Row]:
    table: dict[RowKey, Row] = {}
    for row in rows:
        if row.key in table:
            raise ResultsFormatError(f"duplicate row {row.key}")
        table[row.key] = row
    return table


def _lookup(table: Mapping[RowKey, Row], key: RowKey, claim_id: str) -> Row:
    try:
        return table[key]
    except KeyError:
        raise ResultsFormatError(
            f"claim {claim_id!r} names row {key}, which is not in rows"
        ) from None


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


class Results(_Model):
    """The whole ``results.json``: manifest, rows, and the claims computed from the rows."""

    schema_: int = Field(default=SCHEMA_VERSION, alias="schema")
    manifest: Manifest
    rows: list[Row]
    claims: list[Claim] = Field(default_factory=list)
    #: ``sha256:<hex>`` of everything above in canonical JSON, stamped by :func:`write_results`:
    #: an edited statement, a lowered margin recomputed with ``Claim.compare``, an edited row no
    #: claim reads, or a changed manifest no longer matches it. Files written before 0.3 have
    #: none (``paperstack check`` says so). It catches edits, not forgery: anyone can restamp.
    digest: str | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def content_digest(self) -> str:
        """``sha256:<hex>`` of the manifest, rows and claims in canonical JSON."""
        exclude: dict[str, Any] = {"digest": True}
        # Fields absent before 0.3 (preregistration) or added within it (resumed): left out
        # when unset, so the digests of files written before them stay valid.
        unset = {k for k in ("preregistration", "resumed") if getattr(self.manifest, k) is None}
        if unset:
            exclude["manifest"] = unset
        data = self.model_dump(mode="json", by_alias=True, exclude=exclude)
        canon = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(canon.encode("utf-8")).hexdigest()

    def stamped(self) -> Results:
        """A copy carrying :meth:`content_digest` (what :func:`write_results` writes)."""
        return self.model_copy(update={"digest": self.content_digest()})

    def check(self) -> Results:
        """Recompute every claim from the rows; raise if a stored claim disagrees with them, or
        if the stored digest does not match the content (an edit after the run)."""
        if self.schema_ != SCHEMA_VERSION:
            hint = " (written by paperstack-core 0.1: rerun the demo)" if self.schema_ == 1 else ""
            raise ResultsFormatError(
                f"field 'schema': {self.schema_} is not {SCHEMA_VERSION}{hint}"
            )
        table = _index(self.rows)
        verdicts: dict[str, Verdict] = {}
        for i, claim in enumerate(self.claims):
            if claim.id in verdicts:
                raise ResultsFormatError(f"field 'claims[{i}].id': duplicate claim {claim.id!r}")
            for premise in claim.requires:
                if premise not in verdicts:
                    raise ResultsFormatError(
                        f"field 'claims[{i}].requires': {premise!r} is not an earlier claim"
                    )
            verdicts[claim.id] = claim.verdict
            lrow = _lookup(table, claim.lhs, claim.id)
            rrow = (
                claim.rhs if isinstance(claim.rhs, float) else _lookup(table, claim.rhs, claim.id)
            )
            j = judge(claim.op, lrow, rrow, claim.margin, exact=claim.exact)
            rv = rrow if isinstance(rrow, float) else rrow.value
            unmet = tuple(p for p in claim.requires if verdicts[p] != "held")
            if unmet:
                j = j._replace(verdict="inconclusive")
            stored_ci = claim.ci95 or (None, None)
            new_ci = j.ci95 or (None, None)
            same = (
                _close(lrow.value, claim.lhs_value)
                and _close(rv, claim.rhs_value)
                and _close(j.diff, claim.diff)
                and all(_close(a, b) for a, b in zip(stored_ci, new_ci, strict=True))
                and (j.method, j.n, j.verdict) == (claim.method, claim.n, claim.verdict)
                and unmet == claim.unmet
            )
            if not same:
                raise ResultsFormatError(
                    f"field 'claims[{i}]': claim {claim.id!r} does not follow from its rows "
                    f"(recomputed: {j.verdict}, d = {j.diff:.4g}, interval {j.ci95}, "
                    f"{j.method}; stored: {claim.verdict}, d = {claim.diff:.4g}, interval "
                    f"{claim.ci95}, {claim.method}"
                    + (
                        f"; unmet premises: recomputed {list(unmet)}, stored {list(claim.unmet)}"
                        if unmet != claim.unmet
                        else ""
                    )
                    + ")"
                )
        if self.digest is not None and self.digest != self.content_digest():
            raise ResultsFormatError(
                "field 'digest': the manifest, rows or claims were edited after the run "
                "(their digest no longer matches; rerun the demo rather than edit results)"
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
    stamped = results.stamped()
    stamped.check()
    return atomic_write_json(p, stamped.to_json())


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
        data = strict_json_loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsFormatError(
            f"{p}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except ValueError as exc:
        raise ResultsFormatError(f"{p}: {exc}") from None
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


def _git_dirty(limit: int = 200) -> dict[str, Any] | None:
    """What is uncommitted in the working tree: the sha256 of ``git diff HEAD --binary`` and
    up to ``limit`` changed or untracked paths; None for a clean tree or outside git."""
    try:
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=normal"],
            capture_output=True, timeout=10, check=True, text=True,
        ).stdout  # fmt: skip
        if not status.strip():
            return None
        diff = subprocess.run(
            ["git", "diff", "HEAD", "--binary"], capture_output=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    files = [line[3:] for line in status.splitlines() if len(line) > 3]
    return {
        "diff_sha256": hashlib.sha256(diff).hexdigest(),
        "files": files[:limit],
        "files_total": len(files),
    }


def revision_known(revision: str, where: str | os.PathLike[str] = ".") -> bool | None:
    """Whether ``revision`` (``-dirty`` stripped) is a commit of the git repository holding
    ``where``; None when ``where`` is not in a git work tree (nothing to check against)."""
    rev = revision.removesuffix("-dirty")
    folder = Path(where)
    folder = folder if folder.is_dir() else folder.parent
    try:
        inside = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--is-inside-work-tree"],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return None
        found = subprocess.run(
            ["git", "-C", str(folder), "cat-file", "-e", f"{rev}^{{commit}}"],
            capture_output=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return found.returncode == 0


def _cpu_identity(cpuinfo: str | os.PathLike[str] = "/proc/cpuinfo") -> dict[str, str]:
    """``cpu_model`` and ``cpu_flags`` (the first 12 hex digits of the sha256 of the sorted
    instruction-set flags) of the first CPU, where Linux tells; ``{}`` elsewhere.

    Seeded CPU runs are bit-reproducible on one machine, not across machines: the same commit,
    seed, thread count and library versions gave progress-advantage's numpy MDP arm and
    meta-pref's torch training different numbers on two machines (0.3, 2026-12-06). With the
    CPU recorded, two reports that disagree say whether they ran on the same kind of CPU."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 16)
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if out:  # the end of the first CPU's block
                break
            continue
        key, value = key.strip(), value.strip()
        if key == "model name" and "cpu_model" not in out:
            out["cpu_model"] = value
        elif key == "flags" and "cpu_flags" not in out:
            flags = " ".join(sorted(value.split()))
            out["cpu_flags"] = hashlib.sha256(flags.encode()).hexdigest()[:12]
    return out


def _host() -> dict[str, Any]:
    host: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }
    with contextlib.suppress(OSError, AttributeError):  # not on Windows
        # Timed comparisons (time-limited solvers, throughput) depend on what else ran: a
        # reader must see that a run shared its cores (load average over 1, 5, 15 minutes).
        host["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    host.update(_cpu_identity())
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

"""NF12 checkpoints: ``.nf12.safetensors`` files written and read one tensor at a time.

An NF12 file is an ordinary safetensors file (any safetensors reader opens it) whose
``__metadata__`` marks it and indexes the original checkpoint:

- ``format = "nf12"``, ``nf12.magic = "NF12"``, ``nf12.version = "1"``;
- ``nf12.index``: JSON list, one entry per original tensor in file order: ``name``, ``kind``
  (``"nf12"`` or ``"verbatim"``), ``dtype`` and ``shape`` of the original, ``sha256`` of its
  original bytes, and for NF12 entries ``base``, ``sentinel``, ``group``, ``n_esc`` and the
  statistics ``inspect`` prints;
- ``nf12.source_header``: the original safetensors header, verbatim, so that decompressing
  rebuilds the original *file* byte for byte (when its data region had no gaps);
- ``nf12.index_sha256``: sha256 of ``nf12.index`` + ``nf12.source_header``.

An NF12 entry ``W`` is stored as three tensors ``W:nf12.sm`` (uint8), ``W:nf12.ex`` (uint8) and
``W:nf12.esc`` (BF16); a verbatim entry keeps its name and original bytes. Reading goes through
``safetensors.safe_open`` (memory-mapped, one tensor at a time); writing streams each tensor to a
temporary file, so compressing a 70B checkpoint needs the memory of its largest tensor, not of
the model. Every output is written to a temporary file and renamed into place.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import struct
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import torch

from nf12.errors import Nf12Error, TooManyEscapesError
from nf12.format import (
    DEFAULT_GROUP,
    FORMAT_VERSION,
    GROUPS,
    WINDOW,
    NF12Tensor,
    choose_window,
    decode,
    encode,
    exponent_entropy,
    exponent_histogram,
)

__all__ = [
    "MAGIC",
    "CompressReport",
    "compress_file",
    "decompress_file",
    "inspect_file",
    "iter_nf12",
    "tensor_stats",
]

MAGIC = "NF12"
_SUFFIXES = ("sm", "ex", "esc")
_DTYPES: dict[str, torch.dtype] = {
    "BF16": torch.bfloat16,
    "F16": torch.float16,
    "F32": torch.float32,
    "F64": torch.float64,
    "I8": torch.int8,
    "U8": torch.uint8,
    "I16": torch.int16,
    "I32": torch.int32,
    "I64": torch.int64,
    "BOOL": torch.bool,
}
_NAMES = {v: k for k, v in _DTYPES.items()}
_FLOATS = {"F16", "F32", "F64"}
_MAX_HEADER = 100 * 1024 * 1024  # safetensors' own limit


def _part(name: str, suffix: str) -> str:
    return f"{name}:nf12.{suffix}"


def _process_umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; restore at once
    os.umask(mask)
    return mask


#: Mode of every file nf12 writes: what ``open(path, "w")`` would give (0o666 less the umask),
#: not the owner-only 0o600 of the temporary file it is written to first.
_FILE_MODE = 0o666 & ~_process_umask()


def _temp_file(target: Path, suffix: str) -> tuple[int, Path]:
    """A temporary file beside ``target`` (same filesystem, so the final rename is atomic)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    except FileExistsError:
        raise Nf12Error(f"{target.parent}: exists and is not a directory") from None
    except OSError as exc:
        raise Nf12Error(f"{target}: cannot write there ({exc.strerror})") from None
    os.fchmod(fd, _FILE_MODE)
    return fd, Path(name)


#: Write failures the user fixes outside nf12 (free space, a quota, a mount).
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}


def _write_error(dst: Path, exc: OSError) -> Exception:
    """What a failed write of ``dst`` raises, its temporary files already removed.

    A full disk (or quota, or read-only mount) stays an ``OSError``, renamed to ``dst`` (not the
    hidden temporary file it hit), so the CLI guard reports it as a disk problem (exit 1); any
    other ``OSError`` becomes a one-line :class:`Nf12Error` naming ``dst``.
    """
    if exc.errno in _DISK_ERRNOS:
        return OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(dst))
    return Nf12Error(f"{dst}: cannot write ({exc.strerror or exc})")


def _check_destination(src: Path, dst: Path, force: bool) -> None:
    """Refuse to overwrite the input, a directory, or (without ``force``) an existing file."""
    if dst.is_dir():
        raise Nf12Error(f"{dst}: is a directory; name the output file")
    if dst.exists():
        if src.resolve() == dst.resolve():
            raise Nf12Error(f"{dst}: output would overwrite the input")
        if not force:
            raise Nf12Error(f"{dst}: already exists; pass --force to replace it")


# --------------------------------------------------------------------------- raw safetensors


@dataclass(frozen=True)
class _Source:
    """A safetensors file's header, parsed and checked against the file's size."""

    path: Path
    header_bytes: bytes
    header: dict[str, Any]
    entries: list[tuple[str, dict[str, Any]]]  # in data order
    contiguous: bool


def _read_source(path: Path) -> _Source:
    """Parse a safetensors header (8-byte little-endian length, JSON) and check its offsets."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise Nf12Error(f"{path}: truncated (no safetensors header)")
            (n,) = struct.unpack("<Q", head)
            if n > _MAX_HEADER or 8 + n > size:
                raise Nf12Error(f"{path}: header length {n} does not fit the file ({size} bytes)")
            raw = fh.read(n)
    except FileNotFoundError:
        raise Nf12Error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise Nf12Error(f"{path}: is a directory") from None
    except OSError as exc:
        raise Nf12Error(f"{path}: cannot read ({exc.strerror})") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise Nf12Error(f"{path}: not a safetensors file (header is not JSON)") from None
    if not isinstance(header, dict):
        raise Nf12Error(f"{path}: not a safetensors file (header is not an object)")
    entries = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise Nf12Error(f"{path}: tensor {name!r}: malformed header entry") from None
        if dtype not in _DTYPES:
            raise Nf12Error(f"{path}: tensor {name!r}: dtype {dtype} is not supported")
        numel = 1
        for d in shape:
            numel *= int(d)
        if end - begin != numel * _DTYPES[dtype].itemsize or begin < 0:
            raise Nf12Error(f"{path}: tensor {name!r}: data_offsets do not match its shape")
        entries.append((name, info))
    entries.sort(key=lambda item: item[1]["data_offsets"][0])
    data = size - 8 - n
    end_of_data = max((info["data_offsets"][1] for _, info in entries), default=0)
    if end_of_data > data:
        raise Nf12Error(
            f"{path}: truncated (tensors need {end_of_data} data bytes, file has {data})"
        )
    position = 0
    contiguous = True
    for _, info in entries:
        contiguous &= info["data_offsets"][0] == position
        position = info["data_offsets"][1]
    contiguous &= position == data
    return _Source(path, raw, header, entries, contiguous)


#: Signals received while a file command runs (see :func:`_signals_noted`).
_PENDING: list[int] = []


@contextmanager
def _signals_noted() -> Iterator[None]:
    """Note Ctrl-C and SIGTERM while a file is written, then let their handlers act as before.

    Why: a signal whose handler raises (Python's ``KeyboardInterrupt``, the paperstack CLI's
    SIGTERM-as-interrupt) while safetensors is inside its Rust code can come out as an unrelated
    ``ValueError`` ("could not determine the shape ..."), which would be reported as a corrupt
    input. With the signal noted, :func:`_reraise_if_interrupted` turns it back into the
    interruption, so the temporary files are removed and the exit status says what happened.
    Handlers that are not Python callables (``SIG_DFL``, ``SIG_IGN``) are left alone.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        _PENDING.append(signum)
        previous[signum](signum, frame)

    for sig in (signal.SIGINT, signal.SIGTERM):
        current = signal.getsignal(sig)
        if callable(current):
            previous[sig] = current
            signal.signal(sig, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
        _PENDING.clear()


def _reraise_if_interrupted() -> None:
    """Raise the interruption a noted signal stands for (called where an exception may be a
    signal's, disguised by a C extension)."""
    if not _PENDING:
        return
    if _PENDING[-1] == signal.SIGTERM:
        from paperstack import errors

        terminated = getattr(errors, "Terminated", KeyboardInterrupt)  # core >= 0.3
        raise terminated() from None
    raise KeyboardInterrupt from None


class _Reader:
    """A ``safe_open`` handle whose read errors name the file read (and the tensor)."""

    def __init__(self, path: Path, handle: Any) -> None:
        self.path = path
        self._handle = handle

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:  # safetensors raises its own error type for every bad file
            _reraise_if_interrupted()
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise Nf12Error(f"{self.path}: {what}cannot read ({first})") from None

    def get_tensor(self, name: str) -> torch.Tensor:
        return self._call(f"tensor {name!r}: ", lambda: self._handle.get_tensor(name))  # type: ignore[no-any-return]

    def metadata(self) -> dict[str, str] | None:
        return self._call("", self._handle.metadata)  # type: ignore[no-any-return]

    def keys(self) -> list[str]:
        return list(self._call("", self._handle.keys))


@contextmanager
def _safe_open(path: Path) -> Iterator[_Reader]:
    """``safe_open`` after our own header check, so a bad file gets a precise one-line error.

    Only the opening and the reads are turned into errors naming ``path``: an error raised by
    the caller's own code inside the ``with`` (a full disk while writing the output, Ctrl-C)
    passes through unchanged, and must never be reported as a bad input file.
    """
    from safetensors import safe_open

    _read_source(path)
    try:
        handle = safe_open(str(path), framework="pt")
        opened = handle.__enter__()
    except Exception as exc:  # safetensors raises its own error type for every bad file
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Nf12Error(f"{path}: cannot read as safetensors ({first})") from None
    try:
        yield _Reader(path, opened)
    finally:
        handle.__exit__(None, None, None)


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    t = tensor.detach().contiguous().cpu()
    if t.numel() == 0:
        return b""
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


class _StreamWriter:
    """Writes a safetensors file tensor by tensor: data first to a temp file, header at close."""

    def __init__(self, path: Path) -> None:
        self.path = path
        fd, self._data_path = _temp_file(path, ".data")
        self._data: BinaryIO = os.fdopen(fd, "wb")
        self._header: dict[str, Any] = {}
        self._offset = 0

    def add(self, name: str, tensor: torch.Tensor) -> None:
        payload = _tensor_bytes(tensor)
        self._data.write(payload)
        dtype = _NAMES[tensor.dtype]
        self._header[name] = {
            "dtype": dtype,
            "shape": list(tensor.shape),
            "data_offsets": [self._offset, self._offset + len(payload)],
        }
        self._offset += len(payload)

    def close(self, metadata: dict[str, str]) -> None:
        try:
            self._data.close()
        except BaseException:
            self._data_path.unlink(missing_ok=True)
            raise
        header = {"__metadata__": metadata, **self._header}
        raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
        raw += b" " * (-len(raw) % 8)
        fd, tmp = _temp_file(self.path, ".tmp")
        try:
            with os.fdopen(fd, "wb") as out, open(self._data_path, "rb") as data:
                out.write(struct.pack("<Q", len(raw)))
                out.write(raw)
                shutil.copyfileobj(data, out, 16 * 1024 * 1024)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        finally:
            self._data_path.unlink(missing_ok=True)

    def abort(self) -> None:
        """Remove the temporary data file (after a full disk, an error or Ctrl-C/SIGTERM).

        Closing flushes the buffer, which fails again on a full disk: the file goes anyway.
        """
        try:
            self._data.close()
        except OSError:
            pass
        finally:
            self._data_path.unlink(missing_ok=True)


# --------------------------------------------------------------------------- statistics


def tensor_stats(tensor: torch.Tensor, nt: NF12Tensor | None = None) -> dict[str, float]:
    """Coverage, escape rate, bits per weight and exponent entropy of one BF16 tensor."""
    bits = tensor.detach().contiguous().view(torch.int16).to(torch.int32) & 0xFFFF
    hist = exponent_histogram(bits)
    base = choose_window(hist)
    stats = {
        "coverage": float(hist[base : base + WINDOW].sum()) / max(tensor.numel(), 1),
        "exponent_entropy": exponent_entropy(hist),
    }
    if nt is not None:
        stats["escape_rate"] = nt.escape_rate
        stats["bits_per_weight"] = nt.bits_per_weight
    return stats


# --------------------------------------------------------------------------- compress


@dataclass(frozen=True)
class CompressReport:
    """What :func:`compress_file` did: sizes and per-tensor entries."""

    source_bytes: int
    output_bytes: int
    weights: int
    entries: list[dict[str, Any]]

    @property
    def bits_per_weight(self) -> float:
        """Whole output file (NF12 planes, escapes, verbatim tensors, header) per weight."""
        return 8.0 * self.output_bytes / max(self.weights, 1)


def compress_file(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    group: int = DEFAULT_GROUP,
    allow_nan: bool = False,
    keep_other_dtypes: bool = False,
    force: bool = False,
    progress: Callable[[str], None] | None = None,
) -> CompressReport:
    """Compress a BF16 safetensors checkpoint to NF12, one tensor at a time.

    BF16 tensors with two or more dims are NF12-encoded (kept verbatim if that would not be
    smaller); vectors and integer tensors are kept verbatim. A float tensor that is not BF16 is
    an error unless ``keep_other_dtypes`` (NF12 is a BF16 format: silently storing F32 would not
    be what the user asked for). A NaN weight is an error unless ``allow_nan``: it round-trips bit
    for bit through an escape, but in a checkpoint it almost always means corrupt weights.
    An existing ``dst`` is replaced only with ``force``; the output gets the mode ``open()``
    would give it (0o666 less the umask).
    """
    with _signals_noted():
        return _compress(src, dst, group, allow_nan, keep_other_dtypes, force, progress)


def _compress(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    group: int,
    allow_nan: bool,
    keep_other_dtypes: bool,
    force: bool,
    progress: Callable[[str], None] | None,
) -> CompressReport:
    src_path, dst_path = Path(src), Path(dst)
    if group not in GROUPS:
        raise Nf12Error(f"group {group}: must be one of {', '.join(map(str, GROUPS))}")
    source = _read_source(src_path)
    _check_destination(src_path, dst_path, force)
    writer = _StreamWriter(dst_path)
    index: list[dict[str, Any]] = []
    weights = 0
    file_hash = hashlib.sha256(struct.pack("<Q", len(source.header_bytes)) + source.header_bytes)
    try:
        with _safe_open(src_path) as fh:
            for name, info in source.entries:
                tensor = fh.get_tensor(name)
                payload = _tensor_bytes(tensor)
                file_hash.update(payload)
                entry: dict[str, Any] = {
                    "name": name,
                    "dtype": info["dtype"],
                    "shape": list(info["shape"]),
                    "sha256": hashlib.sha256(payload).hexdigest(),
                }
                weights += tensor.numel()
                nt = _maybe_encode(src_path, name, info["dtype"], tensor, group, allow_nan,
                                   keep_other_dtypes)  # fmt: skip
                if nt is not None:
                    entry.update(
                        kind="nf12",
                        base=nt.base,
                        sentinel=nt.sentinel,
                        group=nt.group,
                        n_esc=nt.n_escaped,
                        **tensor_stats(tensor, nt),
                    )
                    writer.add(_part(name, "sm"), nt.sm)
                    writer.add(_part(name, "ex"), nt.ex)
                    writer.add(_part(name, "esc"), nt.esc)
                else:
                    entry["kind"] = "verbatim"
                    writer.add(name, tensor)
                index.append(entry)
                if progress is not None:
                    progress(name)
        index_json = json.dumps(index, separators=(",", ":"))
        source_header = source.header_bytes.decode("utf-8")
        metadata = {
            "format": "nf12",
            "nf12.magic": MAGIC,
            "nf12.version": str(FORMAT_VERSION),
            "nf12.index": index_json,
            "nf12.source_header": source_header,
            "nf12.source_exact": "1" if source.contiguous else "0",
            "nf12.source_sha256": file_hash.hexdigest() if source.contiguous else "",
            "nf12.index_sha256": _index_digest(index_json, source_header),
        }
        writer.close(metadata)
    except OSError as exc:
        writer.abort()
        _reraise_if_interrupted()
        raise _write_error(dst_path, exc) from None
    except BaseException:
        writer.abort()
        _reraise_if_interrupted()
        raise
    return CompressReport(
        source_bytes=src_path.stat().st_size,
        output_bytes=dst_path.stat().st_size,
        weights=weights,
        entries=index,
    )


def _index_digest(index_json: str, source_header: str) -> str:
    return hashlib.sha256((index_json + "\n" + source_header).encode("utf-8")).hexdigest()


def _maybe_encode(
    path: Path,
    name: str,
    dtype: str,
    tensor: torch.Tensor,
    group: int,
    allow_nan: bool,
    keep_other_dtypes: bool,
) -> NF12Tensor | None:
    if dtype in _FLOATS and not keep_other_dtypes:
        raise Nf12Error(
            f"{path}: tensor {name!r}: dtype {dtype} is not BF16 (convert the checkpoint to BF16, "
            "or pass --keep-other-dtypes to store such tensors verbatim)"
        )
    if dtype != "BF16" or tensor.ndim < 2 or tensor.numel() < group:
        return None
    n_nan = int(torch.isnan(tensor).sum())
    if n_nan and not allow_nan:
        first = int(torch.isnan(tensor).reshape(-1).nonzero()[0])
        raise Nf12Error(
            f"{path}: tensor {name!r}: {n_nan} NaN weights (first at flat index {first}); "
            "pass --allow-nan to store them verbatim"
        )
    try:
        nt = encode(tensor, group, name=name)
    except TooManyEscapesError:
        return None  # the 24-bit escape index cannot address them all: store the tensor verbatim
    if nt.nbytes >= 2 * tensor.numel():
        return None
    return nt


# --------------------------------------------------------------------------- read back


@dataclass(frozen=True)
class _Nf12File:
    path: Path
    index: list[dict[str, Any]]
    source_header: bytes
    exact: bool
    source_sha256: str


def _open_nf12(path: Path, fh: Any) -> _Nf12File:
    meta = fh.metadata() or {}
    if meta.get("nf12.magic") != MAGIC:
        raise Nf12Error(f"{path}: not an NF12 file (metadata field 'nf12.magic' is missing/wrong)")
    if meta.get("nf12.version") != str(FORMAT_VERSION):
        raise Nf12Error(
            f"{path}: field 'nf12.version': {meta.get('nf12.version')!r} is not supported "
            f"(this nf12 reads version {FORMAT_VERSION})"
        )
    index_json = meta.get("nf12.index", "")
    source_header = meta.get("nf12.source_header", "")
    if _index_digest(index_json, source_header) != meta.get("nf12.index_sha256"):
        raise Nf12Error(f"{path}: field 'nf12.index_sha256': checksum mismatch (corrupted header)")
    try:
        index = json.loads(index_json)
    except json.JSONDecodeError:
        raise Nf12Error(f"{path}: field 'nf12.index': not valid JSON") from None
    return _Nf12File(
        path=path,
        index=index,
        source_header=source_header.encode("utf-8"),
        exact=meta.get("nf12.source_exact") == "1",
        source_sha256=meta.get("nf12.source_sha256", ""),
    )


def _load_entry(nf: _Nf12File, fh: Any, entry: dict[str, Any]) -> NF12Tensor | torch.Tensor:
    name = entry["name"]
    try:
        if entry["kind"] == "verbatim":
            return fh.get_tensor(name)  # type: ignore[no-any-return]
        parts = {s: fh.get_tensor(_part(name, s)) for s in _SUFFIXES}
        return NF12Tensor(
            sm=parts["sm"],
            ex=parts["ex"],
            esc=parts["esc"],
            shape=tuple(int(d) for d in entry["shape"]),
            base=int(entry["base"]),
            sentinel=int(entry["sentinel"]),
            group=int(entry["group"]),
        )
    except Nf12Error:
        raise
    except Exception as exc:
        _reraise_if_interrupted()
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Nf12Error(f"{nf.path}: tensor {name!r}: cannot read ({first})") from None


def _restore(nf: _Nf12File, entry: dict[str, Any], item: NF12Tensor | torch.Tensor) -> bytes:
    """The original bytes of one entry, checked against the sha256 recorded at compression."""
    name = entry["name"]
    if isinstance(item, NF12Tensor):
        try:
            tensor = decode(item)
        except Nf12Error as exc:
            raise Nf12Error(f"{nf.path}: tensor {name!r}: {exc}") from None
    else:
        tensor = item
    payload = _tensor_bytes(tensor)
    if hashlib.sha256(payload).hexdigest() != entry["sha256"]:
        raise Nf12Error(
            f"{nf.path}: tensor {name!r}: sha256 of the decoded bytes does not match the original "
            "(corrupted file)"
        )
    return payload


def iter_nf12(
    path: str | os.PathLike[str], *, verify: bool = True
) -> Iterator[tuple[str, NF12Tensor | torch.Tensor]]:
    """Yield ``(name, NF12Tensor or verbatim tensor)`` for every original tensor of an NF12 file.

    With ``verify`` each entry is decoded once and checked against its sha256, so a model never
    loads silently wrong weights.
    """
    p = Path(path)
    with _safe_open(p) as fh:
        nf = _open_nf12(p, fh)
        for entry in nf.index:
            item = _load_entry(nf, fh, entry)
            if verify:
                _restore(nf, entry, item)
            yield entry["name"], item


def decompress_file(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    force: bool = False,
    progress: Callable[[str], None] | None = None,
) -> bool:
    """Rebuild the original safetensors checkpoint from an NF12 file; return True if byte-exact.

    Each tensor is decoded and its sha256 checked before it is written. When the source had no
    gaps in its data region the original header is written back verbatim, so the file comes back
    byte for byte (its whole-file sha256 is checked too); otherwise a fresh safetensors file with
    the same tensors and metadata is written. Streams tensor by tensor into a temp file, renamed
    into place at the end. An existing ``dst`` is replaced only with ``force``.
    """
    with _signals_noted():
        return _decompress(Path(src), Path(dst), force, progress)


def _decompress(
    src_path: Path, dst_path: Path, force: bool, progress: Callable[[str], None] | None
) -> bool:
    with _safe_open(src_path) as fh:
        nf = _open_nf12(src_path, fh)
        _check_destination(src_path, dst_path, force)
        if not nf.exact:
            _rewrite(nf, fh, dst_path, progress)
            return False
        fd, tmp = _temp_file(dst_path, ".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                file_hash = hashlib.sha256()
                head = struct.pack("<Q", len(nf.source_header)) + nf.source_header
                out.write(head)
                file_hash.update(head)
                for entry in _data_order(nf):
                    payload = _restore(nf, entry, _load_entry(nf, fh, entry))
                    out.write(payload)
                    file_hash.update(payload)
                    if progress is not None:
                        progress(entry["name"])
                if file_hash.hexdigest() != nf.source_sha256:
                    raise Nf12Error(
                        f"{src_path}: field 'nf12.source_sha256': the rebuilt file does not match"
                    )
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, dst_path)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            _reraise_if_interrupted()
            raise _write_error(dst_path, exc) from None
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            _reraise_if_interrupted()
            raise
    return True


def _rewrite(nf: _Nf12File, fh: Any, dst: Path, progress: Callable[[str], None] | None) -> None:
    """Write the entries as a fresh safetensors file (source with gaps: not byte-exact)."""
    try:
        meta = json.loads(nf.source_header.decode("utf-8")).get("__metadata__") or {}
    except (json.JSONDecodeError, AttributeError, UnicodeDecodeError):
        raise Nf12Error(f"{nf.path}: field 'nf12.source_header': not valid JSON") from None
    writer = _StreamWriter(dst)
    try:
        for entry in nf.index:
            payload = _restore(nf, entry, _load_entry(nf, fh, entry))
            tensor = torch.frombuffer(bytearray(payload), dtype=_DTYPES[entry["dtype"]])
            writer.add(entry["name"], tensor.reshape(entry["shape"]))
            if progress is not None:
                progress(entry["name"])
        writer.close({str(k): str(v) for k, v in meta.items()})
    except OSError as exc:
        writer.abort()
        _reraise_if_interrupted()
        raise _write_error(dst, exc) from None
    except BaseException:
        writer.abort()
        _reraise_if_interrupted()
        raise


def _data_order(nf: _Nf12File) -> list[dict[str, Any]]:
    """Index entries in the order of the original data region (the original header's offsets)."""
    try:
        header = json.loads(nf.source_header.decode("utf-8"))
        offsets = {n: info["data_offsets"] for n, info in header.items() if n != "__metadata__"}
        by_name = {e["name"]: e for e in nf.index}
        if set(offsets) != set(by_name):
            raise KeyError
        return [by_name[n] for n in sorted(offsets, key=lambda n: offsets[n][0])]
    except (KeyError, TypeError, ValueError, AttributeError, json.JSONDecodeError):
        raise Nf12Error(
            f"{nf.path}: field 'nf12.source_header': does not match the index"
        ) from None


def inspect_file(
    path: str | os.PathLike[str], *, group: int = DEFAULT_GROUP
) -> list[dict[str, Any]]:
    """Per-tensor rows: kind, shape, coverage, escape rate, bits per weight, exponent entropy.

    An NF12 file reports what its index recorded at compression time; a plain BF16 safetensors
    file is encoded on the fly (one tensor at a time) to show what NF12 would do with it.
    """
    p = Path(path)
    rows: list[dict[str, Any]] = []
    with _safe_open(p) as fh:
        meta = fh.metadata() or {}
        if meta.get("nf12.magic") == MAGIC:
            nf = _open_nf12(p, fh)
            for entry in nf.index:
                row = {k: entry.get(k) for k in ("name", "kind", "dtype", "shape")}
                for k in ("coverage", "escape_rate", "bits_per_weight", "exponent_entropy"):
                    row[k] = entry.get(k)
                if entry["kind"] == "verbatim":
                    row["bits_per_weight"] = 8.0 * _DTYPES[entry["dtype"]].itemsize
                rows.append(row)
            return rows
        for name in fh.keys():  # noqa: SIM118 - safe_open handles have no __iter__
            tensor = fh.get_tensor(name)
            row = {
                "name": name,
                "kind": "source",
                "dtype": _NAMES.get(tensor.dtype, str(tensor.dtype)),
                "shape": list(tensor.shape),
                "coverage": None,
                "escape_rate": None,
                "bits_per_weight": 8.0 * tensor.element_size(),
                "exponent_entropy": None,
            }
            if tensor.dtype == torch.bfloat16 and tensor.ndim >= 2 and tensor.numel() >= group:
                nt = encode(tensor, group, name=name)
                row.update(tensor_stats(tensor, nt))
                row["kind"] = "nf12-candidate"
            rows.append(row)
    return rows

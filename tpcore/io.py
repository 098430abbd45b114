"""Atomic file writing: write to a temporary name in the same folder, then rename, so an
interrupted run never leaves a half-written file.

Temporary names are ``.<name>.<host>-<pid>-<random>.tmp`` beside the target, for files and for
the run directories of :mod:`tpcore.rundir` alike; the host name and process id let a later
start tell the leftovers of a killed process (:func:`remove_stale_temps`) from work in progress,
also on a folder that several machines share. Files and
folders are created with the permissions the user's umask allows (``0o666`` and ``0o777``
less the umask), as ``open`` and ``mkdir`` would.
Host-only code (NumPy and the standard library)."""

from __future__ import annotations

import errno
import gzip
import json
import math
import os
import re
import secrets
import shutil
import socket
import stat
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from tpcore.errors import TpcoreError

_HOST = re.sub(r"[^A-Za-z0-9]", "_", socket.gethostname())[:40] or "host"
"""This machine's name as temporary names carry it."""
_TEMP = re.compile(r"\..+\.(\w+)-(\d+)-[0-9a-f]{8}\.tmp")
"""Names made by :func:`temp_sibling`; groups: the creating machine and process id."""


def temp_sibling(path: str | os.PathLike, directory: bool = False) -> Path:
    """Create an empty file (or, with ``directory``, a folder) named
    ``.<name>.<host>-<pid>-<random>.tmp`` beside ``path`` and return its path. The umask
    applies."""
    path = Path(path)
    while True:
        tmp = path.with_name(f".{path.name}.{_HOST}-{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            if directory:
                tmp.mkdir(mode=0o777)
            else:
                os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue


def remove_stale_temps(folder: str | os.PathLike) -> list[Path]:
    """Remove the temporary files and folders in ``folder`` that a process of this machine
    made and that no longer runs; returns what was removed. Other machines' are kept."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    for entry in folder.iterdir():
        match = _TEMP.fullmatch(entry.name)
        if match is None or match.group(1) != _HOST or _running(int(match.group(2))):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            try:
                entry.unlink(missing_ok=True)
            except OSError:  # another user's, in a folder we may not clean: skipped
                continue
        removed.append(entry)
    return removed


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (this process counts)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed to ``path``.

    On an exception the temporary file is removed and ``path`` is left untouched; an
    ``OSError`` that names no file (a full disk, say) is given ``path`` as its file name.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = temp_sibling(path)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise
    finally:
        tmp_path.unlink(missing_ok=True)


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w") -> Iterator[IO[Any]]:
    """``open`` that writes atomically (text mode ``"w"`` or binary ``"wb"``)."""
    with atomic_path(path) as tmp, open(tmp, mode, encoding=None if "b" in mode else "utf-8") as f:
        yield f


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically, gzip-compressed where the name ends in ``.gz``
    (with no time stamp, so the same text always gives the same bytes)."""
    if str(path).endswith(".gz"):
        with atomic_open(path, "wb") as f:
            f.write(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
        return
    with atomic_open(path) as f:
        f.write(text)


JSON_WIDTH = 100
"""Characters a line of :func:`json_text` fills before it breaks."""


def json_text(obj: Any, strict: bool = False, width: int = JSON_WIDTH) -> str:
    """``obj`` as JSON text that reads like indented JSON but keeps short objects and lists on
    one line and packs long lists of numbers several to a line (NumPy scalars and arrays and
    paths are converted); ``strict``: standard JSON, a number that is not finite written as
    ``null`` (Python's ``NaN``/``Infinity`` are not JSON); ``width``: the characters a line
    fills before it breaks."""
    value = _finite(json_value(obj)) if strict else json_value(obj)
    return _layout(value, 0, not strict, width)


def _layout(value: Any, indent: int, allow_nan: bool, width: int) -> str:
    """``value`` laid out at ``indent`` (see :func:`json_text`)."""
    flat = json.dumps(value, allow_nan=allow_nan)
    if not isinstance(value, list | dict) or not value or indent + len(flat) <= width:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {_layout(v, indent + 2, allow_nan, width)}"
                 for k, v in value.items()]
    elif all(not isinstance(v, list | dict) for v in value):
        items, line = [], ""
        for v in value:
            text = json.dumps(v, allow_nan=allow_nan)
            if line and len(pad) + len(line) + len(text) + 2 > width:
                items.append(pad + line)
                line = ""
            line += ("" if not line else ", ") + text
        items.append(pad + line)
    else:
        items = [pad + _layout(v, indent + 2, allow_nan, width) for v in value]
    close = "}" if isinstance(value, dict) else "]"
    return ("{" if close == "}" else "[") + "\n" + ",\n".join(items) + "\n" + " " * indent + close


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON atomically (NumPy scalars and arrays are converted)."""
    write_text(path, json_text(obj) + "\n")


def write_npz(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> None:
    """Write arrays to an ``.npz`` file atomically."""
    with atomic_open(path, "wb") as f:
        np.savez(f, **arrays)


def open_regular(path: str | os.PathLike) -> IO[bytes]:
    """``path`` opened for reading in binary, refused with ``OSError`` unless it is a regular
    file: a FIFO, a device or a folder is never read from (it is opened without blocking, then
    checked), so reading one cannot hang."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


TEXT_BYTES = 16 * 2**20
"""Most bytes of a text file tpcore reads back (records, configurations, programs)."""


def read_text(path: str | os.PathLike, what: str = "file", limit: int = TEXT_BYTES) -> str:
    """The UTF-8 text of the regular file ``path`` (:func:`open_regular`), decompressed where
    the name ends in ``.gz``, reading at most ``limit + 1`` bytes of text; a larger file, a
    damaged ``.gz`` or text in another encoding raises a :class:`~tpcore.errors.TpcoreError`
    naming it."""
    with open_regular(path) as f:
        if str(path).endswith(".gz"):
            try:
                with gzip.GzipFile(fileobj=f) as z:
                    data = z.read(limit + 1)
            except (OSError, EOFError, zlib.error) as exc:
                raise TpcoreError(f"{path}: {what} is not readable gzip ({exc})") from None
        else:
            data = f.read(limit + 1)
    if len(data) > limit:
        raise TpcoreError(f"{path}: {what} larger than the limit of {limit:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TpcoreError(f"{path}: {what} is not UTF-8 text ({exc.reason} at byte "
                          f"{exc.start})") from None


NPZ_KINDS = "fiub"
"""Array kinds tpcore reads from an ``.npz``: floats, signed and unsigned integers, booleans
(never objects, strings, dates, complex numbers or records)."""


NPZ_COMPRESSION = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
"""How an ``.npz`` member may be compressed: as ``np.savez`` and ``np.savez_compressed`` write."""


@dataclass(frozen=True)
class NpzMember:
    """One array of an ``.npz`` as its ``.npy`` header declares it."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def _header(f: IO[bytes], name: str) -> NpzMember:
    """The header at the start of member ``name``'s stream ``f``, checked."""
    version = np.lib.format.read_magic(f)
    if version not in ((1, 0), (2, 0)):
        raise ValueError(f"array {name!r}: format version {version}")
    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
            else np.lib.format.read_array_header_2_0)
    shape, fortran, dtype = read(f)
    if dtype.hasobject:
        raise ValueError(f"array {name!r} holds Python objects (reading them would need pickle)")
    if dtype.kind not in NPZ_KINDS or dtype.fields is not None:
        raise ValueError(f"array {name!r} has dtype {str(dtype)[:40]}; expected numbers or "
                         "booleans")
    if any(d < 0 for d in shape):
        raise ValueError(f"array {name!r} declares shape {str(shape)[:60]}, with a negative "
                         "size")
    return NpzMember(name, tuple(shape), dtype, bool(fortran))


def _members(z: zipfile.ZipFile) -> list[NpzMember]:
    """The headers of the open ``.npz`` ``z``, checked (:func:`npz_members`)."""
    members = []
    for info in z.infolist():
        if not info.filename.endswith(".npy"):
            raise ValueError(f"member {info.filename[:60]!r} is not an .npy array")
        if info.compress_type not in NPZ_COMPRESSION:
            # zipfile inflates bzip2 and LZMA without a bound on a read's output
            raise ValueError(f"member {info.filename[:60]!r} is compressed with method "
                             f"{info.compress_type}; expected stored or deflated, as NumPy "
                             "writes")
        with z.open(info) as f:
            members.append(_header(f, info.filename[:-4]))
    return members


def npz_members(path: str | os.PathLike) -> list[NpzMember]:
    """The arrays of the ``.npz`` at ``path`` as their headers declare them (no data is
    read). Raises ``ValueError`` naming the member for anything that is not an array tpcore
    reads (:data:`NPZ_KINDS`, sizes >= 0, ``.npy`` members, compressed as NumPy writes)."""
    try:
        with open_regular(path) as raw, zipfile.ZipFile(raw) as z:
            return _members(z)
    except (OSError, EOFError, zipfile.BadZipFile, SyntaxError) as exc:
        raise ValueError(f"not an .npz of arrays ({str(exc)[:120]})") from None


def npz_array_bytes(path: str | os.PathLike) -> int:
    """Bytes of the arrays in the ``.npz`` at ``path``, as their headers declare
    (:func:`npz_members`; nothing is loaded)."""
    return sum(m.nbytes for m in npz_members(path))


def _check_members(members: list[NpzMember], limit: int,
                   shapes: dict[str, tuple[int, ...]] | None) -> None:
    """Refuse ``members`` over ``limit`` bytes together or, with ``shapes``, of other names or
    shapes (:func:`read_npz`)."""
    total = sum(m.nbytes for m in members)
    if total > limit:
        raise ValueError(f"its arrays declare {total:,} bytes, over the limit of {limit:,}")
    if shapes is None:
        return
    names = {m.name for m in members}
    for name in shapes:
        if name not in names:
            raise ValueError(f"array {name!r} is missing")
    for m in members:
        if m.name not in shapes:
            raise ValueError(f"unexpected array {m.name[:60]!r}")
        if m.shape != tuple(shapes[m.name]):
            raise ValueError(f"array {m.name!r} declares shape {str(m.shape)[:60]}; expected "
                             f"{tuple(shapes[m.name])}")


def read_npz(path: str | os.PathLike, limit: int,
             shapes: dict[str, tuple[int, ...]] | None = None) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` at ``path``, read safely: their headers are checked first
    (:func:`npz_members`; at most ``limit`` bytes together; with ``shapes``, exactly those
    names and shapes), then each member is decompressed into at most the bytes its header
    declares, so a member that inflates beyond them, or holds fewer, is refused without
    growing. Raises ``ValueError`` naming the member."""
    out = {}
    try:
        with open_regular(path) as raw, zipfile.ZipFile(raw) as z:
            members = _members(z)
            _check_members(members, limit, shapes)
            for m in members:
                with z.open(m.name + ".npy") as f:
                    _header(f, m.name)
                    data = f.read(m.nbytes + 1)
                if len(data) != m.nbytes:
                    raise ValueError(f"array {m.name!r} holds {min(len(data), m.nbytes + 1):,}"
                                     f"{'+' if len(data) > m.nbytes else ''} bytes; its header "
                                     f"declares {m.nbytes:,}")
                out[m.name] = np.frombuffer(data, dtype=m.dtype).reshape(
                    m.shape, order="F" if m.fortran else "C").copy()
    except (OSError, EOFError, zipfile.BadZipFile, SyntaxError) as exc:
        raise ValueError(f"not an .npz of arrays ({str(exc)[:120]})") from None
    return out


def json_value(obj: Any) -> Any:
    """``obj`` as it reads back from :func:`write_json` (tuples become lists, NumPy values
    Python ones). A float32 or float16 value becomes the shortest decimal that reads back as
    the same value of its type (``np.float32(0.1)`` is written ``0.1``, not
    ``0.10000000149011612``): nothing of it is lost, and the digits are the ones it has."""
    return json.loads(json.dumps(obj, default=_json_default))


def _json_default(obj: Any) -> Any:
    narrow_float = (isinstance(obj, np.floating | np.ndarray) and obj.dtype.kind == "f"
                    and obj.dtype.itemsize < 8)
    if narrow_float:  # its shortest repr, read back as float64 (see json_value)
        return np.asarray(obj).astype(str).astype(np.float64).tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__} to JSON")

"""Run directories and cached results: written as a unit, reused only for their own
configuration. Every command that writes runs or reuses results goes through this module.

A *run directory* ``NAME`` (e.g. ``runs/sort``) is built in a temporary sibling
``.NAME.<host>-<pid>-<random>.tmp`` (:class:`RunDir`). When the run completes, its completion
record ``run.json`` is written into it last, ``{"schema": 1, "config": ..., "config_sha256":
...}``, and the folder is renamed to ``NAME``; so an interrupted run leaves no ``NAME`` at all,
and a ``NAME`` with ``run.json`` is finished. A single-file result, one JSON object such as one
run of a reproduction, carries the same record under its key ``"record"`` (:func:`cached`). A
record carries the version of its layout, ``"schema"`` (:data:`SCHEMA`); one of another version,
or of none, was written by another tpcore and is never reused: it is refused in one line naming
the remedy, and replaced when the caller overwrites.

A finished run or a cached result is reused when, and only when, its recorded configuration
equals the requested one exactly (compared as JSON reads it back). Any other recorded
configuration is refused with one line naming the settings that differ, unless ``overwrite``:
then the run is redone and replaces the old one whole; a run of the requested configuration is
reused even then, so a command rerun after an interruption resumes. A folder that holds files
but no run is never replaced.

Each start removes the temporaries that killed processes of this machine left beside the target
(:func:`tpcore.io.remove_stale_temps`; a run in progress on another host of a cluster keeps
its own).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tpcore.errors import TpcoreError
from tpcore.io import json_value, read_text, remove_stale_temps, temp_sibling, write_json

RECORD = "run.json"
"""The completion record inside a run directory, written last."""
SCHEMA = 1
"""The version of a record's layout (its configuration's fields included): a record of another
version is refused, not read."""
OVERWRITE = "pass --overwrite to replace it, or choose another --out"
"""What a refused run or result tells the user to do, unless the caller says otherwise."""


def record(config: Any) -> dict[str, Any]:
    """The completion record of ``config``: the layout's version :data:`SCHEMA`, the
    configuration as JSON reads it back and the SHA-256 of its canonical JSON (sorted keys)."""
    plain = json_value(config)
    text = json.dumps(plain, sort_keys=True)
    return {"schema": SCHEMA, "config": plain,
            "config_sha256": hashlib.sha256(text.encode()).hexdigest()}


def recorded_config(rec: Any, what: str, remedy: str = OVERWRITE) -> dict[str, Any]:
    """The configuration of the record ``rec`` (a completion record read back), checked to be
    of this :data:`SCHEMA`; else a :class:`TpcoreError` naming ``what``, the version found and
    ``remedy``."""
    schema = rec.get("schema") if isinstance(rec, dict) else None
    if schema != SCHEMA or not isinstance(rec.get("config"), dict):
        found = "no version" if schema is None else f"version {json.dumps(schema)[:20]}"
        raise TpcoreError(f"{what} was written by another tpcore (record {found}, this one "
                          f"reads version {SCHEMA}); {remedy}")
    return rec["config"]


def differences(recorded: dict[str, Any], wanted: dict[str, Any], prefix: str = "") -> list[str]:
    """The settings in which two configurations differ, each as ``key: A recorded, B
    requested``; nested dictionaries by dotted keys."""
    out = []
    for key in dict.fromkeys([*recorded, *wanted]):
        a, b = recorded.get(key, _UNSET), wanted.get(key, _UNSET)
        if isinstance(a, dict) and isinstance(b, dict):
            out += differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {_show(a)} recorded, {_show(b)} requested")
    return out


_UNSET = object()


def _show(value: Any) -> str:
    return "unset" if value is _UNSET else json.dumps(value)


def check_config(recorded: dict[str, Any] | None, config: Any, what: str,
                 remedy: str = OVERWRITE) -> None:
    """Raise a :class:`TpcoreError` unless ``recorded`` is ``config``: naming ``what`` was
    made with other settings and the settings that differ (or that it records none), then
    ``remedy``."""
    wanted = json_value(config)
    if recorded == wanted:
        return
    if recorded is None:
        raise TpcoreError(f"{what} records no configuration (written by an older tpcore); "
                          f"{remedy}")
    raise TpcoreError(f"{what} was made with other settings "
                      f"({'; '.join(differences(recorded, wanted))}); {remedy}")


def check_out_dir(path: str | os.PathLike) -> Path:
    """Make sure files can be written in the folder ``path``, creating it if needed, before any
    work is spent; a :class:`TpcoreError` names the path and why not. Temporaries that killed
    processes left there are removed."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise TpcoreError(f"cannot write to output directory {str(path)!r}: it is a file")
    try:
        path.mkdir(parents=True, exist_ok=True)
        temp_sibling(path / "write-check").unlink()
    except OSError as exc:
        where = "" if exc.filename in (None, str(path)) else f" at {exc.filename!r}"
        raise TpcoreError(f"cannot write to output directory {str(path)!r}: "
                          f"{exc.strerror or exc}{where}") from exc
    remove_stale_temps(path)
    return path


class RunDir:
    """The run directory ``path`` for the configuration ``config`` (see the module docstring).

    Creating one reads what ``path`` holds: :attr:`finished` says that it is a finished run of
    ``config``, to be reused. Otherwise the parent folder is checked to be writable, and
    ``path`` must be absent, an empty folder, or a run (one of other settings, or written by
    another tpcore, only with ``overwrite``); anything else raises a :class:`TpcoreError` at
    once, whose message ends with ``remedy``.
    """

    def __init__(self, path: str | os.PathLike, config: Any, overwrite: bool = False,
                 remedy: str = OVERWRITE) -> None:
        self.path = Path(path)
        if self.path.name in ("", ".."):  # "." or "..": name the folder itself
            self.path = Path(os.path.abspath(self.path))
        if self.path.is_symlink():
            # a run is built beside its path and renamed onto it, which a link would defeat
            raise TpcoreError(f"cannot write the run directory {str(self.path)!r}: it is a "
                              f"symbolic link (to {os.readlink(self.path)!r}); give the folder "
                              "itself")
        self.config = json_value(config)
        self.overwrite, self.remedy = overwrite, remedy
        self.finished = self._reusable()
        if not self.finished:
            check_out_dir(self.path.parent)

    def recorded(self) -> dict[str, Any] | None:
        """The configuration recorded in ``path`` (None: no run there); a record of another
        tpcore raises a :class:`TpcoreError`, unless ``overwrite``, when it counts as a run of
        other settings."""
        rec = self.path / RECORD
        if not rec.is_file():
            return None
        try:
            return recorded_config(json.loads(read_text(rec, "run record")),
                                   f"the run in {str(self.path)!r}", self.remedy)
        except (TpcoreError, ValueError):
            if self.overwrite:
                return {}
            raise

    def _reusable(self) -> bool:
        """Whether ``path`` is a finished run of ``config``; raises where it may not be
        replaced."""
        if not self.path.exists():
            return False
        if not self.path.is_dir():
            raise TpcoreError(f"cannot write the run directory {str(self.path)!r}: it is a "
                              "file")
        recorded = self.recorded()
        if recorded is None:
            if any(self.path.iterdir()):
                raise TpcoreError(f"{str(self.path)!r} holds files but no finished run (no "
                                  f"{RECORD}); remove it or choose another --out")
            return False
        if recorded == self.config:
            return True
        if not self.overwrite:
            check_config(recorded, self.config, f"the run in {str(self.path)!r}", self.remedy)
        return False

    @contextmanager
    def build(self) -> Iterator[Path]:
        """Yield a new temporary folder beside ``path`` to write the run into. On success the
        completion record is written into it and it is renamed to ``path``, replacing what is
        there; on an exception it is removed and ``path`` is left as it was."""
        tmp = temp_sibling(self.path, directory=True)
        try:
            yield tmp
            write_json(tmp / RECORD, record(self.config))
            if self.path.exists():
                if not self.overwrite:  # another process may have finished it meanwhile
                    self._reusable()
                old = temp_sibling(self.path, directory=True)
                os.replace(self.path, old)
                os.replace(tmp, self.path)
                shutil.rmtree(old)
            else:
                os.replace(tmp, self.path)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)


def saved(path: str | os.PathLike, config: Any, remedy: str = OVERWRITE,
          overwrite: bool = False) -> dict[str, Any] | None:
    """The JSON object saved at ``path`` when it records ``config``; None when there is no
    file, or (with ``overwrite``) one of other settings or of another tpcore. Otherwise a
    :class:`TpcoreError` names the differing settings (or the record's version) and
    ``remedy``."""
    path = Path(path)
    if not path.is_file():
        return None
    row = json.loads(read_text(path, "result"))
    try:
        recorded = recorded_config(row.get("record") if isinstance(row, dict) else None,
                                   str(path), remedy)
    except TpcoreError:
        if overwrite:
            return None
        raise
    if recorded == json_value(config):
        return row
    if not overwrite:
        check_config(recorded, config, str(path), remedy)
    return None


def cached(path: str | os.PathLike, config: Any, compute: Callable[[], dict[str, Any]],
           overwrite: bool = False, remedy: str = OVERWRITE) -> dict[str, Any]:
    """The JSON object saved at ``path`` when it records ``config`` (:func:`saved`); otherwise
    ``compute()``, saved there atomically with its record under ``"record"``, and returned.

    With ``overwrite`` a file of other settings is deleted before ``compute`` runs, so files
    that ``compute`` writes beside it never sit next to a stale result."""
    path = Path(path)
    remove_stale_temps(path.parent)
    row = saved(path, config, remedy, overwrite)
    if row is not None:
        return row
    path.unlink(missing_ok=True)
    row = {**compute(), "record": record(config)}
    write_json(path, row)
    return json_value(row)

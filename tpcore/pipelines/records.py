"""Run records packed into one file per study.

A sweep or a study leaves one folder per learn run, each with its record ``metrics.json`` (the
run's configuration, seed, training history and metrics). Results that are committed keep the
records but not the weights, and hundreds of one-file folders cost more room than their bytes.
:func:`pack` gathers every record under a folder into that folder's ``runs.json.gz``, gzip
compressed JSON (``gzip -dc runs.json.gz`` prints it)::

    {"format": "tpcore-runs", "version": 1,
     "runs": {"<run folder, relative to the packed folder>": <its metrics.json>, ...}}

:func:`find_record` reads a run's record back from its own folder or, where the folder is gone,
from the ``runs.json.gz`` of a folder above it, so a run is named by the same path either way (as
``tpcore rebuild`` does).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from tpcore.errors import TpcoreError
from tpcore.io import json_text, read_text, write_text
from tpcore.pipelines.learn import read_metrics, recorded_config

RECORDS = "runs.json.gz"
"""The packed records' file name (gzip-compressed JSON text)."""
FORMAT = "tpcore-runs"
VERSION = 1
MAX_RUNS = 4096
"""Records one file holds at most."""
RECORD_WIDTH = 160
"""Line width of the packed JSON (one evaluation of a history fits a line)."""


def _key(run: Path, folder: Path) -> str:
    return run.relative_to(folder).as_posix()


def _valid_key(key: Any) -> bool:
    parts = key.split("/") if isinstance(key, str) else []
    return bool(parts) and len(key) <= 1024 and all(
        p and p not in (".", "..") and not p.startswith(".") and "\\" not in p
        and p.isprintable() for p in parts)


def read_records(path: str | Path) -> dict[str, dict[str, Any]]:
    """The records of a ``runs.json.gz`` by run path; a file that is not one (another format or
    version, more than :data:`MAX_RUNS` records, a path leaving the folder, a record that is not
    a learn run's) raises a :class:`TpcoreError` naming it and the entry."""
    path = Path(path)
    text = read_text(path, "run records")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise TpcoreError(f"{path}: not readable JSON ({str(exc)[:120]})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise TpcoreError(f"{path}: not a {FORMAT} file; expected {{\"format\": \"{FORMAT}\", "
                          "\"version\": ..., \"runs\": {...}}")
    if doc.get("version") != VERSION:
        raise TpcoreError(f"{path}: version {json.dumps(doc.get('version'))[:20]}; this tpcore "
                          f"reads version {VERSION} (tpcore pack FOLDER writes it again)")
    runs = doc.get("runs")
    if not isinstance(runs, dict) or len(runs) > MAX_RUNS:
        raise TpcoreError(f"{path}: runs is not an object of at most {MAX_RUNS} records")
    for key, metrics in runs.items():
        if not _valid_key(key):
            raise TpcoreError(f"{path}: run {json.dumps(key)[:60]} is not a relative folder "
                              "path; expected names joined by /")
        if not isinstance(metrics, dict):
            raise TpcoreError(f"{path}: run {key!r} is not an object")
        recorded_config(metrics, f"{path}: run {key!r}")
    return runs


def _records_on_disk(folder: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if "metrics.json" in files and Path(root) != folder:
            metrics = read_metrics(root)
            recorded_config(metrics, str(Path(root) / "metrics.json"))
            found[_key(Path(root), folder)] = metrics
    return found


def pack(folder: str | Path) -> dict[str, Any]:
    """Write ``folder/runs.json.gz``: the records of every learn run in a folder under ``folder``
    (hidden folders, such as paused runs, left out), added to the records an existing
    ``runs.json.gz`` holds (a run on disk replaces its packed record). The run folders are left
    as they are. Returns ``{"path", "runs", "on_disk", "bytes"}``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TpcoreError(f"{folder}: not a folder; expected a folder of learn runs")
    path = folder / RECORDS
    runs = read_records(path) if path.is_file() else {}
    on_disk = _records_on_disk(folder)
    runs.update(on_disk)
    if not runs:
        raise TpcoreError(f"{folder}: no learn run records (metrics.json) under it")
    if len(runs) > MAX_RUNS:
        raise TpcoreError(f"{folder}: {len(runs)} run records; one {RECORDS} holds at most "
                          f"{MAX_RUNS}")
    text = json_text({"format": FORMAT, "version": VERSION, "runs": dict(sorted(runs.items()))},
                     width=RECORD_WIDTH) + "\n"
    write_text(path, text)
    return {"path": str(path), "runs": len(runs), "on_disk": len(on_disk),
            "bytes": len(text.encode())}


@functools.lru_cache(maxsize=4)
def _read_once(path: str, mtime_ns: int, size: int) -> dict[str, dict[str, Any]]:
    """:func:`read_records` of ``path`` as it is at ``mtime_ns`` and ``size``: a sweep looks up
    each of its runs in one file, which is read and checked once (the records are not to be
    changed by the caller)."""
    return read_records(path)


def _nearest(run: Path) -> tuple[Path, str, dict[str, dict[str, Any]]] | None:
    """The ``runs.json.gz`` of the nearest folder above ``run`` that has one, ``run``'s key in
    it and its records; None where no folder above has one."""
    for folder in run.parents:
        path = folder / RECORDS
        if path.is_file():
            stat = path.stat()
            return path, _key(run, folder), _read_once(str(path), stat.st_mtime_ns, stat.st_size)
    return None


def packed_record(run: str | Path) -> tuple[dict[str, Any], str] | None:
    """The entry for ``run`` in the ``runs.json.gz`` of the nearest folder above it that has
    one, and where it was read; None where there is no such file or it holds no entry for
    ``run``."""
    found = _nearest(Path(run))
    if found is None:
        return None
    path, key, runs = found
    return (runs[key], f"{path}: run {key!r}") if key in runs else None


def find_record(run: str | Path) -> tuple[dict[str, Any], str]:
    """The record of the learn run at ``run`` and where it was read: ``run/metrics.json``, or
    where that folder holds none, its entry in the ``runs.json.gz`` of the nearest folder above
    it that has one (:func:`packed_record`)."""
    run = Path(run)
    if (run / "metrics.json").is_file():
        return read_metrics(run), str(run / "metrics.json")
    found = _nearest(run)
    if found is None:
        raise TpcoreError(f"{run}: no metrics.json there and no {RECORDS} above it; expected a "
                          "learn run's folder")
    path, key, runs = found
    if key not in runs:
        raise TpcoreError(f"{run}: {path} has no record of run {key!r} ({len(runs)} runs there)")
    return runs[key], f"{path}: run {key!r}"

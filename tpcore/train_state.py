"""Paused training states on disk: :func:`save_state` writes a :class:`~tpcore.train.TrainState`
(the parameters, the best ones so far, the optimiser's moments and counters, the history and
timings) into a folder, :func:`load_state` reads it back, checking every field, so that a run
paused by :class:`~tpcore.train.TrainConfig` ``pause_at`` resumes where it stopped
(successive-halving sweeps pause and resume their runs this way)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.backend import BACKENDS
from tpcore.errors import TpcoreError
from tpcore.io import read_npz, read_text, write_json, write_npz
from tpcore.limits import memory_limit
from tpcore.train import TENTHS, TrainState

STATE_FILES = ("state.json", "params.npz", "best.npz", "optimizer.npz")
"""What :func:`save_state` writes into its folder (``best.npz`` only after an evaluation)."""


def save_state(state: TrainState, folder: str | Path) -> None:
    """Write ``state`` into the existing ``folder``: the arrays as ``.npz`` files
    (:data:`STATE_FILES`), the rest as ``state.json``; each file atomically (write into a fresh
    folder and rename it for the whole to be atomic, e.g. :meth:`tpcore.rundir.RunDir.build`)."""
    folder = Path(folder)
    write_npz(folder / "params.npz", state.params)
    if state.best_params is not None:
        write_npz(folder / "best.npz", state.best_params)
    write_npz(folder / "optimizer.npz", state.optimizer["buffers"])
    write_json(folder / "state.json", {
        "step": state.step, "optimizer": {"t": state.optimizer["t"], "lr": state.optimizer["lr"]},
        "backend": state.backend, "best_score": state.best_score, "stale": state.stale,
        "history": state.history, "best": state.best, "last_loss": state.last_loss,
        "last_step": state.last_step, "seconds": state.seconds,
        "tenth_seconds": state.tenth_seconds, "tenth_steps": state.tenth_steps})


def load_state(folder: str | Path) -> TrainState:
    """The :class:`TrainState` that :func:`save_state` wrote into ``folder``; a missing or
    unreadable file raises a :class:`TpcoreError` naming it."""
    folder = Path(folder)
    try:
        meta = json.loads(read_text(folder / "state.json", "paused state"))
        arrays = {name: _read_npz(folder / f"{name}.npz")
                  for name in ("params", "best", "optimizer")
                  if name != "best" or (folder / "best.npz").is_file()}
        return TrainState(
            step=int(meta["step"]), params=arrays["params"],
            optimizer={**meta["optimizer"], "buffers": arrays["optimizer"]},
            backend=_backend(meta["backend"]),
            best_params=arrays.get("best"), best_score=float(meta["best_score"]),
            stale=int(meta["stale"]), history=meta["history"], best=meta["best"],
            last_loss=float(meta["last_loss"]), last_step=int(meta["last_step"]),
            seconds=float(meta["seconds"]), tenth_seconds=_tenths(meta, "tenth_seconds", float),
            tenth_steps=_tenths(meta, "tenth_steps", int))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TpcoreError(f"{folder}: not a readable paused training state ({exc})") from None


def _backend(name: Any) -> str:
    if name not in BACKENDS:
        raise ValueError(f"backend {str(name)[:40]!r}: expected one of {', '.join(BACKENDS)}")
    return name


def _tenths(meta: dict[str, Any], key: str, kind: type) -> list[Any]:
    """``meta[key]``: :data:`TENTHS` finite numbers >= 0 of ``kind`` (a float list takes ints)."""
    value = meta[key]
    if not (isinstance(value, list) and len(value) == TENTHS
            and all(type(x) in (int, kind) and 0 <= x < math.inf for x in value)):
        raise ValueError(f"{key} {str(value)[:60]}: expected {TENTHS} numbers >= 0")
    return [kind(x) for x in value]


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of one file of a paused state, at most the memory limit's bytes
    (:func:`tpcore.io.read_npz`)."""
    try:
        return read_npz(path, memory_limit()[0])
    except ValueError as exc:
        raise ValueError(f"{path.name}: {exc}") from None

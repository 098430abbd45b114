"""The wall time a sweep folder has cost, kept across the sweeps that fill it.

A long sweep is often run in chunks: stopped, then the same command again, which reuses every
finished run and paused state. Its wall time is then the sum of every chunk's. :class:`WallClock`
keeps that sum, per phase (a halving rung, the final runs), in ``<out>/wall.json``::

    {"phases": {"rung 0: 30 epochs": 1020.4, "rung 1: 80 epochs": 511.2, "final": 693.9}}

and writes it at every :meth:`WallClock.tick` (each finished run and each rung's end), so a
sweep stopped at any moment loses only the time since its last finished run. A folder filled
before the clock existed starts from the ``wall_seconds`` of its ``sweep.json``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from tpcore.errors import TpcoreError
from tpcore.io import read_text, write_json

WALL_FILE = "wall.json"
MAX_PHASES = 64
MAX_PHASE_NAME = 64
EARLIER = "earlier sweeps"


class WallClock:
    """Seconds spent by the sweeps into ``out``, per phase; ``fresh=True`` (a sweep that
    retrains everything, ``overwrite``) starts from zero instead of the folder's record."""

    def __init__(self, out: Path, fresh: bool = False) -> None:
        self.path = Path(out) / WALL_FILE
        self.phases: dict[str, float] = {} if fresh else read_phases(Path(out))
        self.last = time.perf_counter()

    def tick(self, phase: str) -> float:
        """Add the seconds since the last tick (or since the clock was made) to ``phase``,
        save, and return ``phase``'s seconds so far."""
        now = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self.last
        self.last = now
        write_json(self.path, {"phases": self.phases})
        return self.phases[phase]

    @property
    def total(self) -> float:
        """Seconds of every phase together."""
        return sum(self.phases.values())


def read_phases(out: Path) -> dict[str, float]:
    """The phases recorded in ``out/wall.json``, validated (at most :data:`MAX_PHASES` names of
    at most :data:`MAX_PHASE_NAME` characters, each a finite number of seconds >= 0); without that
    file, ``sweep.json``'s ``wall_seconds`` as one phase when it holds one; else none."""
    path = out / WALL_FILE
    if not path.exists():
        earlier = _sweep_json_seconds(out)
        return {EARLIER: earlier} if earlier else {}
    try:
        doc = json.loads(read_text(path, "wall-clock record"))
    except (OSError, ValueError) as exc:
        raise TpcoreError(f"{path}: not a readable wall clock ({exc}); delete it to start "
                          f"the clock again") from None
    phases = doc.get("phases") if isinstance(doc, dict) else None
    ok = (isinstance(phases, dict) and len(phases) <= MAX_PHASES
          and all(isinstance(k, str) and len(k) <= MAX_PHASE_NAME for k in phases)
          and all(_seconds(v) for v in phases.values()))
    if not ok:
        raise TpcoreError(f"{path}: expected {{\"phases\": {{name: seconds}}}} with at most "
                          f"{MAX_PHASES} names and finite seconds >= 0; delete it to start the "
                          f"clock again")
    return {k: float(v) for k, v in phases.items()}


def _seconds(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def _sweep_json_seconds(out: Path) -> float:
    """``wall_seconds`` of the ``sweep.json`` in ``out`` (0 when there is none, or it holds no
    finite number of seconds >= 0)."""
    try:
        seconds = json.loads(read_text(out / "sweep.json", "sweep record"))["wall_seconds"]
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0
    return float(seconds) if _seconds(seconds) else 0.0

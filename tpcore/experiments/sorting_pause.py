"""Parts of ``tpcore reproduce sorting`` trained in chunks (``--hours``): a paused part keeps
its state in the hidden folder ``.<part>.partial`` of the output folder
(:func:`~tpcore.pipelines.learn_runs.paused_dir` of its model), written as a unit with its
settings recorded (:func:`paused_settings`, :class:`tpcore.rundir.RunDir`), with what the part
keeps beside it (:data:`KEPT`); a later call resumes it only with the same settings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tpcore.backend import backend_name
from tpcore.errors import TpcoreError
from tpcore.experiments.against_bp import paused_state
from tpcore.io import read_text, write_json
from tpcore.pipelines.learn_runs import paused_dir
from tpcore.rundir import RunDir
from tpcore.train import TrainState
from tpcore.train_state import save_state


def paused_settings(config: dict[str, Any]) -> dict[str, Any]:
    """What a paused state of the part of ``config`` (its
    :func:`~tpcore.experiments.sorting.run_config`) records and must match to be resumed: that
    configuration and the backend (the step noise and arithmetic differ between backends)."""
    return dict(config=config, backend=backend_name())


KEPT = "part.json"
"""What a paused part keeps beside its state: its training CPU seconds so far and, for the QK
part, the snapshots taken so far."""


def resumed_part(out_dir: Path, name: str, config: dict[str, Any],
                 overwrite: bool) -> tuple[TrainState | None, dict[str, Any]]:
    """The paused state of part ``name`` in ``out_dir`` and what it keeps beside it
    (:data:`KEPT`); ``(None, {})`` when there is none. One of other settings is refused in one
    line naming its record and the settings that differ, unless ``overwrite`` (then ignored:
    the part trains afresh)."""
    where = paused_dir(out_dir / name)
    try:
        state = paused_state(where, paused_settings(config))
    except TpcoreError:
        if overwrite:
            return None, {}
        raise
    if state is None:
        return None, {}
    return state, json.loads(read_text(where / KEPT, "paused part"))


def keep_paused(out_dir: Path, name: str, config: dict[str, Any], state: TrainState,
                kept: dict[str, Any]) -> dict[str, str]:
    """Save the paused ``state`` of part ``name`` with ``kept`` (:data:`KEPT`) as a unit;
    returns ``{"paused": a line saying where}``."""
    where = paused_dir(out_dir / name)
    with RunDir(where, paused_settings(config), overwrite=True).build() as tmp:
        save_state(state, tmp)
        write_json(tmp / KEPT, kept)
    return {"paused": f"paused {name} at step {state.step} of {config['steps']} (its state is "
                      f"in {where})"}

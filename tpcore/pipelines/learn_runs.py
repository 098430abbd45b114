"""Where a learn run's files go and how its record is read back.

A finished run is a run directory (:func:`run_dir`, :class:`tpcore.rundir.RunDir`) whose
configuration is the run's :meth:`LearnConfig.settings`; a paused run keeps its state in the
hidden sibling folder :func:`paused_dir` with a summary (:data:`PAUSED`,
:func:`paused_summary`). A finished run's record ``metrics.json`` is read back, checked, by
:func:`read_metrics`, :func:`recorded_run` and :func:`recorded_accuracy`, as commands, studies and
``tpcore rebuild`` do with committed results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tpcore.errors import TpcoreError
from tpcore.pipelines.learn_config import LearnConfig, json_kind
from tpcore.programs.ir import read_limited
from tpcore.rundir import RunDir
from tpcore.train import TrainState

__all__ = ["GROWN", "PAUSED", "is_run", "paused_dir", "paused_summary", "read_metrics",
           "recorded_accuracy", "recorded_config", "recorded_run", "run_dir"]

GROWN = "grown.json"
"""The program IR of a growing run's wider model, in its run directory."""
PAUSED = "paused.json"
"""The summary of a paused run inside its :func:`paused_dir`."""


def run_dir(cfg: LearnConfig, out: Path, overwrite: bool = False) -> RunDir:
    """The run directory of ``cfg`` at ``out``; its configuration is
    :meth:`LearnConfig.settings`."""
    return RunDir(out, cfg.settings(), overwrite)


def paused_dir(out: str | Path) -> Path:
    """Where the run bound for ``out`` keeps its paused state: the hidden sibling folder
    ``.<name>.partial``, with the run's configuration recorded (:class:`RunDir`)."""
    out = Path(out)
    return out.with_name(f".{out.name}.partial")


def paused_summary(cfg: LearnConfig, state: TrainState, per_epoch: int) -> dict[str, Any]:
    """What a paused run reports: ``epochs`` and ``steps`` trained, ``val``: the validation
    metrics of the model selected so far (empty before the first evaluation), ``history``,
    ``train_seconds`` over all its sessions, its ``config``, and ``paused``: True."""
    return {"paused": True, "task": cfg.task, "config": cfg.settings(), "seed": cfg.seed,
            "epochs": state.step // per_epoch, "steps": state.step,
            "steps_per_epoch": per_epoch, "val": state.best, "history": state.history,
            "train_seconds": state.seconds}


def is_run(path: Path) -> bool:
    """Whether ``path`` is a finished learn run (``metrics.json`` and ``model.npz``)."""
    return (path / "metrics.json").is_file() and (path / "model.npz").is_file()


def read_metrics(run_dir: str | Path) -> dict[str, Any]:
    """A run directory's ``metrics.json`` as an object (at most ``LIMITS.file_bytes``); a file
    that is not raises a :class:`TpcoreError` naming it."""
    path = Path(run_dir) / "metrics.json"
    try:
        metrics = json.loads(read_limited(path, "run metrics"))
    except (OSError, ValueError, RecursionError) as exc:
        raise TpcoreError(f"{path}: not readable JSON ({str(exc)[:120]})") from None
    if not isinstance(metrics, dict):
        raise TpcoreError(f"{path}: {json_kind(metrics)}; expected an object")
    return metrics


def recorded_config(metrics: dict[str, Any], where: str) -> LearnConfig:
    """The configuration a learn run's record ``metrics`` holds (:meth:`LearnConfig.from_json`),
    read from ``where``; a record that is not a learn run's raises a :class:`TpcoreError`
    naming ``where`` and the key."""
    if "config" not in metrics:
        raise TpcoreError(f"{where}: no config")
    config = LearnConfig.from_json(metrics["config"], where)
    if metrics.get("task", config.task) != config.task:
        raise TpcoreError(f"{where}: task {json.dumps(metrics['task'])[:40]} is not its config's "
                          f"{config.task!r}")
    return config


def recorded_run(run_dir: str | Path) -> tuple[dict[str, Any], LearnConfig]:
    """The ``metrics.json`` of a finished learn run and the configuration it records
    (:func:`recorded_config`)."""
    metrics = read_metrics(run_dir)
    return metrics, recorded_config(metrics, str(Path(run_dir) / "metrics.json"))


def recorded_accuracy(metrics: dict[str, Any], split: str, where: str | Path) -> float:
    """The token accuracy ``metrics[split]["acc"]`` of a run's ``metrics.json`` (read from
    ``where``): a number in [0, 1], else a :class:`TpcoreError` naming the file and key."""
    part = metrics.get(split)
    acc = part.get("acc") if isinstance(part, dict) else None
    if type(acc) not in (int, float) or not 0 <= acc <= 1:
        raise TpcoreError(f"{where}: {split}.acc is {json.dumps(acc)[:40]}; expected a number "
                          "in [0, 1]")
    return float(acc)

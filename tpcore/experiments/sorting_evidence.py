"""Beside :mod:`tpcore.experiments.sorting`: the causal model's QK matrix over training, the
post's "Evidence 1": snapshots of the standardised QK tables at a few training steps, their
upper-triangularity, the Markdown section of ``sorting.md`` and the figure.

At output item ``k`` (query position ``p = first_target + k``) the table is the QK circuit of
:func:`tpcore.analysis.circuits.qk_matrix` over value tokens only (BOS and MOS left out, keys
at position 1): ``QK[q, t] = ((E[q] + P[p]) W_Q + b_Q) . ((E[t] + P[1]) W_K + b_K)``, a
``(V, V)`` query-token x key-token table, each row shifted so that its maximum is 0 and clipped
at -99 (:func:`tpcore.analysis.circuits.standardise_rows`), as the post draws it.

Host-side bookkeeping (NumPy on host copies).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tpcore.analysis import circuits as C
from tpcore.analysis.plots import qk_training_figure
from tpcore.backend import to_host
from tpcore.tasks.sorting import SortingTask, get_task

QK_RUN = "causal_qk_training"
"""The name of this part of ``tpcore reproduce sorting`` (``--tasks``, result files)."""
CHECKPOINT_FRACTIONS = (0.005, 0.02, 0.06, 0.2, 0.5, 1.0)
"""Where the QK tables are taken, as fractions of the training steps (40, 160, 480, 1600, 4000
and 8000 of the causal schedule's 8000)."""
SHOWN_ITEMS = (0, 5, 9)
"""The output items whose tables are kept and drawn (those of the circuit reports)."""
DECIMALS = 1
"""QK entries are kept to this many decimals (they span 0 to -99)."""


def checkpoint_steps(steps: int) -> list[int]:
    """The training steps (1-based, after that many updates) where the tables are taken:
    :data:`CHECKPOINT_FRACTIONS` of ``steps``, rounded, at least 1, without repeats."""
    return sorted({max(1, round(f * steps)) for f in CHECKPOINT_FRACTIONS})


def qk_tables(model: Any, task: SortingTask) -> dict[int, Any]:
    """Output item ``k`` -> the standardised ``(V, V)`` QK table at query position
    ``first_target + k`` (module docstring; host arrays), for every item ``k < L``."""
    v = task.n_values
    return {k: to_host(C.standardise_rows(C.qk_matrix(model, task.first_target + k, 1)[:v, :v]))
            for k in range(task.length)}


def qk_snapshot(model: Any, task: SortingTask) -> dict[str, Any]:
    """What one checkpoint keeps: the upper-triangularity of every item's table
    (:func:`tpcore.analysis.circuits.upper_triangularity`, ``L`` numbers) and the tables of
    :data:`SHOWN_ITEMS` (``str(k)`` -> ``V`` rows of ``V`` numbers, :data:`DECIMALS` places)."""
    tables = qk_tables(model, task)
    return dict(upper_triangularity=[round(C.upper_triangularity(t), 3)
                                     for t in tables.values()],
                qk={str(k): tables[k].round(DECIMALS).tolist() for k in SHOWN_ITEMS})


def kept_checkpoints(history: list[dict[str, Any]], snapshots: list[dict[str, Any]],
                     steps: list[int]) -> list[dict[str, Any]]:
    """The checkpoints a run keeps: of the evaluations (``history`` rows and the ``snapshots``
    taken after each, in order) those at ``steps``, each its ``step``, ``train_loss``,
    ``validation_loss`` and snapshot."""
    return [dict(step=h["step"], train_loss=h["train_loss"], validation_loss=h["loss"], **snap)
            for h, snap in zip(history, snapshots) if h["step"] in steps]


def qk_summary(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` without its tables (what ``sorting.json`` keeps)."""
    return {**record, "checkpoints": [{k: v for k, v in c.items() if k != "qk"}
                                      for c in record["checkpoints"]]}


def qk_report_line(record: dict[str, Any]) -> str:
    """The line ``tpcore reproduce sorting`` prints for this part."""
    steps = ", ".join(str(c["step"]) for c in record["checkpoints"])
    return f"{QK_RUN}: QK tables at steps {steps} in {record['train_seconds']:.0f} s"


def qk_markdown(record: dict[str, Any]) -> str:
    """The section of ``sorting.md`` on the QK tables over training: per checkpoint, the
    validation loss and the upper-triangularity of each output item's table."""
    items = range(len(record["checkpoints"][0]["upper_triangularity"]))
    lines = ["", f"QK matrix of the causal model over training (`{record['command']}`): "
             "upper-triangularity of the QK table (value tokens) at each output item, i.e. "
             "the share of query tokens whose favourite other key is a greater token (the "
             "min>prev filter); tables drawn in `plots/causal_qk_training.png`:", "",
             "| step | validation loss | " + " | ".join(f"item {k}" for k in items) + " |",
             "|---|---|" + "---|" * len(items)]
    for c in record["checkpoints"]:
        lines.append(f"| {c['step']} | {c['validation_loss']:.4f} | "
                     + " | ".join(f"{u:.2f}" for u in c["upper_triangularity"]) + " |")
    return "\n".join(lines) + "\n"


def draw_qk_training(out_dir: Path) -> list[Path]:
    """Draw the tables of ``out_dir``'s :data:`QK_RUN` result, if it has one, to
    ``out_dir/plots/causal_qk_training.png`` (checkpoints as rows, :data:`SHOWN_ITEMS` as
    columns; needs matplotlib); returns the paths written."""
    path = out_dir / f"{QK_RUN}_result.json"
    if not path.is_file():
        return []
    record = json.loads(path.read_text())
    task = get_task(record["trains"])
    names = task.token_names()[: task.n_values]
    return [qk_training_figure(
        out_dir / "plots" / f"{QK_RUN}.png",
        {c["step"]: {int(k): t for k, t in c["qk"].items()} for c in record["checkpoints"]},
        names, f"{task.name} model: QK (query token x key token) over training, rows "
        "standardised (max 0, clipped at -99)")]

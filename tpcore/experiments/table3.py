"""``tpcore reproduce table3``: Table 3 of "Learning Transformer Programs", the seven RASP tasks
with categorical variables only.

The setting of Table 1 (:mod:`tpcore.experiments.table1`: the same tasks and sizes, 250 epochs,
Adam lr 0.05, batch 512, temperature 3.0 -> 0.01, selection on validation token accuracy), but
every attention head and MLP is categorical: no numerical heads, no numerical MLPs, so no module
reads or writes a numerical variable. A model of ``H`` heads and ``M`` MLPs per layer has
``H`` categorical heads and ``M`` categorical MLPs (run names ``L3_H8+0_M4+0_s0``), which is how
Table 3 counts them: the authors' released categorical-only programs have Table 3's L, H and M
(all but sort's, see :data:`PAPER_ARCH`).

:func:`run` sweeps each task at a ``budget`` and writes ``table3.json`` and ``table3.md``: test
token accuracy of the discrete model beside Table 3's, the selected and the paper's L, H, M,
and the protocol of each row (architectures x seeds, every run to the end or successive
halving). Budgets:

- ``smoke``: one small model per task (2 layers, 2 heads, 2 MLPs), 2 epochs on 2,000 samples
  (checks the pipeline);
- ``small``: 2 layers, 4 heads, 2 MLPs, one seed, 60 epochs;
- ``medium``: Table 3's selected architecture per task (:data:`PAPER_ARCH`), three seeds, 250
  epochs: the paper's model trained over a few seeds, without the search;
- ``paper``: the paper's grid, layers {2, 3} x heads {4, 8} x MLPs {2, 4} x five seeds, 250
  epochs, all categorical.

Seeds count from the ``seed`` given; ``halving=ETA`` runs each task's sweep by successive
halving (:func:`tpcore.pipelines.sweep.halve`; the ``paper`` budget's 40 runs per task at ETA 3
train 27.5 % of the full grid's epochs). Finished runs are reused, rows of other tasks kept, as
:func:`tpcore.experiments.table1.run` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tpcore.experiments.budget import Budget, preset
from tpcore.experiments.options import EPOCHS, Option, Reproduction
from tpcore.experiments.table1 import SEEDS, SWEEP_OPTIONS, chosen_tasks, figures, sweep_tasks
from tpcore.pipelines.learn import LearnConfig
from tpcore.pipelines.sweep import PAPER_GRID, grid

__all__ = ["BUDGETS", "CLI", "PAPER", "PAPER_ARCH", "TASKS", "budget", "configs_for",
           "figures", "protocol", "report", "run", "table"]

TASKS = ("reverse", "hist", "double_hist", "sort", "most_freq", "dyck1", "dyck2")
PAPER = {"reverse": 99.75, "hist": 83.20, "double_hist": 55.89, "sort": 99.99,
         "most_freq": 64.13, "dyck1": 99.43, "dyck2": 99.17}
"""Paper Table 3: test token accuracy (percent) with categorical variables only."""
PAPER_ARCH = {"reverse": (3, 8, 4), "hist": (3, 8, 4), "double_hist": (2, 8, 2),
              "sort": (3, 2, 2), "most_freq": (3, 8, 4), "dyck1": (3, 8, 4),
              "dyck2": (3, 4, 2)}
"""Layers, categorical heads and categorical MLPs per layer of Table 3's best model per task.
The authors' released categorical-only programs have these sizes, except sort's: 2 layers of 4
heads and 4 MLPs (inside the paper's grid; Table 3's 2 heads and 2 MLPs are not)."""
BUDGETS = {
    "smoke": Budget("smoke", dict(epochs=2, n_seeds=1, grid=((2,), (2,), (2,)),
                                  learn=dict(n_samples=2000, batch_size=256, eval_every=1))),
    "small": Budget("small", dict(epochs=60, n_seeds=1, grid=((2,), (4,), (2,)), learn={})),
    "medium": Budget("medium", dict(epochs=250, n_seeds=3, grid=None, learn={})),
    "paper": Budget("paper", dict(epochs=250, n_seeds=len(PAPER_GRID["seeds"]),
                                  grid=(PAPER_GRID["layers"], PAPER_GRID["heads"],
                                        PAPER_GRID["mlps"]), learn={})),
}
"""Per budget: epochs, seeds per architecture, the architectures (layers, heads and MLPs per
layer, all categorical; None: Table 3's per task, :data:`PAPER_ARCH`) and other
:class:`LearnConfig` settings."""


def budget(name: str) -> Budget:
    """The preset ``name`` of :data:`BUDGETS`."""
    return preset(name, BUDGETS)


def configs_for(task: str, budget: Budget, epochs: int | None = None,
                seeds: list[int] | None = None, seed: int = 0) -> list[LearnConfig]:
    """The categorical-only runs ``budget`` spends on ``task``: every architecture of its grid
    (or Table 3's) for each of its seeds counted from ``seed``, or ``seeds``; none has a
    numerical head or MLP."""
    seeds = seeds or [seed + i for i in range(budget["n_seeds"])]
    base = LearnConfig(task=task, epochs=epochs or budget["epochs"], **budget["learn"])
    layers, heads, mlps = (([n] for n in PAPER_ARCH[task]) if budget["grid"] is None
                           else budget["grid"])
    return grid(base, layers, heads, mlps, seeds, categorical_only=True)


def protocol(row: dict[str, Any]) -> str:
    """How a row's run was selected: ``A architectures x S seeds, E epochs``, then ``all to
    the end`` or the runs per rung of successive halving (``halving 3: 40/14/5 runs``)."""
    seeds = len(row["seeds"])
    archs = row["runs"] // seeds
    text = (f"{archs} architecture{'s' * (archs > 1)} x {seeds} seed{'s' * (seeds > 1)}, "
            f"{row['epochs']} epochs")
    h = row.get("halving")
    return text + (f", halving {h['eta']}: {'/'.join(map(str, h['runs']))} runs" if h
                   else ", all to the end")


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown table of the per-task results beside Table 3: the selected run's layers,
    heads, MLPs (all categorical) and seed, Table 3's, the protocol (:func:`protocol`), test
    token accuracy against the paper's, and the finished runs within a point of the paper."""
    lines = ["| task | N | selected (L, H, M, seed) | paper (L, H, M) | protocol | "
             "test token acc | paper | test seq acc | program lines | fidelity | train s | "
             "runs within 1 of the paper |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["selected"]
        fid = "-" if s.get("fidelity") is None else f"{100 * s['fidelity']:.1f}%"
        arch = ", ".join(map(str, PAPER_ARCH[r["task"]]))
        lines.append(
            f"| {r['task']} | {r['n']} | {s['layers']}, {s['heads']}, {s['mlps']}, {s['seed']} | "
            f"{arch} | {protocol(r)} | {r['test_acc']:.2f} | {PAPER[r['task']]:.2f} | "
            f"{100 * s['test_seq_acc']:.2f} | {s.get('program_lines') or '-'} | {fid} | "
            f"{s['train_seconds']:.0f} | {r['success']} of {r['finished']} |")
    return "\n".join(lines)


CLI = Reproduction(
    "Transformer Programs paper, Table 3 (RASP tasks, categorical variables only)",
    "results/table3", "small",
    "smoke: pipeline check; small: 2 layers, 4 heads, 2 MLPs, 1 seed, 60 epochs; medium: "
    "Table 3's architecture per task, 3 seeds, 250 epochs; paper: full grid, 5 seeds (every "
    "head and MLP categorical; seeds counted from --seed)",
    (EPOCHS, SEEDS, Option("--tasks", "subset of tasks (default: all seven)", nargs="+"),
     *SWEEP_OPTIONS))
"""``tpcore reproduce table3``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int, tasks: tuple[str, ...] | None = None,
        epochs: int | None = None, seeds: list[int] | None = None, jobs: int = 1,
        scheduler: str | None = None, overwrite: bool = False, halving: int | None = None,
        rungs: int = 3) -> dict[str, Any]:
    """Sweep every task (or ``tasks``, names or aliases) at ``budget``, categorical variables
    only, into ``out/runs/<task>``; write ``out/table3.json`` and ``out/table3.md``. The
    options are :func:`tpcore.experiments.table1.run`'s: ``epochs`` and ``seeds`` replace the
    budget's, ``jobs`` local processes or a Dask ``scheduler`` run the sweeps, finished runs of
    the same configuration are reused (one of another is refused unless ``overwrite``), rows of
    other tasks at the same budget are kept, and ``halving``, ``rungs`` run each sweep by
    successive halving."""
    return sweep_tasks("table3", budget, out, seed, chosen_tasks(tasks, TASKS, TASKS, "Table 3"),
                       TASKS, PAPER, configs_for, table, epochs, seeds, jobs, scheduler,
                       overwrite, halving, rungs)


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce table3`` prints: the table."""
    return table(result["tasks"])

"""``tpcore reproduce program-lengths``: Table 4 of "Learning Transformer Programs", the length of
the decompiled programs of the Table 1 models, before and after the compression of Appendix
A.3, beside the paper's counts; and the fidelity of those programs: agreement with the discrete
model on the whole test split of the NumPy reference, the numba kernel and the generated Python
program.

:func:`run` reuses (or trains, resumably) the Table 1 sweep at ``budget`` through
:func:`tpcore.experiments.table1.run` (or takes explicit run directories), reads each selected
run's program (its ``program.json``, or extracted from its model), counts the lines of its
generated program without and with compression, in all and per module
(:func:`tpcore.programs.source.writer.module_lines`), times its extraction and code generation,
measures fidelity (:func:`tpcore.pipelines.learn.fidelity`), and writes
``program_lengths.json`` and ``program_lengths.md``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tpcore.errors import TpcoreError
from tpcore.experiments import table1
from tpcore.experiments.budget import Budget
from tpcore.experiments.options import EPOCHS, Option, Reproduction
from tpcore.io import write_json, write_text
from tpcore.pipelines.decompile import load_program
from tpcore.pipelines.learn import fidelity, read_metrics, recorded_accuracy
from tpcore.programs.source import writer
from tpcore.rundir import check_out_dir

TASKS = ("reverse", "hist", "double_hist", "sort", "most_freq", "dyck1", "dyck2")
PAPER = {"reverse": (1893, 713), "hist": (324, 160), "double_hist": (1309, 423),
         "sort": (1503, 635), "most_freq": (1880, 666), "dyck1": (9975, 892),
         "dyck2": (5406, 733)}
"""Paper Table 4: lines of the best program per task, full and pruned."""


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown table of the per-task line counts."""
    lines = ["| task | selected run | test token acc | lines full | lines pruned | paper full | "
             "paper pruned | pruned <= paper | fidelity numpy / numba / program |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f = r.get("fidelity")
        fid = "-" if f is None else " / ".join(
            f"{100 * f[k]:.2f}%" for k in ("numpy", "numba", "generated"))
        lines.append(f"| {r['task']} | {r['run']} | {r['test_acc']:.2f} | {r['full']} | "
                     f"{r['pruned']} | {r['paper_full']} | {r['paper_pruned']} | "
                     f"{'yes' if r['pruned'] <= r['paper_pruned'] else 'no'} | {fid} |")
    return "\n".join(lines)


def measure(run_dir: str | Path, check_fidelity: bool = True) -> dict[str, Any]:
    """One row: the run's task and test accuracy, its program's line counts and lines per
    module before and after compression (:func:`tpcore.programs.source.writer.module_lines`), the
    paper's counts, the seconds to extract the program (or read it) and write its compressed
    source, and (with ``check_fidelity``) the agreement of every engine with the model."""
    run_dir = Path(run_dir)
    if not (run_dir / "metrics.json").is_file():
        raise TpcoreError(f"{run_dir}: not a finished run directory (no metrics.json)")
    metrics = read_metrics(run_dir)
    task = metrics.get("task")
    if not isinstance(task, str) or task not in PAPER:
        raise TpcoreError(f"{run_dir / 'metrics.json'}: task {json.dumps(task)[:40]} has no "
                          f"program length in the paper; expected one of {sorted(PAPER)}")
    full, pruned = PAPER[task]
    start = time.perf_counter()
    program = load_program(run_dir)
    writer.source(program)
    seconds = time.perf_counter() - start
    lines = writer.module_lines(program)
    modules = {name: {"full": lines["full"][name], "pruned": lines["pruned"][name]}
               for name in lines["full"] if name != "total"}
    test_acc = recorded_accuracy(metrics, "test", run_dir / "metrics.json")
    return {"task": task, "run": run_dir.name, "test_acc": 100 * test_acc,
            "full": lines["full"]["total"], "pruned": lines["pruned"]["total"],
            "paper_full": full, "paper_pruned": pruned, "module_lines": modules,
            "decompile_seconds": seconds,
            "fidelity": fidelity(run_dir) if check_fidelity else None}


def module_table(rows: list[dict[str, Any]], top: int = 4) -> str:
    """Markdown table of where each program's lines are: its ``top`` longest modules before
    compression with their lines after, the rest of the file, and how many modules are
    written."""
    lines = ["| task | longest modules, full -> pruned lines | other lines | "
             "modules written as code |", "|---|---|---|---|"]
    for r in rows:
        mods = {k: v for k, v in r["module_lines"].items() if k != "other"}
        longest = sorted(mods, key=lambda k: -mods[k]["full"])[:top]
        text = ", ".join(f"{k} {mods[k]['full']} -> {mods[k]['pruned']}" for k in longest)
        other = r["module_lines"]["other"]
        written = sum(v["pruned"] > 1 for v in mods.values())
        lines.append(f"| {r['task']} | {text} | {other['full']} -> {other['pruned']} | "
                     f"{written} of {len(mods)} |")
    return "\n".join(lines)


BUDGETS = table1.BUDGETS
"""The Table 1 budgets: the one whose selected programs are measured."""


def budget(name: str) -> Budget:
    """The Table 1 preset ``name``."""
    return table1.budget(name)


CLI = Reproduction(
    "Transformer Programs paper, Table 4 (program length before/after compression)",
    "results/program_lengths", "small",
    "the Table 1 budget whose selected programs are counted (its runs are reused, or trained "
    "when missing)",
    (EPOCHS,
     Option("--table1", "Table 1 results folder", default="results/table1", dest="table1_dir"),
     Option("--run-dirs", "measure these learn run directories instead of the Table 1 "
            "selection", nargs="+", metavar="DIR"),
     Option("--no-fidelity", "skip the fidelity check", "off", dest="check_fidelity"),
     Option("--overwrite", "retrain Table 1 runs made with other settings", "switch")))
"""``tpcore reproduce program-lengths``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int, table1_dir: str | Path = "results/table1",
        tasks: tuple[str, ...] | None = None, epochs: int | None = None,
        check_fidelity: bool = True, run_dirs: list[str | Path] | None = None,
        overwrite: bool = False) -> dict[str, Any]:
    """Rows for the selected Table 1 runs at ``budget`` and ``seed`` in ``table1_dir`` (trained
    when missing; runs of other settings there are refused unless ``overwrite``, see
    :func:`tpcore.experiments.table1.run`), or for the given ``run_dirs`` (then ``budget``,
    ``seed``, ``epochs`` and ``tasks`` are not used); writes ``program_lengths.json`` and
    ``program_lengths.md`` into ``out``. Nothing is cached: the rows are measured anew."""
    tasks = tuple(tasks or TASKS)
    start = time.perf_counter()
    out = check_out_dir(out)
    if run_dirs is None:
        t1 = table1.run(budget, Path(table1_dir), seed, tasks=tasks, epochs=epochs,
                        overwrite=overwrite)
        run_dirs = [Path(table1_dir) / "runs" / r["task"] / r["selected"]["run"]
                    for r in t1["tasks"] if r["task"] in tasks]
        command = (f"tpcore reproduce program-lengths --budget {budget.name} --table1 "
                   f"{table1_dir}" + (f" --epochs {epochs}" if epochs else "")
                   + (f" --seed {seed}" if seed else ""))
    else:
        command = f"tpcore reproduce program-lengths --run-dirs {' '.join(map(str, run_dirs))}"
    rows = [measure(d, check_fidelity) for d in run_dirs]
    write_text(out / "program_lengths.md",
               f"{table(rows)}\n\nLines per module:\n\n{module_table(rows)}\n")
    result = {"budget": None if "--run-dirs" in command else budget.name, "epochs": epochs,
              "tasks": rows,
              "at_or_below_paper": sum(r["pruned"] <= r["paper_pruned"] for r in rows),
              "seconds": time.perf_counter() - start, "command": f"{command} --out {out}"}
    write_json(out / "program_lengths.json", result)
    return result


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce program-lengths`` prints: the table and how many programs are at
    or below the paper's pruned length."""
    return (f"{table(result['tasks'])}\n{result['at_or_below_paper']} of {len(result['tasks'])} "
            "programs at or below the paper's pruned length")

"""Table 4 of "Learning Transformer Programs": length of the decompiled programs of the Table 1
models, before and after the compression of Appendix A.3, beside the paper's counts; and the
fidelity of those programs (issue 4): agreement with the discrete model on the whole test split
of the NumPy reference, the numba kernel and the generated Python program.

:func:`run` reuses (or trains, resumably) the Table 1 sweep at ``budget`` through
:func:`tpcore.experiments.table1.run` (or takes explicit run directories), reads each selected
run's ``program.json``, counts
the lines of its generated program without and with compression
(:func:`tpcore.programs.codegen.line_counts`), measures fidelity
(:func:`tpcore.pipelines.learn.fidelity`), and writes ``program_lengths.json`` and
``program_lengths.md``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

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
    """One row: the run's task and test accuracy, its program's line counts, the paper's, and
    (with ``check_fidelity``) the agreement of every engine with the model."""
    from tpcore.programs import codegen, ir
    from tpcore.pipelines.learn import fidelity

    run_dir = Path(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    task = metrics["task"]
    full, pruned = PAPER[task]
    return {"task": task, "run": run_dir.name, "test_acc": 100 * metrics["test"]["acc"],
            **codegen.line_counts(ir.load(run_dir / "program.json")),
            "paper_full": full, "paper_pruned": pruned,
            "fidelity": fidelity(run_dir) if check_fidelity else None}


def run(budget: str = "small", table1_dir: str | Path = "results/table1",
        out: str | Path = "results/program_lengths", tasks: tuple[str, ...] = TASKS,
        epochs: int | None = None, check_fidelity: bool = True,
        run_dirs: list[str | Path] | None = None, overwrite: bool = False) -> dict[str, Any]:
    """Rows for the selected Table 1 runs at ``budget`` (trained when missing; runs of other
    settings in ``table1_dir`` are refused unless ``overwrite``, see
    :func:`tpcore.experiments.table1.run`), or for the given ``run_dirs`` (then ``budget``,
    ``epochs`` and ``tasks`` are not used); writes ``program_lengths.json`` and
    ``program_lengths.md`` into ``out``. Nothing is cached: the rows are measured anew."""
    from tpcore.experiments import table1
    from tpcore.io import write_json, write_text
    from tpcore.rundir import check_out_dir

    start = time.perf_counter()
    out = check_out_dir(out)
    if run_dirs is None:
        t1 = table1.run(budget, out=table1_dir, tasks=tasks, epochs=epochs, overwrite=overwrite)
        run_dirs = [Path(table1_dir) / "runs" / r["task"] / r["selected"]["run"]
                    for r in t1["tasks"] if r["task"] in tasks]
        command = (f"tpcore reproduce program-lengths --budget {budget} --table1 {table1_dir}"
                   + (f" --epochs {epochs}" if epochs else ""))
    else:
        command = f"tpcore reproduce program-lengths --run-dirs {' '.join(map(str, run_dirs))}"
    rows = [measure(d, check_fidelity) for d in run_dirs]
    write_text(out / "program_lengths.md", table(rows) + "\n")
    result = {"budget": None if "--run-dirs" in command else budget, "epochs": epochs,
              "tasks": rows,
              "at_or_below_paper": sum(r["pruned"] <= r["paper_pruned"] for r in rows),
              "seconds": time.perf_counter() - start, "command": f"{command} --out {out}"}
    write_json(out / "program_lengths.json", result)
    return result

"""Table 4 of "Learning Transformer Programs": length of the decompiled programs of the Table 1
models, before and after the compression of Appendix A.3, beside the paper's counts; and the
fidelity of those programs (issue 4): agreement with the discrete model on the whole test split
of the NumPy reference, the numba kernel and the generated Python program.

:func:`run` reuses (or trains, resumably) the Table 1 sweep at ``budget`` through
:func:`tpcore.experiments.table1.run`, reads each task's selected run's ``program.json``, counts
the lines of its generated program without and with compression
(:func:`tpcore.programs.codegen.line_counts`), measures fidelity
(:func:`tpcore.programs.files.fidelity`), and writes ``program_lengths.json`` and
``program_lengths.md``.
"""

from __future__ import annotations

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


def run(budget: str = "small", table1_dir: str | Path = "results/table1",
        out: str | Path = "results/program_lengths", tasks: tuple[str, ...] = TASKS,
        epochs: int | None = None, check_fidelity: bool = True) -> dict[str, Any]:
    """Line counts of the selected Table 1 programs at ``budget`` (see the module docstring)."""
    from tpcore.experiments import table1
    from tpcore.io import write_json, write_text
    from tpcore.programs import codegen, ir
    from tpcore.programs.files import fidelity

    start = time.perf_counter()
    t1 = table1.run(budget, out=table1_dir, tasks=tasks, epochs=epochs)
    rows = []
    for row in t1["tasks"]:
        task, sel = row["task"], row["selected"]
        run_dir = Path(table1_dir) / "runs" / task / sel["run"]
        program = ir.load(run_dir / "program.json")
        counts = codegen.line_counts(program)
        full, pruned = PAPER[task]
        rows.append({"task": task, "run": sel["run"], "test_acc": row["test_acc"],
                     **counts, "paper_full": full, "paper_pruned": pruned,
                     "fidelity": fidelity(run_dir) if check_fidelity else None})
    out = Path(out)
    write_text(out / "program_lengths.md", table(rows) + "\n")
    result = {"budget": budget, "epochs": epochs, "tasks": rows,
              "at_or_below_paper": sum(r["pruned"] <= r["paper_pruned"] for r in rows),
              "seconds": time.perf_counter() - start,
              "command": f"tpcore reproduce program-lengths --budget {budget}"
                         + (f" --epochs {epochs}" if epochs else "")}
    write_json(out / "program_lengths.json", result)
    return result

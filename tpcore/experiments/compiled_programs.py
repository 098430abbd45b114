"""``tpcore reproduce compiled-programs``: the RASP tasks written in :mod:`tpcore.rasp`,
compiled, verified every way and taken round trip.

For each task of :data:`tpcore.rasp.library.TASKS`, :func:`measure`

1. counts the lines of its written program (the body of its ``write_<task>`` function, docstring
   and blank lines left out);
2. compiles it (:func:`tpcore.rasp.compile`, the median of three builds, then its built-in check
   timed apart) and records the model it needs: layers, modules, widths;
3. verifies it five ways (:func:`tpcore.rasp.verify`: the written program's interpreter, the
   compiled model, the IR's NumPy and numba engines, the generated Python program) on every input
   when there are at most ``budget["exhaustive"]``, else on ``budget["sample"]`` random ones,
   and measures the compiled model on the task's own targets on the task's inputs likewise;
4. takes it round trip (:func:`tpcore.pipelines.roundtrip.round_trip`): compiled at logit
   margin :data:`ROUND_TRIP` ``margin``, fine-tuned ``budget["epochs"]`` epochs on the task's
   training split, decompiled, compared module by module and verified against the written
   program again.

Writes ``compiled_programs.json`` and ``compiled_programs.md`` into ``out``.
"""

from __future__ import annotations

import inspect
import statistics
import time
from pathlib import Path
from typing import Any

from tpcore.experiments.budget import Budget, preset
from tpcore.experiments.options import Option, Reproduction
from tpcore.io import write_json, write_text
from tpcore.pipelines.roundtrip import round_trip
from tpcore.programs.ir import Head, Mlp
from tpcore.rasp import compile, verify
from tpcore.rasp.library import TASKS, Task, task, task_check
from tpcore.rundir import check_out_dir

BUDGETS = {
    "smoke": Budget("smoke", {"exhaustive": 2_000, "sample": 500, "epochs": 1}),
    "small": Budget("small", {"exhaustive": 400_000, "sample": 20_000, "epochs": 2}),
    "full": Budget("full", {"exhaustive": 2_000_000, "sample": 200_000, "epochs": 10}),
}
"""Inputs per check (all of them up to ``exhaustive``, else ``sample`` random ones) and the
fine-tuning epochs of the round trip."""
ROUND_TRIP = {"margin": 10.0, "lr": 3e-4, "tau": (1.0, 0.01)}
"""The round trip's compile margin and fine-tuning schedule: a margin at which Gumbel noise
still flips some choices (so training has a loss to lower) and a learning rate small enough
that Adam's steps (about ``lr`` per parameter per step whatever the gradient) leave the exact
thresholds of the MLPs' hidden units in place: a numerical MLP's staircase over ``R`` input
values tolerates a drift of its output weights of about ``1 / (2 R)``, and Dyck-2's depth
(``R = 33``) left it within two epochs at ``lr = 1e-3``."""


def budget(name: str) -> Budget:
    """The preset ``name`` of :data:`BUDGETS`."""
    return preset(name, BUDGETS)


def program_lines(t: Task) -> int:
    """Lines of ``t``'s written program: its function's body less the docstring and blank
    lines."""
    source = inspect.getsource(t.write).splitlines()
    doc = inspect.getdoc(t.write) or ""
    body = [line for line in source[1:] if line.strip()]
    quoted = len(doc.splitlines()) if doc else 0
    return len(body) - quoted


def measure(t: Task, budget: Budget, seed: int, quiet: bool) -> dict[str, Any]:
    """One row (module docstring)."""
    program = t.program()
    builds = []
    for _ in range(3):
        start = time.perf_counter()
        compiled = compile(program, check=0, seed=seed)
        builds.append(time.perf_counter() - start)
    start = time.perf_counter()
    compile(program, seed=seed)
    checked = time.perf_counter() - start
    cfg = compiled.model.config
    ir = compiled.ir
    check = verify(compiled, exhaustive=budget["exhaustive"], sample=budget["sample"], seed=seed)
    trip = round_trip(t.name, epochs=budget["epochs"], seed=seed, quiet=quiet,
                      exhaustive=budget["exhaustive"], sample=budget["sample"], **ROUND_TRIP)
    return {
        "task": t.name, "lines": program_lines(t), "layers": cfg.n_layers,
        "heads": sum(isinstance(m, Head) for m in ir.modules),
        "mlps": sum(isinstance(m, Mlp) for m in ir.modules),
        "width": cfg.width, "d_mlp": cfg.d_mlp, "compile_seconds": statistics.median(builds),
        "compile_checked_seconds": checked,
        "verify": {"inputs": check.inputs, "domain": check.domain,
                   "exhaustive": check.exhaustive, "agree": check.agree, "ok": check.ok,
                   "seconds": check.seconds},
        "task_accuracy": task_check(compiled, t, exhaustive=budget["exhaustive"],
                                    sample=budget["sample"], seed=seed),
        "round_trip": trip}


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown tables of the rows: compilation and verification, then the round trip."""
    lines = ["| task | lines | layers | heads / MLPs | width d, MLP units | compile (s) | "
             "compile with its check (s) | inputs verified | five engines agree | task "
             "accuracy (inputs) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        v, a = r["verify"], r["task_accuracy"]
        inputs = (f"all {v['inputs']:,}" if v["exhaustive"]
                  else f"{v['inputs']:,} random of {v['domain']:,}")
        task_inputs = (f"all {a['inputs']:,}" if a["exhaustive"]
                       else f"{a['inputs']:,} random of {a['domain']:,}")
        lines.append(f"| {r['task']} | {r['lines']} | {r['layers']} | {r['heads']} / "
                     f"{r['mlps']} | {r['width']}, {r['d_mlp']} | {r['compile_seconds']:.3f} | "
                     f"{r['compile_checked_seconds']:.2f} | {inputs} | "
                     f"{'yes' if v['ok'] else 'NO'} | {100 * a['token_accuracy']:.2f} % "
                     f"({task_inputs}) |")
    lines += ["", "| task | fine-tuning steps | final loss | largest weight change | task "
              "accuracy after | decompiled = written (modules) | decompiled and fine-tuned "
              "model agree with the written program |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r["round_trip"]
        lines.append(f"| {r['task']} | {t['steps']} | {t['final_loss']:.4f} | "
                     f"{t['moved']:.3f} | {100 * t['fine_tuned']['token_accuracy']:.2f} % | "
                     f"{'yes' if not t['differences'] else '; '.join(t['differences'][:2])} | "
                     f"{t['decompiled_check']['summary']} |")
    return "\n".join(lines)


CLI = Reproduction(
    "the RASP tasks written in tpcore.rasp: compiled, verified five ways, fine-tuned and "
    "decompiled", "results/compiled_programs", "small",
    "inputs per check and fine-tuning: smoke: all up to 2,000, else 500 random, 1 epoch; "
    "small: all up to 400,000, else 20,000 random, 2 epochs; full: all up to 2,000,000, else "
    "200,000 random, 10 epochs",
    (Option("--tasks", f"tasks to run, comma-separated (default: all of {', '.join(TASKS)})",
            kind="names", default=tuple(TASKS)),))
"""``tpcore reproduce compiled-programs``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int, tasks: tuple[str, ...] = tuple(TASKS),
        quiet: bool = True) -> dict[str, Any]:
    """Rows for ``tasks`` (module docstring); writes ``compiled_programs.json`` and
    ``compiled_programs.md`` into ``out``."""
    start = time.perf_counter()
    chosen = [task(name) for name in tasks]
    out = check_out_dir(out)
    rows = [measure(t, budget, seed, quiet) for t in chosen]
    write_text(out / "compiled_programs.md", table(rows) + "\n")
    result = {"budget": budget.name, "seed": seed, "round_trip": ROUND_TRIP, "tasks": rows,
              "all_verified": all(r["verify"]["ok"] for r in rows),
              "seconds": time.perf_counter() - start,
              "command": f"tpcore reproduce compiled-programs --budget {budget.name}"
                         + (f" --seed {seed}" if seed else "")
                         + ("" if tuple(tasks) == tuple(TASKS) else f" --tasks {','.join(tasks)}")
                         + f" --out {out}"}
    write_json(out / "compiled_programs.json", result)
    return result


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce compiled-programs`` prints: the tables and a summary line."""
    rows = result["tasks"]
    return (f"{table(rows)}\n{len(rows)} programs compiled; the five engines agree on "
            f"{'every' if result['all_verified'] else 'NOT every'} input checked")

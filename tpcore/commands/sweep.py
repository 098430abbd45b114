"""``tpcore sweep TASK``: the paper's grid search for one task, in local processes or on Dask.

Runs go to ``OUT/<run>`` (default ``runs/sweep/TASK``); rerunning resumes (finished runs of
the same settings are read back; a run of other settings is refused unless ``--overwrite``).
Writes ``sweep.json`` and ``sweep.md``; the selected run has the best validation accuracy.

``--categorical-only`` makes every head and MLP categorical (the heads and MLPs per layer are
then all categorical ones), as the paper's Table 3 does.

``--halving ETA`` runs successive halving instead of every run to the end: all configurations
train the first 1/ETA^(R-1) of their epochs (``--rungs R``, default 3), the best 1/ETA go on
ETA times as long, and so on; only the last rung's survivors finish. Continued runs resume
from their paused states, so rerunning resumes here too.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tpcore.commands.learn import add_model_options, config_from_args
from tpcore.commands.options import nonnegative_int, positive_int
from tpcore.commands.output import add_json_option, emit, note
from tpcore.limits import check_memory
from tpcore.pipelines.sweep import grid, rungs_table, sweep, table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="grid search of Transformer Programs on a task",
                       description=__doc__)
    p.add_argument("task")
    p.add_argument("--layers", type=positive_int, nargs="+", default=[2, 3])
    p.add_argument("--heads", type=positive_int, nargs="+", default=[4, 8],
                   help="heads per layer, split evenly categorical/numerical")
    p.add_argument("--mlps", type=positive_int, nargs="+", default=[2, 4],
                   help="MLPs per layer, split evenly categorical/numerical")
    p.add_argument("--categorical-only", action="store_true",
                   help="every head and MLP categorical, none numerical (the paper's Table 3)")
    p.add_argument("--seeds", type=nonnegative_int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--jobs", type=positive_int, default=2, help="local worker processes")
    p.add_argument("--scheduler", help="Dask scheduler address (tcp://host:port) instead of "
                                       "local processes")
    p.add_argument("--out", help="sweep directory (default runs/sweep/TASK)")
    p.add_argument("--overwrite", action="store_true",
                   help="retrain runs in --out made with other settings")
    p.add_argument("--halving", type=positive_int, metavar="ETA",
                   help="successive halving: keep the best 1/ETA of the runs at each rung "
                        "(ETA >= 2; default: every run to the end)")
    p.add_argument("--rungs", type=positive_int, default=3,
                   help="rungs of --halving, the first 1/ETA^(RUNGS-1) of the epochs long "
                        "(default 3)")
    add_model_options(p)
    add_json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    base = config_from_args(args)
    configs = grid(base, args.layers, args.heads, args.mlps, args.seeds, args.categorical_only)
    for c in configs:
        c.check()
    if not args.scheduler:
        at_once = min(args.jobs, len(configs))
        check_memory(at_once * max(c.memory_estimate() for c in configs),
                     f"sweep {base.task} with {at_once} runs at a time (--jobs {args.jobs})")
    out = Path(args.out or f"runs/sweep/{base.task}")

    def report(row: dict) -> None:
        if not args.quiet:
            note(args, f"  {row['run']}: val {100 * row['val_acc']:.2f}%  "
                       f"test {100 * row['test_acc']:.2f}%")

    def report_rung(rung: dict) -> None:
        if not args.quiet:
            note(args, f"  rung at {rung['epochs']} epochs: {len(rung['runs'])} runs, best "
                       f"val {100 * rung['runs'][0]['val_acc']:.2f}%, "
                       f"{len(rung['survivors'])} go on ({rung['wall_seconds']:.0f} s)")

    note(args, f"tpcore sweep {base.task}: {len(configs)} runs -> {out}")
    result = sweep(configs, out, args.jobs, args.scheduler, report, args.overwrite,
                   args.halving, args.rungs, report_rung)
    emit(args, {**result, "out": out}, lambda: text(result))
    return 0


def text(result: dict) -> str:
    """What ``tpcore sweep`` prints: the rungs of halving, the finished runs, the selection."""
    best, halving = result["selected"], result.get("halving")
    rungs = f"{rungs_table(halving)}\n" if halving else ""
    cost = (f"halving trained {halving['epochs_trained']} of the full grid's "
            f"{halving['epochs_full_grid']} epochs ({100 * halving['fraction']:.0f}%); "
            if halving else "")
    return (f"{rungs}{table(result['runs'])}\nselected {best['run']}: test token accuracy "
            f"{100 * best['test_acc']:.2f}%\n{cost}{result['wall_seconds']:.0f} s")

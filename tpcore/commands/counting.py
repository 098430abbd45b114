"""``tpcore reproduce counting``: the modular counting modules (PrefixSumCounts, the expert
network) across tasks and generalisation regimes, plus a length-generalisation test."""

from __future__ import annotations

import argparse

from tpcore.commands.options import nonnegative_int, positive_int
from tpcore.errors import TpcoreError
from tpcore.experiments.counting import VARIANTS, run


def register_reproduce(verbs: argparse._SubParsersAction) -> None:
    """Add the ``counting`` verb to ``tpcore reproduce``."""
    p = verbs.add_parser("counting", help="Modular Counts paper, Table 1 (none / prefix / "
                                          "experts / both x tasks x regimes) + length test")
    p.add_argument("--budget", default="target", choices=("smoke", "target", "small", "paper"),
                   help="smoke: pipeline check; target: double_hist at |V|=N=16 and the length "
                        "test on hist/double_hist (default); small: all cells, 4,000 inputs, "
                        "20 epochs; paper: all cells, 16,000 inputs, 250 epochs")
    p.add_argument("--epochs", type=positive_int, help="override the budget's epochs")
    p.add_argument("--variants", nargs="+", help="subset of none prefix experts both")
    p.add_argument("--cells", nargs="+", metavar="TASK:REGIME",
                   help="(task, regime) cells instead of the budget's, e.g. double_hist:bigvocab")
    p.add_argument("--lengthgen", nargs="*", metavar="TASK",
                   help="length-test tasks instead of the budget's (none given: skip it)")
    p.add_argument("--seeds", type=nonnegative_int, nargs="+",
                   help="seeds instead of the budget's (0)")
    p.add_argument("--arch", type=positive_int, nargs=3, metavar=("LAYERS", "HEADS", "MLPS"),
                   help="architecture instead of 3 4 2 (heads and MLPs per layer, half "
                        "categorical, half numerical)")
    p.add_argument("--out", default="results/counting")
    p.set_defaults(func=run_counting)


def run_counting(args: argparse.Namespace) -> int:
    cells = None
    if args.cells:
        bad = [c for c in args.cells if c.count(":") != 1]
        if bad:
            raise TpcoreError(f"cell {bad[0]!r} is not TASK:REGIME")
        cells = tuple(tuple(c.split(":")) for c in args.cells)
    lengthgen = None if args.lengthgen is None else tuple(args.lengthgen)
    result = run(args.budget, args.out, args.epochs, tuple(args.variants or VARIANTS), cells,
                 lengthgen, tuple(args.seeds or ()), args.arch and tuple(args.arch))
    print(f"wrote {args.out}/counting.md and counting.json ({result['seconds']:.0f} s)")
    return 0

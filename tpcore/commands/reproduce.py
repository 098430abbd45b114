"""``tpcore reproduce NAME``: the reproductions of the papers' tables and figures.

``NAME`` runs the module ``tpcore.experiments.NAME`` (the name's ``-`` read as ``_``;
:data:`EXPERIMENTS`), an experiment of the one shape of :mod:`tpcore.experiments.budget`:

    module.run(module.budget(--budget), Path(--out), --seed, **options)

then prints ``module.report(result, out)``. Every verb takes ``--budget``, ``--seed`` and
``--out``; the others are the study's own ``options`` (its ``CLI``,
:mod:`tpcore.experiments.options`), passed by their names.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from tpcore.commands.options import (
    nonnegative_int,
    positive_float,
    positive_int,
    positive_ints,
    probability,
)
from tpcore.commands.output import add_json_option, emit
from tpcore.experiments import (
    bp_table,
    classify_demo,
    compiled_programs,
    counting,
    fig10,
    fleq,
    grammar_learning,
    hierarchy,
    looped,
    ner_demo,
    program_lengths,
    published_programs,
    sorting,
    table1,
    table3,
    table5,
)
from tpcore.experiments.options import Option, Reproduction

EXPERIMENTS: dict[str, ModuleType] = {
    "table1": table1, "table3": table3, "fig10": fig10, "program-lengths": program_lengths,
    "counting": counting, "sorting": sorting, "looped": looped, "fleq": fleq, "bp-table": bp_table,
    "hierarchy": hierarchy, "grammar-learning": grammar_learning, "ner-demo": ner_demo,
    "classify-demo": classify_demo, "table5": table5, "published-programs": published_programs,
    "compiled-programs": compiled_programs,
}
"""Each reproduction's module, in the order ``--help`` lists them."""


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _cell(text: str) -> tuple[str, str]:
    if text.count(":") != 1:
        raise argparse.ArgumentTypeError(f"expected TASK:REGIME, got {text!r}")
    task, regime = text.split(":")
    return task, regime


TYPES: dict[str, Callable[[str], Any]] = {
    "text": str, "count": positive_int, "index": nonnegative_int, "scale": positive_float,
    "probability": probability, "counts": positive_ints, "names": _comma_list, "cell": _cell}
"""How each kind of :class:`~tpcore.experiments.options.Option` reads its values."""


def add_option(p: argparse.ArgumentParser, option: Option) -> None:
    """``option`` as an argument of ``p``."""
    kw: dict[str, Any] = {"help": option.help}
    if option.kind in ("switch", "off"):
        kw["action"] = "store_true" if option.kind == "switch" else "store_false"
    else:
        kw["type"] = TYPES[option.kind]
        kw |= {k: getattr(option, k) for k in ("default", "nargs", "metavar")
               if getattr(option, k) is not None}
    kw |= {k: getattr(option, k) for k in ("required", "dest") if getattr(option, k)}
    p.add_argument(option.flag, **kw)


def add_reproduction(p: argparse.ArgumentParser, module: ModuleType, out: str | None = None
                     ) -> None:
    """The options of the reproduction ``module`` (its ``CLI``): ``--budget`` (a preset of its
    ``BUDGETS``, else a scale), ``--seed``, ``--out`` (default ``out`` or the study's), then the
    study's own."""
    cli: Reproduction = module.CLI
    if hasattr(module, "BUDGETS"):
        p.add_argument("--budget", default=cli.budget, choices=tuple(module.BUDGETS),
                       help=f"{cli.budget_help} (default {cli.budget})")
    else:
        p.add_argument("--budget", type=positive_float, default=cli.budget,
                       help=f"{cli.budget_help} (default {cli.budget:g})")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed (default 0)")
    out = out or cli.out
    p.add_argument("--out", default=out, help=f"output folder (default {out})")
    for option in cli.options:
        add_option(p, option)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="reproduce a paper's table or figure",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="verb", metavar="NAME", required=True)
    for name, module in EXPERIMENTS.items():
        v = verbs.add_parser(name, help=module.CLI.title)
        add_reproduction(v, module)
        add_json_option(v)
        v.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the reproduction ``args.verb`` with its options and print its report."""
    module = EXPERIMENTS[args.verb]
    options = {k: getattr(args, k) for k in module.CLI.names}
    out = Path(args.out)
    result = module.run(module.budget(args.budget), out, args.seed, **options)
    emit(args, result, lambda: module.report(result, out))
    return 0

"""``tpcore sorting search-failures | circuits | sort``: the tiny sorting transformers of "How tiny
transformers sort" (trained by ``tpcore reproduce sorting``)."""

from __future__ import annotations

import argparse

from tpcore.commands.options import need_package, nonnegative_int, positive_int
from tpcore.commands.output import add_json_option, emit
from tpcore.errors import TpcoreError
from tpcore.experiments.sorting import search_failures, sort_list
from tpcore.experiments.sorting_circuits import circuit_report
from tpcore.models import load


def _search(args: argparse.Namespace) -> int:
    res = search_failures(load(args.model), args.n, args.generator, args.seed, args.batch)
    lines = [f"input {f['input']}  output {f['output']}" for f in res["failures"]]
    lines.append(f"{res['n_failures']} of {res['n']} {res['generator']} lists sorted wrongly "
                 f"({res['task']} model, seed {res['seed']}, {res['seconds']:.1f} s)")
    emit(args, res, "\n".join(lines))
    return 0


def _circuits(args: argparse.Namespace) -> int:
    if args.plots:
        need_package("matplotlib", "--plots")
    given = None if args.list is None else _parse_list(args.list)
    text, numbers = circuit_report(load(args.model), args.seed, args.plots, given)
    emit(args, {**numbers, "markdown": text}, text)
    return 0


def _parse_list(text: str) -> list[int]:
    items = text.replace(",", " ").split()
    if not items or not all(t.isdigit() for t in items):
        raise TpcoreError(f"list {text!r} is invalid; expected non-negative integers, e.g. "
                         "'3 1 2'")
    return [int(t) for t in items]


def _sort(args: argparse.Namespace) -> int:
    values = _parse_list(args.list)
    output = sort_list(load(args.model), values)
    result = {"input": values, "output": output, "correct": output == sorted(values)}
    emit(args, result, f"output {result['output']}  {'correct' if result['correct'] else 'WRONG'}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sorting", help="tiny sorting transformers: failure search, circuits")
    verbs = p.add_subparsers(dest="sorting_verb", metavar="VERB")
    s = verbs.add_parser("search-failures", help="print every generated list MODEL sorts wrongly")
    s.add_argument("model", help="checkpoint .npz written by `tpcore reproduce sorting`")
    s.add_argument("--n", type=positive_int, default=1_000_000, help="lists to evaluate (1e6)")
    s.add_argument("--generator", choices=("hard", "random"), default="hard",
                   help="list generator (default: the post's hard one)")
    s.add_argument("--seed", type=nonnegative_int, default=0, help="generator seed (default 0)")
    s.add_argument("--batch", type=positive_int, default=2048,
                   help="lists per forward pass (2048)")
    add_json_option(s)
    s.set_defaults(func=_search)
    c = verbs.add_parser("circuits", help="QK / OV circuits, BOS attention, attention patterns")
    c.add_argument("model", help="checkpoint .npz")
    c.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of the shuffled list (default 0)")
    c.add_argument("--plots", help="also write PNG figures into this folder (needs matplotlib)")
    c.add_argument("--list", help="also show the attention pattern on this list, e.g. '3 1 2'")
    add_json_option(c)
    c.set_defaults(func=_circuits)
    o = verbs.add_parser("sort", help="sort one list with MODEL")
    o.add_argument("model", help="checkpoint .npz")
    o.add_argument("list", help="the values, e.g. '9 0 9 9 9 9 9 9 9 9'")
    add_json_option(o)
    o.set_defaults(func=_sort)
    p.set_defaults(func=lambda a: p.print_help() or 2)

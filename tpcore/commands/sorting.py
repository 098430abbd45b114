"""``tpcore sorting search-failures | circuits | rules`` and ``tpcore reproduce sorting``: the tiny
sorting transformers of "How tiny transformers sort"."""

from __future__ import annotations

import argparse

from tpcore.commands.options import nonnegative_int, positive_float, positive_int


def _need_matplotlib(plots: object) -> None:
    """Refuse ``--plots`` before any work when matplotlib is missing."""
    from tpcore.commands.options import has_module
    from tpcore.errors import missing_package

    if plots and not has_module("matplotlib"):
        raise missing_package("matplotlib", "--plots")


def _search(args: argparse.Namespace) -> int:
    from tpcore.experiments.sorting import load_model, search_failures

    res = search_failures(load_model(args.model), args.n, args.generator, args.seed, args.batch)
    for f in res["failures"]:
        print(f"input {f['input']}  output {f['output']}")
    print(f"{res['n_failures']} of {res['n']} {res['generator']} lists sorted wrongly "
          f"({res['task']} model, seed {res['seed']}, {res['seconds']:.1f} s)")
    return 0


def _circuits(args: argparse.Namespace) -> int:
    from tpcore.experiments.sorting import circuit_report, load_model

    _need_matplotlib(args.plots)
    given = None if args.list is None else _parse_list(args.list)
    text, _ = circuit_report(load_model(args.model), args.seed, args.plots, given)
    print(text)
    return 0


def _parse_list(text: str) -> list[int]:
    items = text.replace(",", " ").split()
    if not items or not all(t.isdigit() for t in items):
        raise ValueError(f"list {text!r} is invalid; expected non-negative integers, e.g. "
                         "'3 1 2'")
    return [int(t) for t in items]


def _sort(args: argparse.Namespace) -> int:
    from tpcore.experiments.sorting import evaluate_lists, load_model, one_list, task_of

    model = load_model(args.model)
    task = task_of(model)
    lists, lengths = one_list(task, _parse_list(args.list))
    res = evaluate_lists(model, task, lists, lengths)
    n = int(lengths[0])
    print(f"output {res['pred'][0, :n].tolist()}  {'correct' if res['correct'][0] else 'WRONG'}")
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
    s.set_defaults(func=_search)
    c = verbs.add_parser("circuits", help="QK / OV circuits, BOS attention, attention patterns")
    c.add_argument("model", help="checkpoint .npz")
    c.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of the shuffled list (default 0)")
    c.add_argument("--plots", help="also write PNG figures into this folder (needs matplotlib)")
    c.add_argument("--list", help="also show the attention pattern on this list, e.g. '3 1 2'")
    c.set_defaults(func=_circuits)
    o = verbs.add_parser("sort", help="sort one list with MODEL")
    o.add_argument("model", help="checkpoint .npz")
    o.add_argument("list", help="the values, e.g. '9 0 9 9 9 9 9 9 9 9'")
    o.set_defaults(func=_sort)
    p.set_defaults(func=lambda a: p.print_help() or 2)


def _reproduce(args: argparse.Namespace) -> int:
    from tpcore.errors import unknown_name
    from tpcore.experiments.sorting import TASKS, analyse, reproduce

    tasks = tuple(args.tasks.split(",")) if args.tasks else tuple(TASKS)
    for name in tasks:
        if name not in TASKS:
            raise unknown_name("task", name, TASKS)
    _need_matplotlib(args.plots)
    out = reproduce(args.out, args.budget, args.seed, tasks, quiet=False,
                    overwrite=args.overwrite)
    analyse(args.out, plots=args.plots)
    for row in out["rows"]:
        second = "hard" if "hard" in row else "all_subsets"
        print(f"{row['task']}: {row['parameters']} parameters, {row['steps']} steps in "
              f"{row['train_seconds']:.0f} s, random {100 * row['random']['sorted']:.2f} %, "
              f"{second} {100 * row[second]['sorted']:.2f} % sorted")
    print(f"wrote {args.out}/sorting.json, sorting.md and circuit reports")
    return 0


def register_reproduce(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("sorting", help="train the three tiny sorting transformers; accuracy, "
                         "failure search, rule agreement, circuits")
    p.add_argument("--tasks", help="comma-separated subset of causal,distinct,bidirectional")
    p.add_argument("--budget", type=positive_float, default=1.0,
                   help="scales training steps and the failure search (default 1)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed (default 0)")
    p.add_argument("--out", default="results/sorting", help="output folder")
    p.add_argument("--overwrite", action="store_true",
                   help="retrain tasks whose results in --out were made with other settings")
    p.add_argument("--plots", action="store_true", help="also write PNG figures")
    p.set_defaults(func=_reproduce)

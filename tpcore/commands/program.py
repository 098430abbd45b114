"""``tpcore program show|run|eval|export PATH``: read, run, score and export Transformer Programs.

PATH may be a run directory (``tpcore learn``), a saved IR (``.json``), a generated program or a
program in the authors' published format (``.py``, imported with ``ast``, never executed), or a
saved model (``.npz``, extracted).
"""

from __future__ import annotations

import argparse

from tpcore.commands.options import engine_or_numpy, nonnegative_int, positive_int
from tpcore.errors import TpcoreError
from tpcore.pipelines.decompile import load_program
from tpcore.pipelines.learn import MIN_SAMPLES
from tpcore.pipelines.score import evaluate_on_task
from tpcore.programs import analysis, codegen
from tpcore.programs.interpret import predict
from tpcore.rundir import check_out_dir


def _show(args: argparse.Namespace) -> int:
    p = load_program(args.path)
    if not args.no_source:
        print(codegen.source(p, compress=not args.full), end="")
        print()
    stats = analysis.stats(p)
    lines = codegen.line_counts(p)
    print(f"# program {p.name}: {len(p.modules)} modules, vocabulary {stats['vocabulary']}, "
          f"max length {p.max_len}, {stats['classes']} classes, causal={p.causal}")
    print(f"# heads: {stats['categorical_heads']} categorical ({', '.join(stats['rules']) or '-'}"
          f"), {stats['numerical_heads']} numerical; MLPs: {stats['categorical_mlps']} "
          f"categorical, {stats['numerical_mlps']} numerical")
    print(f"# lines: {lines['full']} before compression, {lines['pruned']} after")
    print("# dependency graph:")
    for line in analysis.dependency_text(p).splitlines():
        print(f"#   {line}")
    if any(m.output.startswith("embed_") for m in p.modules):
        print("# words per learned embedding value (the paper's Figure 7 table):")
        for line in analysis.embedding_table(p).splitlines():
            print(f"#   {line}")
    return 0


def _run(args: argparse.Namespace) -> int:
    p = load_program(args.path)
    tokens = p.frame(args.tokens)
    pred = predict(p, [tokens], engine=engine_or_numpy(args.engine))[0]
    print(" ".join(y for t, y in zip(tokens, pred) if t not in (p.bos, p.eos)))
    if args.explain is not None:
        i = args.explain
        rows = analysis.contributions(p, tokens, i)
        cls = pred[i] if pred[i] in p.classifier.classes else p.classifier.classes[0]
        print(f"# position {i} ({tokens[i]!r} -> {pred[i]!r}): features by score for {cls!r}")
        for r in rows[: args.top]:
            print(f"#   {r['feature']:<24} = {r['value']!s:<8} {r['scores'][cls]:+.3f}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    if args.n_samples < MIN_SAMPLES:
        raise TpcoreError(f"--n-samples {args.n_samples} is too few to split 80/10/10 with no "
                          f"split empty; expected >= {MIN_SAMPLES}")
    p = load_program(args.path)
    r = evaluate_on_task(p, args.task, args.split, args.n_samples, args.data_seed,
                         engine_or_numpy(args.engine))
    print(f"{r['task']} {r['split']}: token accuracy {100 * r['token_accuracy']:.2f}% "
          f"({r['tokens']} tokens), sequence accuracy {100 * r['sequence_accuracy']:.2f}% "
          f"({r['sequences']} sequences)")
    return 0


def _export(args: argparse.Namespace) -> int:
    p = load_program(args.path)
    py, csv = codegen.write(p, check_out_dir(args.out), compress=not args.full)
    print(f"wrote {py} and {csv}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("program", help="show, run or evaluate a Transformer Program",
                       description=__doc__)
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    show = verbs.add_parser("show", help="source, statistics and dependency graph")
    show.add_argument("path")
    show.add_argument("--full", action="store_true", help="source before compression")
    show.add_argument("--no-source", action="store_true", help="statistics and graph only")
    show.set_defaults(func=_show)
    run = verbs.add_parser("run", help="predict the tokens of one input (printed for its content "
                                       "positions; <s>/</s> carry no target)")
    run.add_argument("path")
    run.add_argument("tokens", nargs="+", help="input tokens (BOS/EOS are added if missing)")
    run.add_argument("--engine", choices=("numba", "numpy"), default="numpy")
    run.add_argument("--explain", type=nonnegative_int, metavar="I",
                     help="also list the classifier contributions at position I of the framed "
                          "input (0 is <s>; the paper's Figure 7)")
    run.add_argument("--top", type=positive_int, default=10, help="features listed by --explain")
    run.set_defaults(func=_run)
    ev = verbs.add_parser("eval", help="accuracy on a generated task split")
    ev.add_argument("path")
    ev.add_argument("--task", required=True)
    ev.add_argument("--split", default="test")
    ev.add_argument("--n-samples", type=positive_int, default=20000)
    ev.add_argument("--data-seed", type=nonnegative_int, default=0)
    ev.add_argument("--engine", choices=("numba", "numpy"), default="numba")
    ev.set_defaults(func=_eval)
    export = verbs.add_parser("export", help="write the standalone program and its weights CSV")
    export.add_argument("path")
    export.add_argument("--out", required=True, help="folder for NAME.py and NAME_weights.csv")
    export.add_argument("--full", action="store_true", help="the program before compression")
    export.set_defaults(func=_export)

"""``tpcore program show|run|eval|export PATH``: read, run, score and export Transformer Programs;
``tpcore program compile TASK``: compile a task's written program (:mod:`tpcore.rasp`) into a
model, verified;
``tpcore program stats PATH...``: which variables their heads read, by layer (Figure 12);
``tpcore program prune PATH``: keep some categorical heads per layer, as a narrower model names
them (:mod:`tpcore.programs.prune`), e.g. to start one with ``tpcore learn --init-from``;
``tpcore program circuit PATH``: the Dyck circuit of Figure 9 (:mod:`tpcore.analysis.dyck_circuit`).

PATH may be a run directory (``tpcore learn``), a saved IR (``.json``), a generated program or a
program in the authors' published format (``.py``, imported with ``ast``, never executed), or a
saved model (``.npz``, extracted).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from tpcore.analysis import dyck_circuit
from tpcore.analysis.html_view import program_html
from tpcore.analysis.program_figures import example_input, write_program_figures
from tpcore.analysis.reads_figure import reads_figure
from tpcore.commands.options import (
    engine_or_numpy,
    need_package,
    nonnegative_int,
    positive_float,
    positive_int,
)
from tpcore.commands.output import add_json_option, emit
from tpcore.errors import TpcoreError
from tpcore.io import write_text
from tpcore.pipelines import learn as learn_pipeline
from tpcore.pipelines.compile_task import compile_task
from tpcore.pipelines.decompile import load_program
from tpcore.pipelines.learn import LearnConfig, is_run, recorded_run
from tpcore.pipelines.score import evaluate_on_data, evaluate_on_task
from tpcore.programs import describe, ir, prune, reads
from tpcore.programs.interpret import check_tokens, predict, run_tokens
from tpcore.programs.source import writer
from tpcore.rasp.library import TASKS
from tpcore.rasp.weights import MARGIN
from tpcore.rundir import check_out_dir


def _show(args: argparse.Namespace) -> int:
    if args.plots:
        need_package("matplotlib", "--plots")
        check_out_dir(args.plots)
    p = load_program(args.path)
    stats = describe.stats(p)
    result = {**stats, "modules": len(p.modules), "lines": writer.line_counts(p),
              "dependencies": [{"module": name, "output": output, "reads": list(reads)}
                               for name, output, reads in describe.dependencies(p)],
              "classifier": list(p.classifier.features)}
    embeddings = any(m.output.startswith("embed_") for m in p.modules)
    if embeddings:
        result["embedding_table"] = describe.embedding_table(p)
    if not args.no_source:
        result["source"] = writer.source(p, compress=not args.full)
    if args.plots:
        figures = write_program_figures(p, Path(args.plots))
        result["figures"] = {**figures, "files": [str(f) for f in figures["files"]]}
    if args.html:
        tokens = check_tokens(p, args.input.split()) if args.input else example_input(p)
        write_text(args.html, program_html(p, tokens, full=args.full))
        result["html"] = args.html

    def text() -> str:
        lines = [result["source"]] if "source" in result else []
        lines += [
            f"# program {p.name}: {len(p.modules)} modules, vocabulary {stats['vocabulary']}, "
            f"max length {p.max_len}, {stats['classes']} classes, causal={p.causal}",
            f"# heads: {stats['categorical_heads']} categorical "
            f"({', '.join(stats['rules']) or '-'}), {stats['numerical_heads']} numerical; "
            f"MLPs: {stats['categorical_mlps']} categorical, {stats['numerical_mlps']} numerical",
            f"# lines: {result['lines']['full']} before compression, "
            f"{result['lines']['pruned']} after", "# dependency graph:"]
        lines += [f"#   {line}" for line in describe.dependency_text(p).splitlines()]
        if embeddings:
            lines.append("# words per learned embedding value (the paper's Figure 7 table):")
            lines += [f"#   {line}" for line in result["embedding_table"].splitlines()]
        if "html" in result:
            lines.append(f"# page: {result['html']}")
        if "figures" in result:
            lines.append(f"# figures (attention on {' '.join(result['figures']['input'])}; "
                         f"graph drawn with {result['figures']['graph_drawn_with']}): "
                         + ", ".join(result["figures"]["files"]))
        return "\n".join(lines)

    emit(args, result, text)
    return 0


def _run(args: argparse.Namespace) -> int:
    p = load_program(args.path)
    engine = engine_or_numpy(args.engine)
    tokens = p.frame(args.tokens)
    result: dict = {"input": [t for t in tokens if t not in (p.bos, p.eos)],
                    "output": run_tokens(p, args.tokens, engine)}
    lines = [" ".join(result["output"])]
    if args.explain is not None:
        i = args.explain
        pred = predict(p, [tokens], engine)[0]
        rows = describe.contributions(p, tokens, i)
        cls = pred[i] if pred[i] in p.classifier.classes else p.classifier.classes[0]
        features = [{"feature": r["feature"], "value": r["value"], "score": r["scores"][cls]}
                    for r in rows[: args.top]]
        result["explain"] = {"position": i, "token": tokens[i], "prediction": pred[i],
                             "class": cls, "features": features}
        lines.append(f"# position {i} ({tokens[i]!r} -> {pred[i]!r}): features by score for "
                     f"{cls!r}")
        lines += [f"#   {f['feature']:<24} = {f['value']!s:<8} {f['score']:+.3f}"
                  for f in features]
    emit(args, result, "\n".join(lines))
    return 0


def _eval(args: argparse.Namespace) -> int:
    p = load_program(args.path)
    engine = engine_or_numpy(args.engine)
    run = _learn_run_config(Path(args.path))
    own = (run is not None and args.task in (None, run.task) and args.n_samples is None
           and args.data_seed is None)
    if own:
        r = {**evaluate_on_data(p, learn_pipeline.make_data(run), args.split, engine),
             "data": "the run's own"}
    else:
        task = args.task or (run.task if run is not None else None)
        if task is None:
            raise TpcoreError(f"{args.path} is not a learn run, so it records no task: give "
                              "--task")
        r = evaluate_on_task(p, task, args.split, args.n_samples or DEFAULT_SAMPLES,
                             args.data_seed or 0, engine)
        r["data"] = "generated"
    where = "the run's own data" if own else "a generated split"
    emit(args, r, f"{r['task']} {r['split']} ({where}): token accuracy "
                  f"{100 * r['token_accuracy']:.2f}% ({r['tokens']} tokens), sequence accuracy "
                  f"{100 * r['sequence_accuracy']:.2f}% ({r['sequences']} sequences)")
    return 0


DEFAULT_SAMPLES = 20000
"""``program eval``'s sequences for a generated split."""


def _learn_run_config(path: Path) -> LearnConfig | None:
    """The configuration of the learn run at ``path`` (``metrics.json`` beside ``model.npz``),
    else None."""
    return recorded_run(path)[1] if is_run(path) else None


def _export(args: argparse.Namespace) -> int:
    p = load_program(args.path)
    py, csv = writer.write(p, check_out_dir(args.out), style=args.style,
                           compress=not args.full)
    emit(args, {"program": py, "weights": csv}, f"wrote {py} and {csv}")
    return 0


def _compile(args: argparse.Namespace) -> int:
    r = compile_task(args.task, Path(args.out), args.layers, args.margin, args.exhaustive,
                     args.sample)
    emit(args, r, f"{r['task']}: {r['layers']} layers, compiled in {r['compile_seconds']:.2f} s; "
                  f"verified on {r['verified']}; wrote {r['model']} and {r['program']}")
    return 0 if r["ok"] else 1


def _stats(args: argparse.Namespace) -> int:
    if args.plot:
        need_package("matplotlib", "--plot")
        check_out_dir(Path(args.plot).parent)
    programs = []
    for path in args.paths:
        try:
            programs.append(load_program(path))
        except TpcoreError as exc:
            named = str(Path(path)) in str(exc)
            raise (exc if named else TpcoreError(f"{path}: {exc}")) from None
    rows = reads.read_table(programs)
    result: dict = {"programs": len(programs), "paths": list(args.paths), "rows": rows}
    if args.plot:
        title = args.title or f"Variables read by attention heads ({len(programs)} programs)"
        result["figure"] = str(reads_figure(rows, Path(args.plot), title))

    def text() -> str:
        lines = [f"# {len(programs)} program{'s' * (len(programs) != 1)}",
                 reads.table_text(rows)]
        return "\n".join(lines + ([f"# figure: {result['figure']}"] if args.plot else []))

    emit(args, result, text)
    return 0


def _circuit(args: argparse.Namespace) -> int:
    p = load_program(args.path)
    found = dyck_circuit.find(p)
    checked = dyck_circuit.check(p, found, args.samples, args.seed)
    result = {"program": str(args.path), "previous_heads": found.previous_heads,
              "flags": [dataclasses.asdict(f) for f in found.flags], "check": checked}
    emit(args, result, lambda: dyck_circuit.report(p, found, checked))
    return 0


def parse_heads(spec: str) -> prune.HeadChoice:
    """``"0,1/2,3"`` -> ``((0, 1), (2, 3))``: head indices per layer, layers separated by ``/``."""
    try:
        return tuple(tuple(int(h) for h in layer.split(",")) for layer in spec.split("/"))
    except ValueError:
        raise TpcoreError(f"--keep {spec!r}: expected head indices per layer, layers separated "
                          "by '/', e.g. 0,1/2 (layer 0 keeps heads 0 and 1, layer 1 head 2)"
                          ) from None


def _prune(args: argparse.Namespace) -> int:
    p = load_program(args.path)
    if args.keep is None:
        choices = prune.head_choices(p, args.choices)
        emit(args, {"path": args.path, "per_layer": args.choices,
                    "choices": [[list(hs) for hs in c] for c in choices]},
             lambda: "\n".join(["/".join(",".join(map(str, hs)) for hs in c) for c in choices]
                               or [f"no way to keep {args.choices} heads per layer"]))
        return 0
    if not args.out:
        raise TpcoreError("--keep writes a program; expected --out FILE.json")
    choice = parse_heads(args.keep)
    pruned = prune.keep_heads(p, choice)
    renamed = {old: new for old, new in prune.renaming(p, choice).items() if new != old}
    out = Path(args.out)
    check_out_dir(out.parent)
    ir.save(pruned, out)
    moved = [f"{old} -> {new}" for old, new in renamed.items() if new is not None]
    dropped = [old for old, new in renamed.items() if new is None]
    emit(args, {"path": args.path, "keep": args.keep, "out": out,
                "modules": [m.name for m in pruned.modules], "renamed": renamed},
         f"wrote {out}: modules {', '.join(m.name for m in pruned.modules)}\n"
         f"kept heads renumbered per layer, as a narrower model names them: "
         f"{', '.join(moved) or 'none'}; dropped: {', '.join(dropped) or 'none'}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("program", help="show, run, evaluate, export or count Transformer "
                                       "Programs",
                       description=__doc__)
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    show = verbs.add_parser("show", help="source, statistics and dependency graph")
    show.add_argument("path")
    show.add_argument("--full", action="store_true", help="source before compression")
    show.add_argument("--no-source", action="store_true", help="statistics and graph only")
    show.add_argument("--plots", metavar="DIR",
                      help="also write figures into DIR (needs matplotlib): the heads' "
                           "predicates, their attention on an example input, the dependency "
                           "graph as Graphviz DOT and PNG")
    show.add_argument("--html", metavar="FILE",
                      help="also write one self-contained HTML page: the source beside every "
                           "head's predicate and attention, hovering a token shows what each "
                           "head reads there")
    show.add_argument("--input", metavar="TOKENS",
                      help="the input the attention is shown on, e.g. 'd a c b' (default: an "
                           "example of the longest length)")
    add_json_option(show)
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
    add_json_option(run)
    run.set_defaults(func=_run)
    ev = verbs.add_parser("eval", help="accuracy on a task split: a learn run's own data, or a "
                          "generated split (--task, --n-samples, --data-seed)")
    ev.add_argument("path")
    ev.add_argument("--task", help="the task (default: the learn run's)")
    ev.add_argument("--split", default="test")
    ev.add_argument("--n-samples", type=positive_int, default=None,
                    help=f"sequences of a generated split (default {DEFAULT_SAMPLES})")
    ev.add_argument("--data-seed", type=nonnegative_int, default=None,
                    help="seed of a generated split (default 0)")
    ev.add_argument("--engine", choices=("numba", "numpy"), default="numba")
    add_json_option(ev)
    ev.set_defaults(func=_eval)
    export = verbs.add_parser("export", help="write the standalone program and its weights CSV")
    export.add_argument("path")
    export.add_argument("--out", required=True, help="folder for NAME.py and NAME_weights.csv")
    export.add_argument("--full", action="store_true", help="the program before compression")
    export.add_argument("--style", choices=writer.STYLES, default="tpcore",
                        help="tpcore: standard library only, runs as python NAME.py TOKENS...; "
                             "published: the authors' pandas format (needs pandas to run; only "
                             "for programs whose categorical heads use the published rule)")
    add_json_option(export)
    export.set_defaults(func=_export)
    comp = verbs.add_parser("compile", help="compile a task's written program into a model, "
                                            "verified five ways")
    comp.add_argument("task", choices=tuple(TASKS), metavar="TASK",
                      help=f"one of {', '.join(TASKS)}")
    comp.add_argument("--out", required=True, help="folder for the model, program and report")
    comp.add_argument("--layers", type=positive_int,
                      help="layers of the model (default: as many as the program needs)")
    comp.add_argument("--margin", type=positive_float, default=MARGIN,
                      help=f"logit margin of every choice (default {MARGIN:g})")
    comp.add_argument("--exhaustive", type=nonnegative_int, default=100_000, metavar="N",
                      help="verify on every input when there are at most N (default 100,000)")
    comp.add_argument("--sample", type=positive_int, default=5_000, metavar="N",
                      help="else on N random inputs (default 5,000)")
    add_json_option(comp)
    comp.set_defaults(func=_compile)
    stats = verbs.add_parser("stats", help="which variables the heads of the programs read as "
                                           "key, query and value, by layer (paper Figure 12)")
    stats.add_argument("paths", nargs="+", metavar="PATH",
                       help="run directories or programs (any PATH of program show)")
    stats.add_argument("--plot", metavar="FILE",
                       help="also draw the figure into this PNG file (needs matplotlib: "
                            "pip install 'tpcore[plot]')")
    stats.add_argument("--title", help="the figure's title")
    add_json_option(stats)
    stats.set_defaults(func=_stats)
    circ = verbs.add_parser("circuit", help="the Dyck circuit of paper Figure 9: a previous-token "
                                            "head, an MLP flagging a mismatched closer, what "
                                            "reads the flag; checked on random strings")
    circ.add_argument("path")
    circ.add_argument("--samples", type=positive_int, default=20_000, metavar="N",
                      help="random bracket strings to check it on (default 20,000)")
    circ.add_argument("--seed", type=nonnegative_int, default=0,
                      help="their seed (default 0)")
    add_json_option(circ)
    circ.set_defaults(func=_circuit)
    cut = verbs.add_parser("prune", help="keep some categorical heads per layer, renumbered as a "
                                         "narrower model names them")
    cut.add_argument("path")
    what = cut.add_mutually_exclusive_group(required=True)
    what.add_argument("--keep", metavar="HEADS",
                      help="head indices per layer, layers separated by '/': 0,1/2 keeps heads "
                           "0 and 1 of layer 0 and head 2 of layer 1 (with --out)")
    what.add_argument("--choices", type=positive_int, metavar="K",
                      help="list every way to keep K heads per layer in which no kept module "
                           "reads a dropped head")
    cut.add_argument("--out", help="the pruned program's IR file (.json)")
    add_json_option(cut)
    cut.set_defaults(func=_prune)

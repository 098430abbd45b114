"""``tpcore learn conll|classify|ner-demo|classify-demo`` (also ``tpcore nlp TASK``):
Transformer Programs on NLP data (the paper's section 4.3).

- ``conll --train F --dev F --test F [--glove F]``: named entities from CoNLL-2003-style files:
  unigram baseline, standard transformer and Transformer Program (Table 2);
- ``classify --train F [--dev F] --test F [--glove F]``: text classification from
  ``LABEL<TAB>TEXT`` files (10 % of train held out when no dev file): Naive Bayes, standard
  transformer and Transformer Program, both mean-pooled (Table 6);
- ``ner-demo`` / ``classify-demo``: the built-in synthetic corpora, minutes on two cores (the
  reproductions ``tpcore reproduce ner-demo | classify-demo``, written under ``runs/``).

Each prints a results table and writes the run directory ``--out``: the models,
``results.json``, ``table.md``, ``run.json`` and, for NER, the decompiled program
(``program/program.json``, ``program/program/ner.py``) and the embedding table
(``program/embeddings.md``). A finished run of the same settings there is reused; one of other
settings is refused unless ``--overwrite``.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from tpcore.commands.options import nonnegative_int, positive_float, positive_int
from tpcore.commands.output import add_json_option, emit
from tpcore.commands.reproduce import add_reproduction
from tpcore.errors import TpcoreError
from tpcore.experiments import classify_demo, ner_demo
from tpcore.experiments.ner import compare_ner, ner_table
from tpcore.experiments.text_classification import classification_table, compare_classification
from tpcore.experiments.text_models import (
    ProgramSettings,
    TransformerSettings,
    comparison_report,
    file_record,
    settings_config,
)
from tpcore.rundir import RunDir
from tpcore.tasks.nlp import (
    hold_out,
    prepare_classification,
    prepare_ner,
    read_classification,
    read_conll,
)

DEMOS: dict[str, tuple[ModuleType, str]] = {"ner-demo": (ner_demo, "NER"),
                                            "classify-demo": (classify_demo, "sentiment")}
TASKS = ("conll", "classify", *DEMOS)
"""The NLP tasks of ``tpcore learn``."""
HOLD_OUT = 0.1
"""Share of ``classify --train`` held out for validation when no ``--dev`` file is given."""


def _model_options(p: argparse.ArgumentParser, k: int, max_words: int, heads: int) -> None:
    p.add_argument("--glove", help="GloVe-format text file to initialise word embeddings")
    p.add_argument("--lowercase", action="store_true", help="lowercase words")
    p.add_argument("--max-words", type=positive_int, default=max_words,
                   help=f"drop longer sentences (default {max_words})")
    p.add_argument("--vocab-size", type=positive_int, default=10_000,
                   help="most common training words kept (default 10000)")
    g = p.add_argument_group("model settings (a comma-separated list runs the grid of all "
                             "combinations, selected on the validation split)")
    for flag, default, what in (
            ("--embed-vars", "4", "program: embedding variables m"),
            ("--k", str(k), "program: variable cardinality"),
            ("--layers", "2", "program: layers"),
            ("--heads", str(heads), "program: categorical heads per layer"),
            ("--mlps", "1", "program: categorical MLPs per layer"),
            ("--lr", "0.05", "program: learning rate"),
            ("--epochs", "10", "training epochs (both models)"),
            ("--d-model", "128", "transformer: width"),
            ("--t-layers", "2", "transformer: layers"),
            ("--t-heads", "4", "transformer: heads"),
            ("--t-lr", "0.001", "transformer: learning rate"),
            ("--seed", "0", "seeds (both models)")):
        g.add_argument(flag, default=default, help=f"{what} (default {default})")
    p.add_argument("--batch-size", type=positive_int, default=32)
    p.add_argument("--models", default="program,transformer",
                   help="comma-separated subset of program,transformer (baseline always runs)")
    _run_options(p)


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--overwrite", action="store_true",
                   help="replace a run of other settings in --out")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_tasks(tasks: argparse._SubParsersAction) -> None:
    """Add the NLP tasks (:data:`TASKS`) to the task list of ``tpcore learn`` or ``tpcore
    nlp``."""
    c = tasks.add_parser("conll", help="named entities from CoNLL-2003-style files (Table 2)")
    c.add_argument("--train", required=True)
    c.add_argument("--dev", required=True)
    c.add_argument("--test", required=True)
    c.add_argument("--out", default="runs/conll")
    _model_options(c, k=32, max_words=30, heads=8)
    add_json_option(c)
    c.set_defaults(func=run_conll)
    t = tasks.add_parser("classify", help="text classification from LABEL<TAB>TEXT files "
                                          "(Table 6)")
    t.add_argument("--train", required=True)
    t.add_argument("--dev", help="validation file (default: 10 %% of --train held out)")
    t.add_argument("--test", required=True)
    t.add_argument("--out", default="runs/classify")
    _model_options(t, k=64, max_words=64, heads=4)
    add_json_option(t)
    t.set_defaults(func=run_classify)
    for name, (_, what) in DEMOS.items():
        d = tasks.add_parser(name, help=f"the built-in synthetic {what} corpus: program vs "
                                        "transformer vs baseline")
        add_reproduction(d, DEMOS[name][0], out=f"runs/{name}")
        d.add_argument("--epochs", help=argparse.SUPPRESS)  # refused, naming --budget
        add_json_option(d)
        d.set_defaults(func=run_demo, demo=name)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("nlp", help="Transformer Programs for named entities and text "
                                   "classification (the NLP tasks of learn)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_tasks(p.add_subparsers(dest="task", metavar="TASK", required=True))


Parse = Callable[[str], Any]


def _values(args: argparse.Namespace, name: str, parse: Parse) -> list:
    """The comma-separated values of option ``name``, each read by ``parse``."""
    text = str(getattr(args, name))
    flag = f"--{name.replace('_', '-')}"
    try:
        values = [parse(v.strip()) for v in text.split(",") if v.strip()]
    except argparse.ArgumentTypeError as exc:
        raise TpcoreError(f"{flag} {text!r}: {exc}") from None
    if not values:
        raise TpcoreError(f"{flag} {text!r}: expected comma-separated values")
    return values


def _grid(args: argparse.Namespace, cls: type, options: dict[str, tuple[str, Parse]]) -> list:
    """Settings for every combination of the listed option values."""
    names = list(options)
    lists = [_values(args, opt, parse) for opt, parse in options.values()]
    return [cls(**dict(zip(names, combo)), batch_size=args.batch_size)
            for combo in itertools.product(*lists)]


def _settings(args: argparse.Namespace) -> tuple[list | None, list | None]:
    kinds = {m.strip() for m in args.models.split(",") if m.strip()}
    if not kinds <= {"program", "transformer"}:
        raise TpcoreError(f"--models {args.models!r}: expected names from program,transformer")
    prog = _grid(args, ProgramSettings, {
        "n_layers": ("layers", positive_int), "n_heads": ("heads", positive_int),
        "n_mlps": ("mlps", nonnegative_int), "n_embed_vars": ("embed_vars", nonnegative_int),
        "k": ("k", positive_int), "epochs": ("epochs", positive_float),
        "lr": ("lr", positive_float), "seed": ("seed", nonnegative_int)})
    trans = _grid(args, TransformerSettings, {
        "d_model": ("d_model", positive_int), "n_layers": ("t_layers", positive_int),
        "n_heads": ("t_heads", positive_int), "epochs": ("epochs", positive_float),
        "lr": ("t_lr", positive_float), "seed": ("seed", nonnegative_int)})
    return (prog if "program" in kinds else None), (trans if "transformer" in kinds else None)


def _run_dir(args: argparse.Namespace, files: dict[str, str], program: list | None,
             transformer: list | None, **data: Any) -> RunDir:
    """The run directory ``--out`` of this command's configuration: the input files (path,
    size, SHA-256), how they are read and the model settings."""
    config = {"task": args.task, "files": {k: file_record(v) for k, v in files.items()},
              "glove": args.glove and file_record(args.glove), "max_words": args.max_words,
              "vocab_size": args.vocab_size, "lowercase": args.lowercase, **data,
              **settings_config(program, transformer)}
    return RunDir(args.out, config, args.overwrite)


def run_conll(args: argparse.Namespace) -> int:
    files = {"train": args.train, "dev": args.dev, "test": args.test}
    prog, trans = _settings(args)
    run_dir = _run_dir(args, files, prog, trans)
    data = prepare_ner({k: read_conll(v) for k, v in files.items()}, args.max_words,
                       args.vocab_size, args.lowercase, sources=files)
    results = compare_ner(data, prog, trans, args.glove, run_dir, args.quiet)
    emit(args, results, lambda: comparison_report(args.task, results,
                                                  ner_table(results, paper=True), args.out))
    return 0


def run_classify(args: argparse.Namespace) -> int:
    files = {"train": args.train, "test": args.test, **({"dev": args.dev} if args.dev else {})}
    prog, trans = _settings(args)
    run_dir = _run_dir(args, files, prog, trans,
                       **({} if args.dev else {"hold_out": {"share": HOLD_OUT, "seed": 0}}))
    splits = {k: read_classification(v) for k, v in files.items()}
    if not args.dev:
        splits["train"], splits["dev"] = hold_out(splits["train"], HOLD_OUT, seed=0)
    data = prepare_classification(splits, args.max_words, args.vocab_size, args.lowercase,
                                  sources=files)
    results = compare_classification(data, prog, trans, args.glove, run_dir, args.quiet)
    emit(args, results, lambda: comparison_report(args.task, results,
                                                  classification_table(results), args.out))
    return 0


def run_demo(args: argparse.Namespace) -> int:
    if args.epochs is not None:
        raise TpcoreError(f"--epochs {args.epochs[:20]}: the demos train each model for its own "
                          "number of epochs; scale them all with --budget (e.g. --budget 0.5)")
    module = DEMOS[args.demo][0]
    out = Path(args.out)
    result = module.run(module.budget(args.budget), out, args.seed, args.quiet, args.overwrite)
    emit(args, result, lambda: module.report(result, out))
    return 0

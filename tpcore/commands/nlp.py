"""``tpcore nlp conll|classify|ner-demo``: Transformer Programs on NLP data (the paper's section
4.3), and the ``tpcore reproduce ner-demo`` verb.

- ``conll --train F --dev F --test F [--glove F]``: named entities from CoNLL-2003-style files:
  unigram baseline, standard transformer and Transformer Program (Table 2);
- ``classify --train F [--dev F] --test F [--glove F]``: text classification from
  ``LABEL<TAB>TEXT`` files (10 % of train held out when no dev file): Naive Bayes, standard
  transformer and Transformer Program, both mean-pooled (Table 6);
- ``ner-demo`` / ``classify-demo``: the built-in synthetic corpora, minutes on two cores.

Each prints a results table and writes the models, ``results.json``, ``table.md`` and, for NER,
the decompiled program (``program/program.json``, ``program/program/ner.py``) and the embedding
table (``program/embeddings.md``) under ``--out``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from tpcore.commands.options import nonnegative_int, positive_float, positive_int


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
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("nlp", help="Transformer Programs for named entities and text "
                                   "classification", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="nlp_verb", metavar="TASK")
    c = verbs.add_parser("conll", help="named entities from CoNLL-2003-style files")
    c.add_argument("--train", required=True)
    c.add_argument("--dev", required=True)
    c.add_argument("--test", required=True)
    c.add_argument("--out", default="runs/conll")
    _model_options(c, k=32, max_words=30, heads=8)
    c.set_defaults(func=run_conll)
    t = verbs.add_parser("classify", help="text classification from LABEL<TAB>TEXT files")
    t.add_argument("--train", required=True)
    t.add_argument("--dev", help="validation file (default: 10 %% of --train held out)")
    t.add_argument("--test", required=True)
    t.add_argument("--out", default="runs/classify")
    _model_options(t, k=64, max_words=64, heads=4)
    t.set_defaults(func=run_classify)
    for name, what in DEMOS.items():
        d = verbs.add_parser(name, help=f"the built-in synthetic {what} corpus")
        _demo_options(d, f"runs/{name}")
        d.set_defaults(func=run_demo, demo=name)


DEMOS = {"ner-demo": "NER", "classify-demo": "sentiment"}


def register_reproduce(verbs: argparse._SubParsersAction) -> None:
    for name, what in DEMOS.items():
        p = verbs.add_parser(name, help=f"synthetic {what}: program vs transformer vs baseline")
        _demo_options(p, f"results/{name}")
        p.set_defaults(func=run_demo, demo=name)


def _demo_options(p: argparse.ArgumentParser, out: str) -> None:
    p.add_argument("--budget", type=positive_float, default=1.0,
                   help="scales the training epochs")
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--out", default=out)
    p.add_argument("--quiet", action="store_true")


Parse = Callable[[str], float]


def _values(args: argparse.Namespace, name: str, parse: Parse) -> list:
    """The comma-separated values of option ``name``, each read by ``parse``."""
    from tpcore.errors import TpcoreError

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
    import itertools

    names = list(options)
    lists = [_values(args, opt, parse) for opt, parse in options.values()]
    return [cls(**dict(zip(names, combo)), batch_size=args.batch_size)
            for combo in itertools.product(*lists)]


def _settings(args: argparse.Namespace):
    from tpcore.errors import TpcoreError
    from tpcore.experiments.nlp import ProgramSettings, TransformerSettings

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


def _report(args: argparse.Namespace, results: dict, table: str) -> None:
    d = results["data"]
    print(f"tpcore nlp {args.nlp_verb}: vocabulary {d['vocab_size']}, labels {d['labels']}, "
          f"sentences {d['sizes']} (dropped over --max-words: {d['dropped']}) -> {args.out}")
    print(table, end="")
    fid = results.get("program", {}).get("written", {}).get("fidelity")
    if fid:
        print("decompiled program vs discrete model on test: " + ", ".join(
            f"{engine} {100 * v:.2f}%" for engine, v in fid.items()) + " agreement")


def run_conll(args: argparse.Namespace) -> int:
    from tpcore.experiments.nlp import compare_ner, ner_table
    from tpcore.tasks.nlp import prepare_ner, read_conll

    files = {"train": args.train, "dev": args.dev, "test": args.test}
    data = prepare_ner({k: read_conll(v) for k, v in files.items()}, args.max_words,
                       args.vocab_size, args.lowercase, sources=files)
    prog, trans = _settings(args)
    results = compare_ner(data, prog, trans, args.glove, Path(args.out), args.quiet)
    _report(args, results, ner_table(results, paper=True))
    return 0


def run_classify(args: argparse.Namespace) -> int:
    from tpcore.experiments.nlp import classification_table, compare_classification
    from tpcore.tasks.nlp import hold_out, prepare_classification, read_classification

    files = {"train": args.train, "test": args.test}
    splits = {k: read_classification(v) for k, v in files.items()}
    if args.dev:
        files["dev"] = args.dev
        splits["dev"] = read_classification(args.dev)
    else:
        splits["train"], splits["dev"] = hold_out(splits["train"], 0.1, seed=0)
    data = prepare_classification(splits, args.max_words, args.vocab_size, args.lowercase,
                                  sources=files)
    prog, trans = _settings(args)
    results = compare_classification(data, prog, trans, args.glove, Path(args.out), args.quiet)
    _report(args, results, classification_table(results))
    return 0


def run_demo(args: argparse.Namespace) -> int:
    from tpcore.experiments import nlp

    args.nlp_verb = args.demo
    if args.demo == "ner-demo":
        results = nlp.ner_demo(args.out, args.budget, args.seed, args.quiet)
        table = nlp.ner_table(results)
    else:
        results = nlp.classify_demo(args.out, args.budget, args.seed, args.quiet)
        table = nlp.classification_table(results)
    _report(args, results, table)
    return 0

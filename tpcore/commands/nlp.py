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
from pathlib import Path


def _model_options(p: argparse.ArgumentParser, k: int, max_words: int, heads: int) -> None:
    p.add_argument("--glove", help="GloVe-format text file to initialise word embeddings")
    p.add_argument("--lowercase", action="store_true", help="lowercase words")
    p.add_argument("--max-words", type=int, default=max_words,
                   help=f"drop longer sentences (default {max_words})")
    p.add_argument("--vocab-size", type=int, default=10_000,
                   help="most common training words kept (default 10000)")
    p.add_argument("--embed-vars", type=int, default=4, help="embedding variables m")
    p.add_argument("--k", type=int, default=k, help=f"variable cardinality (default {k})")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=heads, help="categorical heads per layer")
    p.add_argument("--mlps", type=int, default=1, help="categorical MLPs per layer")
    p.add_argument("--epochs", type=float, default=10.0)
    p.add_argument("--lr", type=float, default=0.05, help="program learning rate")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--d-model", type=int, default=128, help="standard transformer width")
    p.add_argument("--t-layers", type=int, default=2, help="standard transformer layers")
    p.add_argument("--t-heads", type=int, default=4, help="standard transformer heads")
    p.add_argument("--t-lr", type=float, default=1e-3, help="standard transformer learning rate")
    p.add_argument("--models", default="program,transformer",
                   help="comma-separated subset of program,transformer (baseline always runs)")
    p.add_argument("--seed", type=int, default=0)
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
    p.add_argument("--budget", type=float, default=1.0, help="scales the training epochs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=out)
    p.add_argument("--quiet", action="store_true")


def _settings(args: argparse.Namespace):
    from tpcore.errors import TpcoreError
    from tpcore.experiments.nlp import ProgramSettings, TransformerSettings

    kinds = {m.strip() for m in args.models.split(",") if m.strip()}
    if not kinds <= {"program", "transformer"}:
        raise TpcoreError(f"--models {args.models!r}: expected names from program,transformer")
    prog = ProgramSettings(n_layers=args.layers, n_heads=args.heads, n_mlps=args.mlps,
                           n_embed_vars=args.embed_vars, k=args.k, epochs=args.epochs,
                           batch_size=args.batch_size, lr=args.lr, seed=args.seed)
    trans = TransformerSettings(d_model=args.d_model, n_layers=args.t_layers,
                                n_heads=args.t_heads, epochs=args.epochs,
                                batch_size=args.batch_size, lr=args.t_lr, seed=args.seed)
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
        splits["train"], splits["dev"] = hold_out(splits["train"], 0.1, args.seed)
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

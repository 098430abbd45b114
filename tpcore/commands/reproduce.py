"""``tpcore reproduce NAME``: the reproductions of the papers' tables and figures.

``NAME`` runs the module ``tpcore.experiments.NAME`` (the name's ``-`` read as ``_``;
:data:`EXPERIMENTS`), an experiment of the one shape of :mod:`tpcore.experiments.budget`:

    module.run(module.budget(--budget), Path(--out), --seed, **options)

then prints ``module.report(result, out)``. Every verb takes ``--budget``, ``--seed`` and
``--out``; the others are the study's own ``options``, passed by their names.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from tpcore.commands.nlp import demo_options
from tpcore.commands.options import (
    nonnegative_int,
    positive_float,
    positive_int,
    positive_ints,
)
from tpcore.commands.output import add_json_option, emit
from tpcore.experiments import (
    bp_table,
    classify_demo,
    counting,
    fleq,
    grammar_learning,
    hierarchy,
    looped,
    ner_demo,
    program_lengths,
    published_programs,
    sorting,
    table1,
    table5,
)

EXPERIMENTS: dict[str, ModuleType] = {
    "table1": table1, "program-lengths": program_lengths, "counting": counting,
    "sorting": sorting, "looped": looped, "fleq": fleq, "bp-table": bp_table,
    "hierarchy": hierarchy, "grammar-learning": grammar_learning, "ner-demo": ner_demo,
    "classify-demo": classify_demo, "table5": table5, "published-programs": published_programs,
}
"""Each reproduction's module, in the order ``--help`` lists them."""
COMMON = ("command", "backend", "verb", "func", "budget", "seed", "out", "json")
"""Parsed options that are not a study's own."""


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _cell(text: str) -> tuple[str, str]:
    if text.count(":") != 1:
        raise argparse.ArgumentTypeError(f"expected TASK:REGIME, got {text!r}")
    task, regime = text.split(":")
    return task, regime


def _presets(p: argparse.ArgumentParser, module: ModuleType, default: str, what: str) -> None:
    p.add_argument("--budget", default=default, choices=tuple(module.BUDGETS),
                   help=f"{what} (default {default})")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed (default 0)")


def _table1(p: argparse.ArgumentParser) -> None:
    _presets(p, table1, "small", "smoke: pipeline check; small: 2 layers, 2+2 heads, 1+1 MLPs, "
             "1 seed, 60 epochs; medium: the paper's architecture per task, 3 seeds, 250 "
             "epochs; paper: full grid, 5 seeds (seeds counted from --seed)")
    p.add_argument("--epochs", type=positive_int, help="override the budget's epochs")
    p.add_argument("--seeds", type=nonnegative_int, nargs="+", help="override the budget's seeds")
    p.add_argument("--tasks", nargs="+", help="subset of tasks (default: all eight)")
    p.add_argument("--jobs", type=positive_int, default=1, help="local worker processes")
    p.add_argument("--scheduler", help="Dask scheduler address")
    p.add_argument("--out", default="results/table1")
    p.add_argument("--overwrite", action="store_true",
                   help="retrain runs in --out made with other settings")
    p.add_argument("--halving", type=positive_int, metavar="ETA",
                   help="successive halving of each task's sweep: keep the best 1/ETA of the "
                        "runs at each rung (ETA >= 2; e.g. --budget paper --halving 3 trains "
                        "27.5%% of the full grid's epochs; default: every run to the end)")
    p.add_argument("--rungs", type=positive_int, default=3,
                   help="rungs of --halving, the first 1/ETA^(RUNGS-1) of the epochs long "
                        "(default 3)")


def _program_lengths(p: argparse.ArgumentParser) -> None:
    _presets(p, program_lengths, "small", "the Table 1 budget whose selected programs are "
             "counted (its runs are reused, or trained when missing)")
    p.add_argument("--epochs", type=positive_int, help="override the budget's epochs")
    p.add_argument("--table1", dest="table1_dir", default="results/table1",
                   help="Table 1 results folder")
    p.add_argument("--run-dirs", nargs="+", metavar="DIR",
                   help="measure these learn run directories instead of the Table 1 selection")
    p.add_argument("--no-fidelity", dest="check_fidelity", action="store_false",
                   help="skip the fidelity check")
    p.add_argument("--out", default="results/program_lengths")
    p.add_argument("--overwrite", action="store_true",
                   help="retrain Table 1 runs made with other settings")


def _published_programs(p: argparse.ArgumentParser) -> None:
    _presets(p, published_programs, "small", "inputs per program: smoke: all up to 2,000, else "
             "500 random; small: all up to 100,000, else 20,000 random; full: all up to "
             "1,000,000, else 200,000 random")
    p.add_argument("--programs", required=True, metavar="DIR",
                   help="the authors' programs folder (with rasp/ and rasp_categorical_only/)")
    p.add_argument("--out", default="results/published_programs")


def _counting(p: argparse.ArgumentParser) -> None:
    _presets(p, counting, "target", "smoke: pipeline check; target: double_hist at |V|=N=16 "
             "and the length test on hist/double_hist; small: all cells, 4,000 inputs, 20 "
             "epochs; paper: all cells, 16,000 inputs, 250 epochs")
    p.add_argument("--epochs", type=positive_int, help="override the budget's epochs")
    p.add_argument("--variants", nargs="+",
                   help="subset of none prefix experts both running (running: the running "
                        "count of the own token, the PrefixSumCounts of the paper's code)")
    p.add_argument("--cells", type=_cell, nargs="+", metavar="TASK:REGIME",
                   help="(task, regime) cells instead of the budget's, e.g. double_hist:bigvocab")
    p.add_argument("--lengthgen", nargs="*", metavar="TASK",
                   help="length-test tasks instead of the budget's (none given: skip it)")
    p.add_argument("--seeds", type=nonnegative_int, nargs="+",
                   help="seeds instead of the budget's (--seed)")
    p.add_argument("--arch", type=positive_int, nargs=3, metavar=("LAYERS", "HEADS", "MLPS"),
                   help="architecture instead of 3 4 2 (heads and MLPs per layer, half "
                        "categorical, half numerical)")
    p.add_argument("--out", default="results/counting")


def _sorting(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", type=_comma_list,
                   help="comma-separated subset of causal,distinct,bidirectional")
    p.add_argument("--budget", type=positive_float, default=1.0,
                   help="scales training steps and the failure search (default 1)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed (default 0)")
    p.add_argument("--out", default="results/sorting", help="output folder")
    p.add_argument("--overwrite", action="store_true",
                   help="retrain tasks whose results in --out were made with other settings")
    p.add_argument("--plots", action="store_true", help="also write PNG figures")


def _looped(p: argparse.ArgumentParser) -> None:
    _presets(p, looped, "small", "small: T <= 100 (minutes); full: T <= 1000")
    p.add_argument("--out", default="results/looped", help="output folder")


def _fleq(p: argparse.ArgumentParser) -> None:
    _presets(p, fleq, "small", "small: small instances (minutes); full: larger instances")
    p.add_argument("--out", default="results/fleq", help="output folder")


def _bp_table(p: argparse.ArgumentParser) -> None:
    _presets(p, bp_table, "paper", "sequences per k: paper 200000, small 20000")
    p.add_argument("--samples", type=positive_int, help="sequences per k instead of the "
                   "budget's")
    p.add_argument("--out", default="results/hierarchy", help="output folder")


def _grammar_learning(p: argparse.ArgumentParser) -> None:
    _presets(p, grammar_learning, "small", "small: P = 100..3000, 100 EM and 200 Adam steps; "
             "tiny: a pipeline check")
    p.add_argument("--sizes", type=positive_ints, help="training-set sizes P, comma-separated "
                   "(default 100,300,1000,3000)")
    p.add_argument("--em-steps", type=positive_int, help="inside-outside iterations (100)")
    p.add_argument("--adam-steps", type=positive_int, help="Adam steps (200)")
    p.add_argument("--out", default="results/hierarchy", help="output folder")


def _hierarchy(p: argparse.ArgumentParser) -> None:
    _presets(p, hierarchy, "small", "scale: small: l=3, d=64, FFN 256; paper: l=4, d=128, FFN "
             "2048; tiny: a pipeline check")
    p.add_argument("--parts", type=_comma_list, default=("root", "mlm"),
                   help="comma-separated: root, root-long (k_train=--long-k, 4x steps), mlm, "
                        "probe, finetune (default root,mlm; probe and finetune use the encoder "
                        "saved by mlm)")
    p.add_argument("--mlm-steps", type=positive_int,
                   help="MLM steps (default 2x the root steps)")
    p.add_argument("--long-k", type=nonnegative_int, default=0,
                   help="k_train of the root-long run (0)")
    p.add_argument("--long-samples", type=positive_int,
                   help="training trees of the root-long run (default: the budget's P)")
    p.add_argument("--out", default="results/hierarchy", help="output folder")


def _table5(p: argparse.ArgumentParser) -> None:
    _presets(p, table5, "paper", "smoke: pipeline check; paper: 100 epochs, 3 seeds from --seed")
    p.add_argument("--out", default="results/table5")
    p.add_argument("--overwrite", action="store_true",
                   help="retrain runs in --out made with other settings")


OPTIONS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "table1": ("Transformer Programs paper, Table 1 (RASP tasks + in-context task)", _table1),
    "program-lengths": ("Transformer Programs paper, Table 4 (program length before/after "
                        "compression)", _program_lengths),
    "counting": ("Modular Counts paper, Table 1 (none / prefix / experts / both x tasks x "
                 "regimes) + length test", _counting),
    "sorting": ("train the three tiny sorting transformers; accuracy, failure search, rule "
                "agreement, circuits", _sorting),
    "looped": ("lambda sweep of the SUBLEQ looped transformer, sensitivity and repair by "
               "gradient descent through the loop", _looped),
    "fleq": ("FLEQ error study: blocks and applications vs lambda, matmul c and C, sigmoid "
             "count m (float64 and float32)", _fleq),
    "bp-table": ("exact BP_k' accuracy on k-filtered data (root and single-mask MLM), the "
                 "paper's grammar", _bp_table),
    "hierarchy": ("transformers (root classification for every k_train, MLM) compared with "
                  "exact BP during training", _hierarchy),
    "grammar-learning": ("learn the grammar from leaves: Adam on log Z vs inside-outside, "
                         "against the number of samples", _grammar_learning),
    "ner-demo": ("synthetic NER: program vs transformer vs baseline",
                 lambda p: demo_options(p, "results/ner-demo")),
    "classify-demo": ("synthetic sentiment: program vs transformer vs baseline",
                      lambda p: demo_options(p, "results/classify-demo")),
    "table5": ("Transformer Programs paper, Table 5 (reverse learned from partly initialised "
               "solutions)", _table5),
    "published-programs": ("the Transformer Programs authors' published programs re-emitted "
                           "by tpcore: lines and agreement on every input", _published_programs),
}
"""Per reproduction: its help line and the function adding its options."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="reproduce a paper's table or figure",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="verb", metavar="NAME", required=True)
    for name in EXPERIMENTS:
        help_text, add_options = OPTIONS[name]
        v = verbs.add_parser(name, help=help_text)
        add_options(v)
        add_json_option(v)
        v.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the reproduction ``args.verb`` with its options and print its report."""
    module = EXPERIMENTS[args.verb]
    options = {k: v for k, v in vars(args).items() if k not in COMMON}
    out = Path(args.out)
    result = module.run(module.budget(args.budget), out, args.seed, **options)
    emit(args, result, lambda: module.report(result, out))
    return 0

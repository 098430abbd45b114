"""``tpcore learn TASK``: train a Transformer Program on a generated task and decompile it; the
NLP tasks ``conll``, ``classify``, ``ner-demo`` and ``classify-demo`` are
:mod:`tpcore.commands.nlp`'s.

For a generated task, writes ``runs/TASK`` (or ``--out``): ``model.npz``/``model.json``,
``metrics.json``, the extracted program (``program.json``, ``program/TASK.py`` with its weights
CSV) and ``run.json``. ``--init-from PROGRAM --init-parts read,predicate`` starts the model
from a program's read gates and predicates (:mod:`tpcore.models.init_from`).
A finished run of the same settings there is reused; one of other settings is refused unless
``--overwrite``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tpcore.commands import nlp
from tpcore.commands.options import (
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
)
from tpcore.commands.output import add_json_option, emit
from tpcore.errors import unknown_name
from tpcore.models.counting import VARIANTS
from tpcore.models.init_from import STRENGTH
from tpcore.pipelines.learn import (
    LR_SCHEDULES,
    TASK_RECIPES,
    LearnConfig,
    learn,
    task_config,
)
from tpcore.tasks.registry import ALIASES, TASK_NAMES

DEFAULTS = LearnConfig()
"""Default model and budget of ``tpcore learn`` (chosen so ``learn sort`` fits 5 minutes; some
tasks train another model, :data:`~tpcore.pipelines.learn.TASK_RECIPES`)."""


def add_model_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``learn`` and ``sweep``: data size and training settings."""
    p.add_argument("--epochs", type=positive_int, default=DEFAULTS.epochs,
                   help=f"training epochs (default {DEFAULTS.epochs}; the paper: 250)")
    p.add_argument("--batch-size", type=positive_int, default=512)
    p.add_argument("--lr", type=positive_float, default=0.05)
    p.add_argument("--samples", type=positive_int, default=1, help="Gumbel samples per step")
    p.add_argument("--grad-clip", type=nonnegative_float, default=0.0,
                   help="largest global gradient norm of a step (default 0: no clipping)")
    p.add_argument("--lr-schedule", choices=LR_SCHEDULES, default="constant",
                   help="learning rate per step: constant (the paper's) or cosine, decaying "
                        "to 0 at the last step (default constant)")
    p.add_argument("--tau", type=positive_float, nargs=2, metavar=("START", "END"),
                   default=(DEFAULTS.tau_start, DEFAULTS.tau_end),
                   help="Gumbel-softmax temperature, annealed geometrically per step from "
                        f"START to END (default {DEFAULTS.tau_start:g} {DEFAULTS.tau_end:g}, "
                        "the paper's)")
    p.add_argument("--gate-tau", type=positive_float, default=None, metavar="RATIO",
                   help=recipe_help("sample the read gates at RATIO times the temperature, "
                                    "every other choice at the temperature (1: the paper's)",
                                    "gate_tau"))
    p.add_argument("--eval-every", type=nonnegative_int, default=10,
                   help="epochs between validations (0: none, no selection)")
    p.add_argument("--candidates", type=positive_int, default=None,
                   help=recipe_help("models trained --select-after epochs each, the best on "
                                    "validation going on alone", "candidates"))
    p.add_argument("--select-after", type=positive_int, default=None,
                   help=recipe_help("epochs before the candidates are compared", "select_after"))
    p.add_argument("--grow", type=nonnegative_int, default=None, metavar="HEADS",
                   help=recipe_help("train a model of HEADS categorical heads per layer first, "
                                    "then start this one from the best of its heads (0: no)",
                                    "grow"))
    p.add_argument("--d-mlp", type=positive_int, default=64)
    p.add_argument("--vocab-size", type=nonnegative_int, default=0,
                   help="token ids incl. <pad>, <s>, </s> (the paper's |V|; 0: task default)")
    p.add_argument("--max-len", type=nonnegative_int, default=0,
                   help="positions incl. <s>, </s> (the paper's N; 0: task default)")
    p.add_argument("--n-samples", type=positive_int, default=20000,
                   help="distinct inputs (80/10/10)")
    p.add_argument("--data-seed", type=nonnegative_int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def recipe_help(what: str, field: str) -> str:
    """Help of an option whose default some tasks change (:data:`TASK_RECIPES`)."""
    special = "".join(f"; {task} {r[field]}" for task, r in TASK_RECIPES.items() if field in r)
    return f"{what} (default {getattr(DEFAULTS, field)}{special})"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("learn", help="train a Transformer Program on a task and decompile it",
                       description=__doc__)
    tasks = p.add_subparsers(dest="task", metavar="TASK", required=True)
    options = argparse.ArgumentParser(add_help=False)
    arch = (("--layers", positive_int, "n_layers", "layers"),
            ("--cat-heads", nonnegative_int, "n_cat_heads", "categorical heads per layer"),
            ("--num-heads", nonnegative_int, "n_num_heads", "numerical heads per layer"),
            ("--cat-mlps", nonnegative_int, "n_cat_mlps", "categorical MLPs per layer"),
            ("--num-mlps", nonnegative_int, "n_num_mlps", "numerical MLPs per layer"))
    for flag, kind, field, what in arch:
        options.add_argument(flag, type=kind, default=None, help=recipe_help(what, field))
    options.add_argument("--seed", type=nonnegative_int, default=0)
    options.add_argument("--out", help="run directory (default runs/TASK)")
    options.add_argument("--overwrite", action="store_true",
                         help="replace a run of other settings in --out")
    options.add_argument("--init-from", metavar="PROGRAM", default="",
                         help="initialise parts of the model from this program (IR .json, "
                              "program .py or run directory)")
    options.add_argument("--init-parts", metavar="PARTS", default="read,predicate",
                         help="with --init-from, comma-separated: read, predicate, classifier, "
                              "or MODULE.read / MODULE.predicate (default read,predicate)")
    options.add_argument("--init-strength", type=positive_float, default=STRENGTH,
                         help=f"logit margin of an initialised choice (default {STRENGTH:g})")
    options.add_argument("--counting", choices=VARIANTS, default="none",
                         help="counting modules: prefix (PrefixSumCounts as the paper "
                              "defines them), experts (the sparse expert counting network), "
                              "both, or running (the running count of the own token, the "
                              "PrefixSumCounts of the paper's code) (default none)")
    add_json_option(options)
    add_model_options(options)
    for name in TASK_NAMES:
        t = tasks.add_parser(name, parents=[options], help="a generated task",
                             aliases=[a for a, canon in ALIASES.items() if canon == name])
        t.set_defaults(func=run)
    nlp.add_tasks(tasks)


def config_from_args(args: argparse.Namespace, **arch: Any) -> LearnConfig:
    """A checked :class:`LearnConfig` from the options of :func:`add_model_options`; ``arch``:
    architecture fields (``n_layers``, ``seed``, ...); those not given (or None) are the task's
    (:func:`tpcore.pipelines.learn.task_config`)."""
    if args.task not in (*TASK_NAMES, *ALIASES):
        raise unknown_name("task", args.task, TASK_NAMES)
    cfg = task_config(args.task, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                      samples=args.samples, grad_clip=args.grad_clip,
                      lr_schedule=args.lr_schedule, tau_start=args.tau[0], tau_end=args.tau[1],
                      eval_every=args.eval_every, d_mlp=args.d_mlp,
                      vocab_size=args.vocab_size, max_len=args.max_len,
                      n_samples=args.n_samples, data_seed=args.data_seed,
                      **{k: v for k, v in {"candidates": args.candidates,
                                           "select_after": args.select_after,
                                           "gate_tau": args.gate_tau, "grow": args.grow,
                                           **arch}.items()
                         if v is not None})
    cfg.check()
    return cfg


SUMMARY = ("train", "val", "test", "steps", "train_seconds", "ms_per_step",
           "ms_per_step_by_tenth", "selected_at_step", "peak_rss_mb", "program", "seed",
           "candidates", "grown")
"""The entries of a run's ``metrics.json`` that ``tpcore learn`` prints."""


def summary(metrics: dict) -> str:
    """The table ``tpcore learn`` prints."""
    rows = [f"{'split':<6} {'loss':>8} {'token acc':>10} {'seq acc':>9}"]
    for s in ("train", "val", "test"):
        m = metrics[s]
        rows.append(f"{s:<6} {m['loss']:>8.4f} {100 * m['acc']:>9.2f}% {100 * m['seq_acc']:>8.2f}%")
    if "candidates" in metrics:
        c = metrics["candidates"]
        rows.append(f"best of {len(c)} candidates: seed {metrics['seed']} (validation token "
                    "acc " + ", ".join(f"{100 * x['val_acc']:.1f}%" for x in c) + ")")
    if "grown" in metrics:
        g = metrics["grown"]
        rows.append(f"grown from {metrics['config']['grow']} heads per layer (test token acc "
                    f"{100 * g['test']['acc']:.2f}%), kept heads {g['kept']} of "
                    f"{len(g['heads'])} choices")
    tenths = [t for t in metrics.get("ms_per_step_by_tenth", ()) if t]
    trend = f"; the last tenth's steps {tenths[-1] / tenths[0]:.2f}x the first's" if len(
        tenths) > 1 else ""
    rows.append(f"{metrics['steps']} steps in {metrics['train_seconds']:.1f} s "
                f"({metrics['ms_per_step']:.1f} ms/step{trend}), selected at step "
                f"{metrics['selected_at_step']}, peak memory {metrics['peak_rss_mb']:.0f} MiB")
    prog = metrics.get("program", {})
    if "path" in prog:
        rows.append(f"program: {prog['path']} ({prog['lines']} lines, "
                    f"{100 * prog['fidelity']:.2f}% agreement with the model on test)")
    else:
        rows.append(f"program: {prog.get('error', 'not written')}")
    return "\n".join(rows)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args, n_layers=args.layers, n_cat_heads=args.cat_heads,
                           n_num_heads=args.num_heads, n_cat_mlps=args.cat_mlps,
                           n_num_mlps=args.num_mlps, seed=args.seed, counting=args.counting,
                           **(dict(init_from=args.init_from, init_parts=args.init_parts,
                                   init_strength=args.init_strength) if args.init_from else {}))
    out = Path(args.out or f"runs/{cfg.task}")
    metrics = learn(cfg, out, quiet=args.quiet, overwrite=args.overwrite)
    lines = [f"tpcore learn {cfg.task}: {cfg.n_layers} layers, {cfg.n_cat_heads}+"
             f"{cfg.n_num_heads} heads, {cfg.n_cat_mlps}+{cfg.n_num_mlps} MLPs, seed {cfg.seed} "
             f"-> {out}"]
    if metrics["reused"]:
        lines.append(f"reused the finished run of these settings in {out}")
    result = {"task": cfg.task, "out": out, "config": metrics["config"],
              "reused": metrics["reused"], **{k: metrics[k] for k in SUMMARY if k in metrics}}
    emit(args, result, "\n".join([*lines, summary(metrics)]))
    return 0

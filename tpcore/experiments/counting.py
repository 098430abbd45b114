"""``tpcore reproduce counting``: Table 1 of "Modular Counts, Smarter Programs" and a
length-generalisation study.

:func:`run` trains Transformer Programs with none / PrefixSumCounts / the expert network / both
/ the running count (:mod:`tpcore.models.counting`; the running count is the PrefixSumCounts
of the paper's released code, compared with the same column of the paper) on five RASP
tasks in three regimes, base (|V| = 8, N = 8), longer (|V| = 8, N = 16) and larger vocabulary
(|V| = 16, N = 16), and evaluates the discrete model on the 2,000 held-out test examples of
each task (token accuracy and exact-match sequence accuracy). Settings follow the paper's
script (``scripts/rasp-all.sh`` of its release): Adam lr 0.02, gradients clipped to global norm
1.0, 4 Gumbel samples per step, batch 512, Gumbel temperature 3.0 -> 0.1 (geometric), 20,000
generated inputs (16,000 / 2,000 / 2,000 split), 250 epochs at the ``paper`` budget. Every run
also records the expert gate's choices on the test set (share of sequences per expert).

Length generalisation (not in the paper): a model whose context holds N = 16 (positions 0 .. 17
exist; those past the training length are never seen) is trained at |V| = 8, N = 8 and tested on
the N = 16 test split.

Budgets (architecture by default, ``arch = (3, 4, 2)``: 3 layers, 2 categorical + 2 numerical
heads and 1 + 1 MLPs per layer, the original paper's double-hist model):

- ``smoke``: hist in the base regime and its length test, 256 training inputs, 2 epochs;
- ``target``: the target row (double_hist at |V| = N = 16, every variant, :data:`TARGET`)
  and the length test on hist and double_hist, 16,000 training inputs, ``epochs`` (default 20);
- ``small``: all 15 cells (every variant) and five length tests, 4,000 training inputs, 20
  epochs;
- ``paper``: all cells and length tests at the paper's 16,000 inputs and 250 epochs.

Each budget runs one seed, the ``seed`` given.

Results go to ``out/runs/*.json`` (one per run, with the model beside it as ``*-model.npz``),
``out/counting.json`` (every selected run's results; its training curve, configuration and gate
rule stay in its own record, :data:`RECORD_ONLY`) and ``out/counting.md`` (with Section 5.3's
count of settings where a module reaches the base model,
:func:`tpcore.experiments.counting_figures.module_gains`), and with matplotlib the table as a
heatmap beside the paper's, ``out/counting.png``, the base model against each module,
``out/counting_modules.png`` (the paper's Figs. 2-5), and the expert gates' routing,
``out/counting_routing.png`` (Section 6.3; :func:`figures`). Each run records its configuration
(:func:`run_config`), and a finished run is reused only for exactly that configuration, so
rerunning resumes; a run of other settings, or runs of another epoch count or architecture
anywhere in ``out``, are refused before anything is trained (one out dir holds one table's
settings). With ``hours`` a call stops at the first training step after that much time and keeps
the run's paused state beside its record, ``out/runs/.<run>-model.npz.partial``; the same
command goes on from there, and the run ends as it would have without stopping, bit for bit.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.analysis.plots import draw_or_note, table_heatmaps
from tpcore.counts import EXPERTS
from tpcore.errors import TpcoreError
from tpcore.experiments.budget import Budget, preset
from tpcore.experiments.counting_figures import module_gains, modules_figure, routing_figure
from tpcore.experiments.counting_probes import (
    gate_usage,
    histogram_heads,
    longer_only,
    prefix_ablation,
    range_shift,
    train_classes,
)
from tpcore.experiments.options import EPOCHS, Option, Reproduction
from tpcore.io import write_json, write_text
from tpcore.models.counting import (
    VARIANTS,
    CountingConfig,
    CountingProgramModel,
    describe,
    gate_rule,
    variant_flags,
)
from tpcore.nn.module import save
from tpcore.pipelines import learn
from tpcore.pipelines.learn import LearnConfig, paused_dir
from tpcore.rundir import RunDir, cached, check_out_dir, saved
from tpcore.train import evaluate_supervised
from tpcore.train_state import load_state, save_state

TASKS = ("double_hist", "hist", "reverse", "sort", "most_freq")
REGIMES = {"base": (8, 8), "longer": (8, 16), "bigvocab": (16, 16)}
"""Regime name -> (|V|, N)."""
PAPER = {
    ("double_hist", "base"): (99.88, 97.02, 97.76, 82.17),
    ("double_hist", "longer"): (64.48, 55.56, 55.23, 87.78),
    ("double_hist", "bigvocab"): (50.89, 98.14, 54.41, 65.64),
    ("hist", "base"): (99.95, 99.95, 99.95, 99.95),
    ("hist", "longer"): (99.92, 99.93, 99.94, 100.00),
    ("hist", "bigvocab"): (99.94, 100.00, 99.96, 100.00),
    ("reverse", "base"): (99.71, 99.63, 99.56, 99.80),
    ("reverse", "longer"): (72.00, 68.19, 64.34, 64.01),
    ("reverse", "bigvocab"): (41.83, 44.28, 38.03, 39.39),
    ("sort", "base"): (99.90, 99.84, 99.93, 99.89),
    ("sort", "longer"): (91.82, 95.94, 95.65, 95.31),
    ("sort", "bigvocab"): (79.70, 81.12, 84.71, 79.66),
    ("most_freq", "base"): (72.95, 75.54, 74.90, 74.11),
    ("most_freq", "longer"): (72.20, 72.36, 71.44, 75.05),
    ("most_freq", "bigvocab"): (54.05, 57.13, 50.49, 53.79),
}
"""The paper's Table 1 (test accuracy, %) per (task, regime), columns :data:`PAPER_VARIANTS`."""
PAPER_VARIANTS = ("none", "prefix", "experts", "both")
"""The paper's columns: no module, PrefixSumCounts, the expert network, both."""
PAPER_ACC = {key: dict(zip(PAPER_VARIANTS, row)) for key, row in PAPER.items()}
""":data:`PAPER` as (task, regime) -> variant -> test accuracy (%)."""
PAPER_COLUMN = {"none": 0, "prefix": 1, "experts": 2, "both": 3, "running": 1}
"""The paper's column each variant is compared with: its release computed the PrefixSumCounts
column with the running count, so ``running`` and ``prefix`` both face that column."""
SEPARATE = "give other settings their own --out"
"""What a refused run tells the user: one out dir holds one table's settings."""
TARGET = ("double_hist", "bigvocab", "prefix", 90.0)
"""The target of this reproduction: double_hist at |V| = N = 16 with PrefixSumCounts >= 90 %."""


def _budget(name: str, cells: tuple[tuple[str, str], ...], lengthgen: tuple[str, ...],
            n_train: int, epochs: int, batch_size: int = 512, eval_every: int = 5) -> Budget:
    return Budget(name, dict(cells=cells, lengthgen=lengthgen, n_train=n_train, epochs=epochs,
                             batch_size=batch_size, n_seeds=1, eval_every=eval_every,
                             arch=(3, 4, 2)))


ALL_CELLS = tuple((t, r) for t in TASKS for r in REGIMES)
BUDGETS = {
    "smoke": _budget("smoke", (("hist", "base"),), ("hist",), 256, 2, batch_size=128,
                     eval_every=1),
    "target": _budget("target", (("double_hist", "bigvocab"),), ("hist", "double_hist"), 16000,
                      20),
    "small": _budget("small", ALL_CELLS, TASKS, 4000, 20),
    "paper": _budget("paper", ALL_CELLS, TASKS, 16000, 250, eval_every=10),
}
"""Per budget: ``cells`` (task, regime) pairs, ``lengthgen`` tasks, training inputs, epochs,
batch size, seeds (counted from the ``seed`` given), evaluation period (epochs) and ``arch``:
layers, heads and MLPs per layer (each half categorical, half numerical)."""


def budget(name: str) -> Budget:
    """The preset ``name`` of :data:`BUDGETS`."""
    return preset(name, BUDGETS)


def learn_config(task: str, vocab_size: int, max_len: int, budget: Budget, seed: int,
                 epochs: int | None = None) -> LearnConfig:
    """The training settings of one run (paper optimisation settings, ``budget["arch"]``)."""
    layers, heads, mlps = budget["arch"]
    return LearnConfig(task=task, n_layers=layers, n_cat_heads=heads // 2,
                       n_num_heads=heads - heads // 2, n_cat_mlps=mlps // 2,
                       n_num_mlps=mlps - mlps // 2, epochs=epochs or budget["epochs"],
                       batch_size=budget["batch_size"], lr=0.02, grad_clip=1.0, samples=4,
                       tau_start=3.0, tau_end=0.1,
                       eval_every=budget["eval_every"], seed=seed, vocab_size=vocab_size,
                       max_len=max_len, n_samples=20000, data_seed=seed)


def build(cfg: LearnConfig, variant: str, vocab_size: int, max_len: int, n_classes: int
          ) -> CountingProgramModel:
    """A counting-augmented model for ``cfg`` with context ``max_len`` and ``n_classes``."""
    return CountingProgramModel(CountingConfig(
        vocab_size=vocab_size, max_len=max_len, n_classes=n_classes, n_layers=cfg.n_layers,
        n_cat_heads=cfg.n_cat_heads, n_num_heads=cfg.n_num_heads, n_cat_mlps=cfg.n_cat_mlps,
        n_num_mlps=cfg.n_num_mlps, d_mlp=cfg.d_mlp, seed=cfg.seed, **variant_flags(variant)))


class Paused(Exception):
    """A run stopped for time (:func:`train_run`'s ``seconds``) with its state kept; it carries
    the summary the command reports, and no record is written for the run."""


def train_run(task: str, regime: str, variant: str, budget: Budget, seed: int,
              epochs: int | None = None, test_regime: str | None = None,
              out: Path | None = None, seconds: float | None = None) -> dict[str, Any]:
    """Train one model in ``regime`` and test it there and, if given, on ``test_regime``'s test
    split (the model's context is sized for the longer of the two); ``out``: where to save the
    model (``.npz`` + ``.json``). ``gate_rule[L]`` names the expert the discrete gate picks for
    every input of ``L`` content tokens (None: it depends on the input).

    A paused state of this run beside ``out`` (:func:`~tpcore.pipelines.learn.paused_dir`) is
    resumed from; with ``seconds`` (needs ``out``) the run stops at the first step ending that
    long after the call began, keeps its state there and raises :class:`Paused`."""
    (v, n) = REGIMES[regime]
    cfg = learn_config(task, v, n, budget, seed, epochs)
    data = learn.make_data(cfg)
    data.splits["train"] = {k: a[: budget["n_train"]] for k, a in data.splits["train"].items()}
    shifted = None
    if test_regime is not None:
        tv, tn = REGIMES[test_regime]
        if tv != v:
            raise TpcoreError(f"length test needs the same vocabulary; {regime} has |V|={v}, "
                              f"{test_regime} |V|={tv}")
        shifted = learn.make_data(dataclasses.replace(cfg, max_len=tn))
        if shifted.classes[: len(data.classes)] != data.classes or shifted.vocab != data.vocab:
            raise TpcoreError(f"{task}: classes or vocabulary differ between N={n} and N={tn}")
    ref = shifted or data
    model = build(cfg, variant, len(ref.vocab), ref.max_len, len(ref.classes))
    config = run_config(task, regime, variant, budget, seed, epochs, test_regime)
    paused = None if out is None else RunDir(paused_dir(out), config, remedy=SEPARATE)
    state = load_state(paused.path) if paused is not None and paused.finished else None
    start = time.perf_counter()
    model, metrics = learn.train(cfg, data, quiet=False, model=model, resume=state,
                                 pause_seconds=None if out is None else seconds)
    if "paused" in metrics:
        with paused.build() as tmp:
            save_state(metrics["paused"], tmp)
        done = metrics["paused"].step
        raise Paused(f"paused {out.name.removesuffix('-model.npz')} at step {done:,} of "
                     f"{learn.steps_per_epoch(cfg, data) * cfg.epochs:,}")
    row = {"task": task, "regime": regime, "variant": variant, "seed": seed,
           "vocab_size": v, "max_len": n, "n_train": len(data.splits["train"]["tokens"]),
           "epochs": cfg.epochs, "steps": metrics["steps"],
           "ms_per_step": metrics["ms_per_step"],
           "seconds": time.perf_counter() - start + (0.0 if state is None else state.seconds),
           "selected_at_step": metrics["selected_at_step"], "history": metrics["history"],
           "test": metrics["test"], "val": metrics["val"],
           "gate_usage": gate_usage(model, data.splits["test"]),
           "histogram_heads": histogram_heads(model, data.vocab),
           "prefix_ablation": prefix_ablation(model, data.splits["test"], data.vocab),
           "config": cfg.settings()}
    if model.expert_network is not None:
        rule = gate_rule(model.expert_network, ref.vocab, ref.max_len)
        row["gate_rule"] = {str(k): c for k, c in rule.items()}
        row["program_counting"] = describe(model, ref.vocab)
    if out is not None:
        save(model, out, {"task": task, "vocab": list(data.vocab), "classes": list(ref.classes)})
        if paused is not None and paused.path.exists():
            shutil.rmtree(paused.path)
    if shifted is not None:
        row["test_regime"] = test_regime
        row["shifted_test"] = evaluate_supervised(model, shifted.splits["test"])
        longest = int(data.splits["train"]["mask"].sum(axis=1).max())
        row["longer_only"] = longer_only(model, shifted.splits["test"], longest,
                                         train_classes(data.splits["train"]))
        row["range_shift"] = range_shift(model, data.splits["test"], shifted.splits["test"])
        row["shifted_gate_usage"] = gate_usage(model, shifted.splits["test"])
    return row


def run_arch(row: dict[str, Any]) -> list[int]:
    """Layers, heads and MLPs per layer of a saved run."""
    c = row["config"]
    return [c["n_layers"], c["n_cat_heads"] + c["n_num_heads"], c["n_cat_mlps"] + c["n_num_mlps"]]


def run_config(task: str, regime: str, variant: str, budget: Budget, seed: int,
               epochs: int | None = None, test_regime: str | None = None) -> dict[str, Any]:
    """The configuration a saved run records (:func:`tpcore.rundir.cached`): its training
    settings, regime, variant, number of training inputs and the regime of its length test."""
    v, n = REGIMES[regime]
    return {"learn": learn_config(task, v, n, budget, seed, epochs).settings(),
            "regime": regime, "variant": variant, "n_train": budget["n_train"],
            "test_regime": test_regime}


def saved_runs(out: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every finished run under ``out/runs``: the table's cells and the length tests."""
    rows = [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*-s*.json"))
            if not p.name.endswith("-model.json")]
    return ([r for r in rows if "test_regime" not in r],
            [r for r in rows if "test_regime" in r])


def select_seeds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (task, regime, variant, test regime), the run with the best validation token
    accuracy (the first seed on a tie), with ``seeds``: every seed run for it."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        key = (r["task"], r["regime"], r["variant"], r.get("test_regime"))
        groups.setdefault(key, []).append(r)
    picked = []
    for runs in groups.values():
        runs = sorted(runs, key=lambda r: r["seed"])
        best = max(runs, key=lambda r: r["val"]["acc"])
        picked.append({**best, "seeds": [r["seed"] for r in runs]})
    return picked


RECORD_ONLY = ("history", "record", "config", "gate_rule", "program_counting")
"""What a run's own record (``runs/NAME.json``) keeps and ``counting.json`` leaves out: its
training curve, run record, configuration, gate rule and decompiled counting program."""


def _summary(row: dict[str, Any]) -> dict[str, Any]:
    """A run's row for ``counting.json``: all but :data:`RECORD_ONLY`."""
    return {k: v for k, v in row.items() if k not in RECORD_ONLY}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f}"


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: test token accuracy (sequence accuracy) per cell and variant, beside the
    paper's Table 1."""
    by = {(r["task"], r["regime"], r["variant"]): r for r in rows}
    head = " | ".join(f"{v} tok (seq)" for v in VARIANTS)
    lines = [f"| task | regime | {head} | paper ({' / '.join(PAPER_VARIANTS)}) |",
             "|---|---|" + "---|" * len(VARIANTS) + "---|"]
    for task, regime in dict.fromkeys((r["task"], r["regime"]) for r in rows):
        cells = []
        for v in VARIANTS:
            r = by.get((task, regime, v))
            seeds = "" if r is None or len(r.get("seeds", ())) < 2 else \
                f" [seed {r['seed']} of {len(r['seeds'])}]"
            cells.append("-" if r is None else
                         f"{_pct(r['test']['acc'])} ({_pct(r['test']['seq_acc'])}){seeds}")
        paper = " / ".join(f"{x:.2f}" for x in PAPER[(task, regime)])
        v, n = REGIMES[regime]
        lines.append(f"| {task} | {regime} (V={v}, N={n}) | {' | '.join(cells)} | {paper} |")
    return "\n".join(lines)


def gate_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: share of test sequences routed to each expert (runs with the expert network;
    empty when there are none)."""
    gated = [r for r in rows if r["gate_usage"]]
    lines = ["| task | regime | variant | " + " | ".join(EXPERTS) + " |",
             "|---|---|---|" + "---|" * len(EXPERTS)]
    for r in gated:
        lines.append(f"| {r['task']} | {r['regime']} | {r['variant']} | "
                     + " | ".join(f"{r['gate_usage'][e]:.2f}" for e in EXPERTS) + " |")
    return "\n".join(lines) if gated else ""


def runs_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: every run, seed by seed, with the heads that count the query's own token."""
    lines = ["| task | regime | variant | seed | val tok | test tok (seq) | selected at step | "
             "heads counting the own token | test tok, content prefix counts 0 | and <s> "
             "count 1 |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["task"], r["regime"], r["variant"], r["seed"])):
        heads = ", ".join(r["histogram_heads"]) if "histogram_heads" in r else "not recorded"
        ablation = r.get("prefix_ablation", {})
        lines.append(f"| {r['task']} | {r['regime']} | {r['variant']} | {r['seed']} | "
                     f"{_pct(r['val']['acc'])} | {_pct(r['test']['acc'])} "
                     f"({_pct(r['test']['seq_acc'])}) | {r['selected_at_step']} | "
                     f"{heads or '-'} | {_pct(ablation.get('content_zero', {}).get('acc'))} | "
                     f"{_pct(ablation.get('bos_one', {}).get('acc'))} |")
    return "\n".join(lines)


def _shift_text(shift: dict[str, list[float]]) -> str:
    return ", ".join(f"{k.removesuffix('_outputs')} {a:.0f}->{b:.0f}"
                     for k, (a, b, _) in shift.items()) or "-"


def length_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: trained at N = 8, tested at N = 8 and N = 16 (token and sequence accuracy);
    "longer" inputs have more content tokens than any training input (7, or 6 for sort and
    reverse, whose N counts ``</s>`` too)."""
    lines = ["| task | variant | N=8 tok (seq) | N=16 tok (seq) | only longer inputs tok (seq) "
             "| longer, trained positions only: tok | longer, targets seen in training: tok "
             "(share) | expert choice at N=16 | numerical variables beyond their N=8 range |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t, s, lo = r["test"], r["shifted_test"], r.get("longer_only", {})
        usage = r["shifted_gate_usage"]
        gate = ", ".join(f"{k} {v:.2f}" for k, v in usage.items() if v > 0) if usage else "-"
        lines.append(f"| {r['task']} | {r['variant']} | {_pct(t['acc'])} ({_pct(t['seq_acc'])}) "
                     f"| {_pct(s['acc'])} ({_pct(s['seq_acc'])}) | {_pct(lo.get('acc'))} "
                     f"({_pct(lo.get('seq_acc'))}) | {_pct(lo.get('acc_trained_positions'))} "
                     f"| {_pct(lo.get('acc_seen_classes'))} "
                     f"({_pct(lo.get('share_seen_classes'))}) | {gate} | "
                     f"{_shift_text(r.get('range_shift', {}))} |")
    return "\n".join(lines)


CLI = Reproduction(
    "Modular Counts paper, Table 1 (none / prefix / experts / both x tasks x regimes) + length "
    "test", "results/counting", "target",
    "smoke: pipeline check; target: double_hist at |V|=N=16 and the length test on "
    "hist/double_hist; small: all cells, 4,000 inputs, 20 epochs; paper: all cells, 16,000 "
    "inputs, 250 epochs",
    (EPOCHS,
     Option("--variants", "subset of none prefix experts both running (running: the running "
            "count of the own token, the PrefixSumCounts of the paper's code)", nargs="+"),
     Option("--cells", "(task, regime) cells instead of the budget's, e.g. double_hist:bigvocab",
            "cell", nargs="+", metavar="TASK:REGIME"),
     Option("--lengthgen", "length-test tasks instead of the budget's (none given: skip it)",
            nargs="*", metavar="TASK"),
     Option("--seeds", "seeds instead of the budget's (--seed)", "index", nargs="+"),
     Option("--arch", "architecture instead of 3 4 2 (heads and MLPs per layer, half "
            "categorical, half numerical)", "count", nargs=3,
            metavar=("LAYERS", "HEADS", "MLPS")),
     Option("--hours", "stop at the first training step after H hours in this call, keeping "
            "the run's state; the same command goes on from there", "scale", metavar="H")))
"""``tpcore reproduce counting``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int, epochs: int | None = None,
        variants: tuple[str, ...] | None = None,
        cells: tuple[tuple[str, str], ...] | None = None,
        lengthgen: tuple[str, ...] | None = None, seeds: tuple[int, ...] | None = None,
        arch: tuple[int, int, int] | None = None, hours: float | None = None
        ) -> dict[str, Any]:
    """Run ``budget`` (see the module docstring) into ``out`` with ``seed``; ``cells``/
    ``lengthgen``/``variants`` restrict it, ``epochs``, ``seeds`` and ``arch`` (layers, heads,
    MLPs per layer) replace the budget's. After every run, writes ``counting.json`` and
    ``counting.md`` from every run saved in ``out`` (so commands with other seeds or cells add
    to one table; per cell the seed with the best validation accuracy is shown) and the list of
    commands behind them; ``seconds`` is the training time of all those runs. ``hours``: stop
    at the first training step after that long (the run's state kept, :func:`train_run`);
    the result's ``paused`` then says where."""
    began = time.monotonic()
    if hours is not None and not hours >= 0:
        raise TpcoreError(f"--hours {hours}: expected a number of hours >= 0")
    variants = tuple(variants or VARIANTS)
    for v in variants:
        variant_flags(v)
    if arch and (len(arch) != 3 or min(arch) < 1):
        raise TpcoreError(f"arch must be three numbers >= 1 (layers, heads, MLPs per "
                          f"layer), got {list(arch)}")
    given = budget
    b = Budget(budget.name, {**budget.sizes,
                             "seeds": tuple(seeds or range(seed, seed + budget["n_seeds"])),
                             "arch": tuple(arch or budget["arch"])})
    cells = b["cells"] if cells is None else cells
    lengthgen = b["lengthgen"] if lengthgen is None else lengthgen
    bad = [c for c in cells if c[0] not in TASKS or c[1] not in REGIMES]
    bad += [(t, "base") for t in lengthgen if t not in TASKS]
    if bad:
        raise TpcoreError(f"unknown task/regime {bad[0]}; tasks {TASKS}, regimes {tuple(REGIMES)}")
    out = Path(out)
    check_out_dir(out / "runs")
    parts = [f"tpcore reproduce counting --budget {budget.name}",
             f"--epochs {epochs}" if epochs else "",
             f"--variants {' '.join(variants)}" if variants != VARIANTS else "",
             f"--cells {' '.join(f'{t}:{r}' for t, r in cells)}" if cells != b["cells"] else "",
             f"--lengthgen {' '.join(lengthgen)}".strip() if lengthgen != b["lengthgen"] else "",
             f"--seed {seed}" if seed and not seeds else "",
             f"--seeds {' '.join(map(str, seeds))}" if seeds else "",
             f"--arch {' '.join(map(str, arch))}" if arch else "", f"--out {out}"]
    command = " ".join(x for x in parts if x)
    runs, path = out / "runs", out / "counting.json"
    want = (epochs or b["epochs"], list(b["arch"]))
    for r in sum(saved_runs(out), []):
        if (r["epochs"], run_arch(r)) != want:
            raise TpcoreError(f"{out} holds {r['epochs']}-epoch runs with --arch "
                              f"{' '.join(map(str, run_arch(r)))}, not {want[0]} with --arch "
                              f"{' '.join(map(str, want[1]))}; {SEPARATE}")

    def write() -> dict[str, Any]:
        old = json.loads(path.read_text()) if path.is_file() else {}
        rows, lengths = saved_runs(out)
        cells, tests = select_seeds(rows), select_seeds(lengths)
        commands = [c for c in old.get("commands", []) if c != command] + [command]
        result = {"budget": given.name, "commands": commands, "settings": dict(b.sizes),
                  "epochs": epochs or b["epochs"], "arch": list(b["arch"]), "target": TARGET,
                  "cells": [_summary(r) for r in cells],
                  "lengthgen": [_summary(r) for r in tests],
                  "seconds": sum(r["seconds"] for r in rows + lengths)}
        write_json(path, result)
        gains = module_gains(cells, PAPER_ACC)
        write_text(out / "counting.md", "\n\n".join(
            ["Commands:\n" + "\n".join(f"- `{c}`" for c in commands)]
            + [t for t in (table(cells) if cells else "",
                           f"{gains.cells_text()}." if cells else "",
                           f"{gains.text()}." if gains.settings else "",
                           gate_table(cells) if cells else "",
                           length_table(tests) if tests else "",
                           runs_table(rows) if len(rows) > len(cells) else "") if t]) + "\n")
        return result

    plan = []  # (file name, task, regime, variant, seed, test regime), in training order
    for s in b["seeds"]:
        plan += [(f"{t}-{r}-{v}-s{s}", t, r, v, s, None) for t, r in cells for v in variants]
        plan += [(f"length-{t}-{v}-s{s}", t, "base", v, s, "longer") for t in lengthgen
                 for v in variants]
    for name, task, regime, v, s, test in plan:  # refuse other settings before training
        config = run_config(task, regime, v, b, s, epochs, test)
        saved(runs / f"{name}.json", config, SEPARATE)
        RunDir(paused_dir(runs / f"{name}-model.npz"), config, remedy=SEPARATE)
    paused, trained = None, False
    for name, task, regime, v, s, test in plan:
        config, model = run_config(task, regime, v, b, s, epochs, test), runs / f"{name}-model.npz"
        if saved(runs / f"{name}.json", config, SEPARATE) is not None:
            continue
        left = None if hours is None else max(0.0, 3600 * hours - (time.monotonic() - began))
        if left == 0 and trained:
            paused = f"stopped after {hours:g} h, before starting {name}"
            break
        try:
            cached(runs / f"{name}.json", config,
                   partial(train_run, task, regime, v, b, s, epochs, test_regime=test,
                           out=model, seconds=left), remedy=SEPARATE)
        except Paused as stop:
            paused = str(stop)
            break
        trained = True
        write()
    result = write()
    if paused is not None:
        result["paused"] = f"{paused}; the same command goes on from there"
    draw_or_note(lambda: figures(result, out))
    return result


def figures(result: dict[str, Any], out: Path) -> list[Path]:
    """``counting.png``: test token accuracy (%) per task and regime (rows) and variant
    (columns), tpcore's selected seeds beside the paper's Table 1; ``counting_modules.png``:
    the same as bars per setting, with the base against the best module
    (:func:`tpcore.experiments.counting_figures.modules_figure`); ``counting_routing.png``:
    the expert gates' routing (:func:`~tpcore.experiments.counting_figures.routing_figure`;
    only with gated runs). No cells: no figure."""
    cells = result["cells"]
    if not cells:
        return []
    keys = list(dict.fromkeys((r["task"], r["regime"]) for r in cells))
    by = {(r["task"], r["regime"], r["variant"]): r for r in cells}
    ours = np.array([[100 * by[(t, g, v)]["test"]["acc"] if (t, g, v) in by else np.nan
                      for v in VARIANTS] for t, g in keys])
    paper = np.array([[PAPER[key][PAPER_COLUMN[v]] for v in VARIANTS] for key in keys],
                     dtype=float)
    rows = [f"{t}, {g} (V={REGIMES[g][0]}, N={REGIMES[g][1]})" for t, g in keys]
    arch = f", --arch {' '.join(map(str, result['arch']))}" if result.get("arch") else ""
    ours_title = f"tpcore (budget {result['budget']}, {result['epochs']} epochs{arch})"
    paths = [table_heatmaps([(ours_title, ours), ("paper (Table 1, 250 epochs)", paper)], rows,
                            list(VARIANTS), out / "counting.png", "Modular counting: test token "
                            "accuracy per counting module", "test token accuracy (%)", 0, 100,
                            col_title="counting module"),
             modules_figure(cells, PAPER_ACC, out / "counting_modules.png", ours_title)]
    if any(r.get("gate_usage") for r in cells):
        paths.append(routing_figure(cells, out / "counting_routing.png",
                                    f"Expert gate routing on the test set, {ours_title}"))
    return paths


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce counting`` prints."""
    done = f"wrote {out}/counting.md and counting.json ({result['seconds']:.0f} s)"
    return done if "paused" not in result else f"{done}\n{result['paused']}"

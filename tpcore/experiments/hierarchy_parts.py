"""The sweeps and the k_train probes of ``tpcore reproduce hierarchy``: what its parts
``root-sizes`` (the paper's Fig. 3 as a trend over the training-set size P), ``layers``
(Fig. 8: 1..4 attention blocks on unfiltered data), ``grammars`` (Fig. 9: the grammars of seeds
1, 15 and 31) and ``probe-k`` (Fig. 14 right: last-layer probes of each k_train's root
classifier; ``mlm-k`` adds those of each k_train's MLM model) train and record, their tables and
their figures.

:func:`tpcore.experiments.hierarchy.run` trains the runs a sweep plans (:func:`sweep_plan`)
through :func:`~tpcore.experiments.against_bp.train_against_bp` and records each finished one
as a row (:func:`summary`) under the sweep's key (:data:`SWEEPS`) of ``hierarchy_<budget>.json.gz``.
Every run of a sweep trains the budget's steps whatever its P: fewer training trees are seen
more often, so the curves measure data, not training length.

Figures (:func:`figures`): ``hierarchy_<budget>_sizes.png``, accuracy on unfiltered (k = 0)
test data against P, a line per k_train beside BP_k_train's accuracy (dashed);
``hierarchy_<budget>_in_sample.png``, the same on each k_train's own test data beside the optimum
there, BP_k_train's accuracy (the paper's Fig. 10, Appendix D.3);
``hierarchy_<budget>_layers.png``, the same for each number of blocks (k_train = 0);
``hierarchy_<budget>_grammars.png``, a ``sizes`` panel per grammar; and
``hierarchy_<budget>_probe_k.png``, the last-layer probe accuracy per k_train and ancestor level,
a panel per task (root classifier, MLM).

Host-side orchestration (NumPy directly for bookkeeping).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.analysis.plots import Level, Line, Panel, panels_figure, table_heatmaps
from tpcore.experiments.against_bp import TreeRun
from tpcore.experiments.tree_grammar import PAPER

SWEEPS = {"root-sizes": "root_sizes", "layers": "layers", "grammars": "grammars"}
"""Each sweep part and the key of its rows in ``hierarchy_<budget>.json.gz``."""
PROBES_K = "probes_k"
"""The key of the last-layer probe rows (``probe-k`` and ``mlm-k``): ``dict(model=the probed
run's settings, probe=dict(n_train=its training sequences, epochs=...), acc=[per level])``."""
TASKS = {"root": "root classifier", "mlm": "MLM model"}
"""The probed models' tasks, in the order of the probe tables, and their names there."""
LAYERS = (1, 2, 3, 4)
"""Attention blocks of the ``layers`` runs (the paper's Fig. 8: n_L = 1..4)."""
GRAMMAR_SEEDS = (1, 15, 31)
"""Grammars of the ``grammars`` runs: the paper's Fig. 9, drawn as its code draws them."""


def default_sizes(P: int) -> tuple[int, ...]:
    """Three training-set sizes up to a budget's ``P``: P/16, P/4 and P."""
    return (P // 16, P // 4, P)


@dataclass(frozen=True)
class Planned:
    """One run of a sweep: its settings, the seed of its grammar
    (:func:`~tpcore.experiments.tree_grammar.paper_grammar`) and the name of its saved model
    (and paused state) under ``runs/hierarchy``."""

    run: TreeRun
    grammar_seed: int
    name: str


def dropout_tag(dropout: float) -> str:
    """What the names of saved models of runs with ``dropout`` carry (nothing without), with
    no dot in it: ``_drop0p1`` for 0.1."""
    return f"_drop{dropout:g}".replace(".", "p") if dropout else ""


def sweep_plan(part: str, budget: str, cfg: dict[str, Any], seed: int, sizes: Sequence[int],
               k_train: Sequence[int], n_layers: Sequence[int],
               grammar_seeds: Sequence[int], dropout: float = 0.0) -> list[Planned]:
    """The root-classification runs of the sweep ``part`` at the budget sizes ``cfg``, each on
    ``sizes`` training trees: ``root-sizes`` every ``k_train`` on the paper's grammar,
    ``layers`` k_train = 0 with each of ``n_layers`` blocks (l of them: the standard run),
    ``grammars`` every ``k_train`` on each of ``grammar_seeds``; every run with ``dropout``.
    Model names start with ``<budget>_<part>``, so no two parts share a saved model."""
    def run(k: int, P: int, n: int | None = None) -> TreeRun:  # n: blocks, None for l
        return TreeRun(task="root", k_train=k, seed=seed, n_layers=n, dropout=dropout,
                       **dict(cfg, P=P))

    paper, tag = PAPER["grammar_seed"], f"{dropout_tag(dropout)}_seed{seed}"
    if part == "root-sizes":
        return [Planned(run(k, P), paper, f"{budget}_root-sizes_k{k}_P{P}{tag}")
                for k in k_train for P in sizes]
    if part == "layers":
        return [Planned(run(0, P, n), paper,
                        f"{budget}_layers_n{n}_P{P}{tag}") for n in n_layers for P in sizes]
    return [Planned(run(k, P), g, f"{budget}_grammars_g{g}_k{k}_P{P}{tag}")
            for g in grammar_seeds for k in k_train for P in sizes]


def summary(record: dict[str, Any], grammar_seed: int) -> dict[str, Any]:
    """The row a sweep keeps of a finished run's ``record``: its settings and grammar, the
    final accuracy on every k_test, BP's accuracies on the same test sets
    (``bp_acc[k_test] = [BP_k_train, BP_k_test]``), KL(BP_k_train || model) on the training k's
    test data, the training time and the parameters."""
    run, last = record["run"], record["history"][-1]
    kt = str(run["k_train"])
    return dict(run=run, grammar_seed=grammar_seed,
                acc={str(k): last[str(k)]["acc"] for k in range(run["l"] + 1)},
                bp_acc=record["bp_acc"], kl=last[kt][f"bp{kt}"]["kl"],
                train_seconds=record["train_seconds"], n_parameters=record["n_parameters"])


def finished_row(result: dict[str, Any], settings: dict[str, Any],
                 grammar_seed: int) -> dict[str, Any] | None:
    """The row of a finished run of ``settings`` on the grammar of ``grammar_seed`` that
    ``result`` already holds, in any sweep or (the paper's grammar) among its full runs that
    record BP's accuracies; None when there is none."""
    for key in SWEEPS.values():
        for row in result.get(key, ()):
            if row["run"] == settings and row["grammar_seed"] == grammar_seed:
                return row
    if grammar_seed == PAPER["grammar_seed"]:
        for rec in result["runs"]:
            if rec["run"] == settings and "bp_acc" in rec:
                return summary(rec, grammar_seed)
    return None


def add_row(result: dict[str, Any], key: str, row: dict[str, Any]) -> None:
    """Put ``row`` in the rows ``result[key]`` in place of the row of the same run and grammar
    (of the same model: :data:`PROBES_K`)."""
    same = ("model",) if key == PROBES_K else ("run", "grammar_seed")
    result[key] = [r for r in result.get(key, []) if any(r[k] != row[k] for k in same)] + [row]


def probe_text(probe: dict[str, int]) -> str:
    """How the probes of a record were trained, in words."""
    return f"{probe['epochs']} epochs of {probe['n_train']} sequences"


def _probe_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The last-layer probe rows, by task (:data:`TASKS`) and then k_train."""
    return sorted(result[PROBES_K], key=lambda r: (list(TASKS).index(r["model"]["task"]),
                                                   r["model"]["k_train"]))


def _order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r["grammar_seed"], r["run"]["n_layers"], r["run"]["k_train"],
                                       r["run"]["P"]))


def markdown(result: dict[str, Any]) -> str:
    """The tables of the sweeps and the k_train probes that ``result`` holds."""
    parts = []
    for key, title in (("root_sizes", "Root classification against the number of training "
                        "trees P (Fig. 3 as a trend over P)"),
                       ("grammars", "Root classification on other grammars (Fig. 9)")):
        if not result.get(key):
            continue
        seeds = key == "grammars"
        parts.append(f"\n### {title}\n\nAccuracy on unfiltered (k = 0) test data; every run "
                     "trains the budget's steps.\n\n|" + " grammar seed |" * seeds +
                     " k_train | P | model acc on k = 0 | BP_k_train acc on k = 0 | gap | "
                     "in-sample acc (optimum) | KL(BP_k_train ‖ model), in-sample | training "
                     "time |\n|" + "---|" * (8 + seeds) + "\n")
        for r in _order(result[key]):
            kt, P = r["run"]["k_train"], r["run"]["P"]
            acc, bp, own = r["acc"]["0"], r["bp_acc"]["0"][0], r["bp_acc"][str(kt)][1]
            parts.append(f"| {r['grammar_seed']} " * seeds + f"| {kt} | {P} | {acc:.4f} | "
                         f"{bp:.4f} | {100 * (acc - bp):+.1f} pts | {r['acc'][str(kt)]:.4f} "
                         f"({own:.4f}) | {r['kl']:.4f} | {r['train_seconds']:.0f} s |\n")
    if result.get("layers"):
        parts.append("\n### Root classification with 1..n attention blocks (Fig. 8; k_train = 0)"
                     "\n\nAccuracy on unfiltered (k = 0) test data (BP_0: 1 by construction)."
                     "\n\n| blocks | P | parameters | model acc on k = 0 | KL(BP_0 ‖ model) | "
                     "training time |\n|---|---|---|---|---|---|\n")
        for r in _order(result["layers"]):
            parts.append(f"| {r['run']['n_layers']} | {r['run']['P']} | {r['n_parameters']} | "
                         f"{r['acc']['0']:.4f} | {r['kl']:.4f} | {r['train_seconds']:.0f} s |\n")
    if result.get(PROBES_K):
        l = result["config"]["l"]
        parts.append("\n### Last-layer ancestor probes of the models trained on each k_train "
                     "(Fig. 14 right)\n\nThe stream after the last block of the model trained "
                     "on k_train, probed per token on unfiltered (k = 0) data. Columns: tree "
                     "level of the ancestor (0 = root, l-1 = parent).\n\n| model | k_train | " +
                     " | ".join(f"level {m}" for m in range(l)) + " | probes trained |\n|"
                     + "---|" * (l + 3) + "\n")
        for r in _probe_rows(result):
            parts.append(f"| {TASKS[r['model']['task']]} | {r['model']['k_train']} | "
                         + " | ".join(f"{x:.3f}" for x in r["acc"])
                         + f" | {probe_text(r['probe'])} |\n")
    return "".join(parts)


def _sizes_panel(rows: list[dict[str, Any]], title: str, in_sample: bool = False) -> Panel:
    """Accuracy against P on k = 0 test data (``in_sample``: on each k_train's own test data), a
    line per k_train, BP_k_train's on the same data dashed beside it in its colour."""
    lines, levels = [], []
    for kt in sorted({r["run"]["k_train"] for r in rows}):
        mine = sorted((r for r in rows if r["run"]["k_train"] == kt), key=lambda r: r["run"]["P"])
        k = str(kt) if in_sample else "0"
        lines.append(Line(f"transformer, k_train = {kt}", [r["run"]["P"] for r in mine],
                          [r["acc"][k] for r in mine], color=f"C{kt}"))
        levels.append(Level(f"BP_{kt}", mine[0]["bp_acc"][k][0], "--", f"C{kt}"))
    return Panel(title, lines, levels)


def figures(result: dict[str, Any], out: Path) -> list[Path]:
    """Draw the figures of the sweeps and probes ``result`` holds (see the module docstring)
    into ``out``; none for a part not run."""
    name, l = f"hierarchy_{result['budget']}", result["config"]["l"]
    axes = dict(xlabel="training trees P (log scale)", ylabel="accuracy on k = 0 test data",
                logx=True, ylim=(0, 1.02), legend="lower right")
    paths = []

    def sizes(rows: list[dict[str, Any]]) -> list[int]:
        return sorted({r["run"]["P"] for r in rows})

    if result.get("root_sizes"):
        rows = [r for r in result["root_sizes"] if r["grammar_seed"] == PAPER["grammar_seed"]]
        paths.append(panels_figure(
            [_sizes_panel(rows, "the paper's grammar")], out / f"{name}_sizes.png",
            f"Root classification (l = {l}) against the number of training trees, trained on "
            "k_train: accuracy on unfiltered data", xticks=sizes(rows), **axes))
        paths.append(panels_figure(
            [_sizes_panel(rows, "the paper's grammar", in_sample=True)],
            out / f"{name}_in_sample.png",
            f"Root classification (l = {l}) against the number of training trees, trained on "
            "k_train: accuracy on k_train's own test data (in-sample)", xticks=sizes(rows),
            **(axes | {"ylabel": "accuracy on k_train test data"})))
    if result.get("layers"):
        rows = result["layers"]
        lines = []
        for i, n in enumerate(sorted({r["run"]["n_layers"] for r in rows})):
            mine = sorted((r for r in rows if r["run"]["n_layers"] == n),
                          key=lambda r: r["run"]["P"])
            lines.append(Line(f"{n} attention block{'s' * (n > 1)}",
                              [r["run"]["P"] for r in mine], [r["acc"]["0"] for r in mine],
                              color=f"C{i}"))
        paths.append(panels_figure(
            [Panel("k_train = 0", lines, [Level("BP_0 (exact)", rows[0]["bp_acc"]["0"][0])])],
            out / f"{name}_layers.png",
            f"Root classification (l = {l}) with 1..n attention blocks on unfiltered data",
            xticks=sizes(rows), **axes))
    if result.get("grammars"):
        seeds = sorted({r["grammar_seed"] for r in result["grammars"]})
        paths.append(panels_figure(
            [_sizes_panel([r for r in result["grammars"] if r["grammar_seed"] == g],
                          f"grammar seed {g}") for g in seeds], out / f"{name}_grammars.png",
            f"Root classification (l = {l}) on other grammars, trained on k_train: accuracy on "
            "unfiltered data", xticks=sizes(result["grammars"]), **(axes | {"legend": "figure"})))
    if result.get(PROBES_K):
        rows = _probe_rows(result)
        ks = sorted({r["model"]["k_train"] for r in rows})
        tables = []
        for task in (t for t in TASKS if any(r["model"]["task"] == t for r in rows)):
            m = np.full((len(ks), l), np.nan)
            for r in (r for r in rows if r["model"]["task"] == task):
                m[ks.index(r["model"]["k_train"])] = 100 * np.asarray(r["acc"])
            tables.append((f"{TASKS[task]}, stream after the last block", m))
        paths.append(table_heatmaps(
            tables, [f"k_train = {k}" for k in ks], [f"level {m}" for m in range(l)],
            out / f"{name}_probe_k.png",
            f"Ancestor probes of the models trained on k_train (l = {l}), unfiltered data",
            "probe accuracy (%)", 0.0, 100.0, "ancestor level (0 = root)"))
    return paths

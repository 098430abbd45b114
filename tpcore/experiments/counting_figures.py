"""The module comparison and the expert routing of ``tpcore reproduce counting``
(:mod:`tpcore.experiments.counting`), as counts and figures, drawn from the selected runs
(``cells`` of ``counting.json``: dicts with ``task``, ``regime``, ``variant``, ``test["acc"]``
and, for runs with the expert network, ``gate_usage``).

- :func:`module_gains`: Section 5.3 of "Modular Counts": in how many (task, regime)
  *settings* the best module (:data:`MODULES`) reaches the base model's test accuracy, for
  tpcore's finished settings and for the paper over the same ones (13 of 15 in the paper);
- :func:`modules_figure`: Figs. 2-5 of the paper in one PNG, the base model beside each module
  per setting (bars, tpcore above the paper) and the base against the best module (Fig. 5's
  scatter);
- :func:`routing_figure`: Section 6.3, the share of test sequences the discrete gate routes to
  each expert (:data:`tpcore.counts.EXPERTS`), per setting, for the experts and both variants.

Cells not run are drawn as absent, never filled in. Host-only code (NumPy, matplotlib).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.analysis.plots import pyplot, save_png
from tpcore.counts import EXPERTS
from tpcore.models.counting import VARIANTS

Setting = tuple[str, str]
"""A (task, regime) pair: one row of the paper's Table 1."""
MODULES = ("prefix", "experts", "both")
"""The modules whose best Section 5.3 compares with the base model (``none``). The running
count is drawn beside them but not counted: the paper's runs had one PrefixSumCounts column."""
COLORS = {"none": "0.45", "prefix": "tab:blue", "experts": "tab:orange", "both": "tab:green",
          "running": "tab:purple"}
"""Bar colour per variant (:data:`tpcore.models.counting.VARIANTS`)."""


def accuracies(cells: Sequence[Mapping[str, Any]]) -> dict[Setting, dict[str, float]]:
    """Test token accuracy (%) per setting and variant of ``cells``, settings in their order."""
    acc: dict[Setting, dict[str, float]] = {}
    for r in cells:
        acc.setdefault((r["task"], r["regime"]), {})[r["variant"]] = 100 * r["test"]["acc"]
    return acc


def reaches_base(acc: Mapping[str, float]) -> bool:
    """Whether the best of :data:`MODULES` in ``acc`` (variant -> accuracy) is at or above
    ``acc["none"]`` (a tie counts)."""
    return max(acc[m] for m in MODULES) >= acc["none"]


@dataclass(frozen=True)
class Gains:
    """Section 5.3's count. ``settings``: those tpcore finished (the base and every one of
    :data:`MODULES` run); ``ours`` and ``paper``: those of them where the best module is at or
    above the base, in tpcore's runs and in the paper's Table 1; ``paper_all`` of ``n_paper``:
    the paper's count over all its settings; ``cells``: how many of the paper's cells (its
    settings, each without a module and with each of :data:`MODULES`) tpcore has run."""

    settings: tuple[Setting, ...]
    ours: tuple[Setting, ...]
    paper: tuple[Setting, ...]
    paper_all: int
    n_paper: int
    cells: int

    def cells_text(self) -> str:
        """How many of the paper's cells are run, in one sentence (a line of ``counting.md``)."""
        return (f"{self.cells} of the paper's {self.n_paper * (1 + len(MODULES))} cells run "
                f"({self.n_paper} settings, each without a module and with {' / '.join(MODULES)})")

    def text(self, sep: str = "; ") -> str:
        """The count in one sentence, tpcore's and the paper's parts joined by ``sep`` (the
        figure's title and a line of ``counting.md``)."""
        n = len(self.settings)
        return (f"Best module ({' / '.join(MODULES)}) at or above the base in {len(self.ours)} "
                f"of {n} finished settings{sep}the paper: {len(self.paper)} of {n} over the "
                f"same settings, {self.paper_all} of {self.n_paper} over all")


def module_gains(cells: Sequence[Mapping[str, Any]],
                 paper: Mapping[Setting, Mapping[str, float]]) -> Gains:
    """:class:`Gains` of ``cells`` against ``paper`` (setting -> variant -> accuracy, %)."""
    ours = accuracies(cells)
    finished = tuple(s for s, acc in ours.items() if {"none", *MODULES} <= acc.keys())
    return Gains(finished, tuple(s for s in finished if reaches_base(ours[s])),
                 tuple(s for s in finished if reaches_base(paper[s])),
                 sum(map(reaches_base, paper.values())), len(paper),
                 sum(len({"none", *MODULES} & acc.keys()) for s, acc in ours.items()
                     if s in paper))


def collapsed(usage: Mapping[str, float]) -> bool:
    """Whether a gate sent every test sequence to one expert (``usage``: expert -> share)."""
    return max(usage.values()) == 1.0


MARKS = {True: ("best module at or above the base",
                dict(marker="^", color="tab:green", linestyle="", markersize=6)),
         False: ("best module below the base",
                 dict(marker="v", color="tab:red", linestyle="", markersize=6)),
         None: ("not run", dict(marker="x", color="0.6", linestyle="", markersize=4))}
"""How :func:`modules_figure` marks a setting (keys: whether the best module reaches the base)
and a variant not run (``None``): the legend's words and the marker."""


def _label(setting: Setting) -> str:
    return f"{setting[0]}\n{setting[1]}"


def _bars(ax: Any, acc: dict[Setting, dict[str, float]], variants: Sequence[str],
          title: str) -> None:
    """Grouped bars on ``ax``: a group per setting of ``acc``, a bar per variant (a grey ``x``
    where a variant was not run), and above each finished group a triangle: up where the best
    module reaches the base, down where it does not (:data:`MARKS`)."""
    width = 0.8 / len(variants)
    x = np.arange(len(acc))
    for i, v in enumerate(variants):
        pos = x - 0.4 + width * (i + 0.5)
        ran = np.array([v in a for a in acc.values()])
        ax.bar(pos[ran], [a[v] for a in acc.values() if v in a], width, color=COLORS[v],
               label=v)
        ax.plot(pos[~ran], np.full((~ran).sum(), 3.0), **MARKS[None][1])
    for i, a in enumerate(acc.values()):
        if {"none", *MODULES} <= a.keys():
            ax.plot(i, 106, **MARKS[reaches_base(a)][1])
    ax.set_ylim(0, 112)
    ax.set_yticks(range(0, 101, 25))
    ax.set_xticks(x, [_label(s) for s in acc], fontsize=7)
    ax.set_xlim(-0.6, len(acc) - 0.4)
    ax.set_ylabel("test token accuracy (%)", fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)


def modules_figure(cells: Sequence[Mapping[str, Any]],
                   paper: Mapping[Setting, Mapping[str, float]], path: Path,
                   ours_title: str) -> Path:
    """Write the PNG ``path``: per setting of ``cells``, bars for the base model and each
    module, tpcore's runs (``ours_title``) above the paper's (``paper``: setting -> variant ->
    accuracy, %), and beside them the base against the best of :data:`MODULES` per finished
    setting (Fig. 5; the paper's other settings in grey), titled with :func:`module_gains`."""
    ours = accuracies(cells)
    gains = module_gains(cells, paper)
    plt = pyplot()
    fig = plt.figure(figsize=(max(7.5, 0.68 * len(ours) + 4.5), 6.2), layout="constrained")
    grid = fig.add_gridspec(2, 2, width_ratios=(max(3.0, 0.68 * len(ours)), 3.4))
    top, bottom = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[1, 0])
    _bars(top, ours, [v for v in VARIANTS if any(v in a for a in ours.values())], ours_title)
    reported = [v for v in VARIANTS if all(v in a for a in paper.values())]
    _bars(bottom, {s: dict(paper[s]) for s in ours}, reported, "paper (Table 1, 250 epochs)")
    handles, labels = top.get_legend_handles_labels()
    marks = [top.plot([], [], **style)[0] for _, style in MARKS.values()]
    fig.legend(handles + marks, labels + [label for label, _ in MARKS.values()],
               loc="outside lower center", ncol=len(handles) + len(marks), fontsize=7)
    scatter = fig.add_subplot(grid[:, 1])
    best = {s: max(a[m] for m in MODULES) for s, a in paper.items()}
    others = [s for s in paper if s not in gains.settings]
    if others:
        scatter.scatter([paper[s]["none"] for s in others], [best[s] for s in others], s=14,
                        color="0.75", label="paper, settings not finished here")
    scatter.scatter([paper[s]["none"] for s in gains.settings],
                    [best[s] for s in gains.settings], s=22, marker="s", color="tab:red",
                    label="paper")
    scatter.scatter([ours[s]["none"] for s in gains.settings],
                    [max(ours[s][m] for m in MODULES) for s in gains.settings], s=22,
                    color="tab:blue", label="tpcore")
    scatter.plot([0, 100], [0, 100], "--", color="black", linewidth=0.8, label="y = x")
    scatter.set(xlim=(0, 102), ylim=(0, 102), aspect="equal")
    scatter.set_xlabel("base model (none), %", fontsize=8)
    scatter.set_ylabel(f"best of {' / '.join(MODULES)}, %", fontsize=8)
    scatter.set_title("base against the best module (Fig. 5)", fontsize=9)
    scatter.legend(fontsize=7, loc="lower right")
    scatter.grid(alpha=0.3)
    fig.suptitle(gains.text(";\n"), fontsize=9)
    return save_png(fig, path)


def routing_figure(cells: Sequence[Mapping[str, Any]], path: Path, title: str) -> Path:
    """Write the PNG ``path``: for every setting with a gated run in ``cells``, the share of
    test sequences routed to each expert, stacked, one panel per gated variant (a setting
    not run with that variant is marked so), titled ``title`` and with how many gates send every
    sequence to one expert (:func:`collapsed`)."""
    gated = [r for r in cells if r.get("gate_usage")]
    settings = list(dict.fromkeys((r["task"], r["regime"]) for r in gated))
    variants = [v for v in VARIANTS if any(r["variant"] == v for r in gated)]
    usage = {(r["task"], r["regime"], r["variant"]): r["gate_usage"] for r in gated}
    plt = pyplot()
    fig, axes = plt.subplots(1, len(variants), figsize=(3.4 * len(variants) + 1.6,
                                                        0.3 * len(settings) + 1.6),
                             squeeze=False, sharey=True, layout="constrained")
    y = np.arange(len(settings))
    for ax, v in zip(axes[0], variants):
        left = np.zeros(len(settings))
        for e in EXPERTS:
            share = np.array([usage.get((*s, v), {}).get(e, 0.0) for s in settings])
            ax.barh(y, share, left=left, height=0.7, label=e)
            left += share
        for i, s in enumerate(settings):
            if (*s, v) not in usage:
                ax.text(0.5, i, "not run", ha="center", va="center", fontsize=7, color="0.4")
        ax.set_xlim(0, 1)
        ax.set_title(v, fontsize=9)
        ax.set_xlabel("share of test sequences", fontsize=8)
    axes[0, 0].set_yticks(y, [f"{t}, {g}" for t, g in settings], fontsize=7)
    axes[0, 0].invert_yaxis()
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center",
               ncol=len(EXPERTS), fontsize=7)
    n = sum(map(collapsed, usage.values()))
    fig.suptitle(f"{title}\none expert takes every test sequence in {n} of {len(usage)} "
                 "gates", fontsize=9)
    return save_png(fig, path)

"""PNG figures: the helpers every figure of tpcore uses, and the sorting circuit figures.

matplotlib (the ``plot`` extra) is imported lazily with the non-interactive Agg backend; a
reproduction draws its figures only when it is installed (:func:`draw_or_note`), a command that
is asked for figures refuses without it. Host-only code (NumPy).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.backend import to_host
from tpcore.errors import TpcoreError
from tpcore.io import atomic_path

DPI = 110
"""Resolution of every PNG: small files, readable on a screen."""


def pyplot() -> Any:
    """``matplotlib.pyplot`` with the Agg backend (raises ``ModuleNotFoundError`` without
    matplotlib, which the CLI reports as one line naming ``pip install 'tpcore[plot]'``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def available() -> bool:
    """Whether matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def literal(text: Any) -> str:
    """``text`` as matplotlib should draw it, character for character: a ``$`` (a CoNLL token,
    say) would otherwise start mathematical notation."""
    return str(text).replace("$", r"\$")


def save_png(fig: Any, path: Path) -> Path:
    """Write ``fig`` to ``path`` atomically at :data:`DPI` and close it; returns ``path``."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, bbox_inches="tight")
    pyplot().close(fig)
    return path


def draw_or_note(draw: Callable[[], list[Path]]) -> list[Path]:
    """``draw()`` when matplotlib is installed; otherwise a one-line note on stderr and no
    figures (a reproduction's tables never depend on its figures)."""
    if not available():
        print("tpcore: note: matplotlib is not installed, so no figures were drawn "
              "(pip install 'tpcore[plot]')", file=sys.stderr)
        return []
    return draw()


def heatmap(ax: Any, m: np.ndarray, row_labels: list[str], col_labels: list[str],
            title: str, value: str, rows: str, cols: str) -> None:
    """Draw ``m: (R, C)`` on ``ax`` with its labels, its axes named ``rows`` and ``cols`` and a
    colour bar named ``value``."""
    im = ax.imshow(m, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(col_labels)), col_labels, fontsize=7)
    ax.set_yticks(range(len(row_labels)), row_labels, fontsize=7)
    ax.set_xlabel(cols, fontsize=8)
    ax.set_ylabel(rows, fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.figure.colorbar(im, ax=ax, label=value)


def patterns_figure(patterns: Any, labels: Sequence[str], title: str,
                    path: Path | None = None) -> Any:
    """Every head's attention pattern side by side: ``patterns: (H, N, N)`` (query rows, key
    columns; a host or device array, as ``cache["pattern", layer][b]`` holds one sequence's),
    ``labels`` the ``N`` tokens. Written to ``path`` when given (then closed); returns the
    figure otherwise."""
    pats = np.asarray(to_host(patterns), dtype=float)
    if pats.ndim != 3 or pats.shape[1:] != (len(labels), len(labels)):
        raise TpcoreError(f"patterns of shape {pats.shape}; expected (heads, N, N) for the "
                          f"{len(labels)} labels")
    plt = pyplot()
    fig, axes = plt.subplots(1, len(pats), figsize=(3.6 * len(pats) + 0.8, 3.6), squeeze=False,
                             layout="constrained")
    for h, (ax, pat) in enumerate(zip(axes[0], pats)):
        heatmap(ax, pat, list(labels), list(labels), f"head {h}", "attention weight",
                "query", "key")
    fig.suptitle(title, fontsize=10)
    if path is not None:
        return save_png(fig, Path(path))
    return fig


@dataclass
class Line:
    """One curve of a :class:`Panel`: ``y`` against ``x``, a matplotlib line ``style`` and
    ``color`` (None: the next of the cycle), points marked unless ``marker`` is ``""``."""

    label: str
    x: Sequence[float]
    y: Sequence[float]
    style: str = "-"
    color: str | None = None
    marker: str = "o"


@dataclass
class Level:
    """A horizontal reference line across a :class:`Panel` (a bound, an optimum)."""

    label: str
    y: float
    style: str = "--"
    color: str = "black"


@dataclass
class Panel:
    """One axes of :func:`panels_figure`: its title, curves and reference lines."""

    title: str
    lines: list[Line]
    levels: list[Level] = field(default_factory=list)


def panels_figure(panels: Sequence[Panel], path: Path, title: str, xlabel: str, ylabel: str,
                  logx: bool = False, logy: bool = False, columns: int = 3,
                  ylim: tuple[float, float] | None = None, legend: str = "best",
                  xticks: Sequence[float] | None = None) -> Path:
    """Write ``panels`` (``columns`` per row, each with its legend at ``legend``, a matplotlib
    location, or ``"figure"``: one legend below the panels, for panels whose lines share their
    labels) to the PNG ``path``; axes log-scaled as asked, every panel with the same axis
    labels and, when given, y range and x ticks (labelled with their values, e.g. the
    training-set sizes of a sweep, in place of a log axis's powers of ten)."""
    plt = pyplot()
    cols = min(columns, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows + 0.4),
                             squeeze=False, layout="constrained")
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, panel in zip(axes.flat, panels):
        for line in panel.lines:
            ax.plot(line.x, line.y, linestyle=line.style, color=line.color,
                    marker=line.marker or None, markersize=3, label=line.label)
        for level in panel.levels:
            ax.axhline(level.y, linestyle=level.style, color=level.color, linewidth=1,
                       label=level.label)
        ax.set(xscale="log" if logx else "linear", yscale="log" if logy else "linear",
               xlabel=xlabel, ylabel=ylabel)
        if ylim is not None:
            ax.set_ylim(*ylim)
        if xticks is not None:
            ax.set_xticks(xticks, [f"{x:.10g}" for x in xticks])
            ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_title(panel.title, fontsize=10)
        ax.grid(alpha=0.3)
        if legend != "figure":
            ax.legend(fontsize=7, loc=legend)
    if legend == "figure":
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)),
                   fontsize=8)
    fig.suptitle(title, fontsize=11)
    return save_png(fig, path)


def table_heatmaps(tables: Sequence[tuple[str, np.ndarray]], row_labels: Sequence[str],
                   col_labels: Sequence[str], path: Path, title: str, value_label: str,
                   vmin: float, vmax: float, col_title: str = "") -> Path:
    """Write the tables ``(title, m: (R, C))`` side by side as heatmaps on one colour scale,
    each cell printed to one decimal (``nan``: a grey ``-``), columns named ``col_title``, to
    the PNG ``path``."""
    plt = pyplot()
    r, c = len(row_labels), len(col_labels)
    fig, axes = plt.subplots(1, len(tables), figsize=(1.1 * c * len(tables) + 3.5,
                                                      max(2.8, 0.42 * r + 1.8)),
                             squeeze=False, layout="constrained")
    cmap = plt.get_cmap("viridis").with_extremes(bad="lightgrey")
    for i, (ax, (name, m)) in enumerate(zip(axes[0], tables)):
        im = ax.imshow(np.ma.masked_invalid(m), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        for (y, x), value in np.ndenumerate(m):
            text = "-" if np.isnan(value) else f"{value:.1f}"
            light = np.isnan(value) or value > vmin + 0.6 * (vmax - vmin)
            ax.text(x, y, text, ha="center", va="center", fontsize=8,
                    color="black" if light else "white")
        ax.set_xticks(range(c), col_labels, fontsize=8)
        ax.set_xlabel(col_title)
        ax.set_yticks(range(r), row_labels if i == 0 else [""] * r, fontsize=8)
        ax.set_title(name, fontsize=10)
    fig.colorbar(im, ax=list(axes[0]), label=value_label, shrink=0.8)
    fig.suptitle(title, fontsize=11)
    return save_png(fig, path)


def sorting_figures(out_dir: Path, name: str, qk: dict[int, np.ndarray], q_labels: list[str],
                    k_labels: list[str], ov: np.ndarray, bos_ratio: list[float],
                    patterns: dict[str, tuple[np.ndarray, list[str]]]) -> list[Path]:
    """Write ``<name>_qk.png`` (one standardised QK table per output item), ``<name>_ov.png``
    (OV logits per source token, BOS separately), ``<name>_bos.png`` (BOS / value attention per
    item) and ``<name>_attention.png`` (the given patterns); returns the paths."""
    plt = pyplot()
    paths = [out_dir / f"{name}_{kind}.png" for kind in ("qk", "ov", "bos", "attention")]
    fig, axes = plt.subplots(1, len(qk), figsize=(5 * len(qk), 4), squeeze=False)
    for ax, (k, m) in zip(axes[0], qk.items()):
        heatmap(ax, m, q_labels, k_labels, f"{name}: QK for output item {k}",
                "QK score less the row's largest (clipped at -99)", "query token", "key token")
    save_png(fig, paths[0])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    n = len(q_labels)
    for row, label in zip(ov[:n], k_labels):
        axes[0].plot(range(n), row, label=label)
    axes[1].plot(range(n), ov[n], label=k_labels[n])
    for ax, title in zip(axes, ("OV circuit (values)", "OV circuit (BOS)")):
        ax.set_title(f"{name}: {title}")
        ax.set_xlabel("output token")
        ax.set_ylabel("logit")
        ax.legend(fontsize=6, title="source")
    save_png(fig, paths[1])
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.plot(range(len(bos_ratio)), bos_ratio, marker="o")
    ax.set_title(f"{name}: attention on BOS / on a value token")
    ax.set_xlabel("output item k")
    ax.set_ylabel("ratio of attention weights")
    save_png(fig, paths[2])
    fig, axes = plt.subplots(1, len(patterns), figsize=(6 * len(patterns), 5), squeeze=False)
    for ax, (label, (pat, labels)) in zip(axes[0], patterns.items()):
        heatmap(ax, pat, labels, labels, f"{name}: attention, {label} list",
                "attention weight", "query position (its token)", "key position (its token)")
    save_png(fig, paths[3])
    return paths


def qk_training_figure(path: Path, tables: dict[int, dict[int, Any]], labels: list[str],
                       title: str) -> Path:
    """Write the QK tables ``tables[step][item]: (V, V)`` (query token rows, key token columns)
    as a grid of heatmaps, a row per training step and a column per output item, on one colour
    scale from the smallest entry to 0, to the PNG ``path``; returns it."""
    steps = list(tables)
    items = list(tables[steps[0]])
    grids = {(s, k): np.asarray(tables[s][k], dtype=float) for s in steps for k in items}
    low = min(float(m.min()) for m in grids.values())
    plt = pyplot()
    fig, axes = plt.subplots(len(steps), len(items), figsize=(3.2 * len(items) + 1.2,
                                                               2.9 * len(steps)),
                             squeeze=False, layout="constrained")
    for (r, s), (c, k) in ((rs, ck) for rs in enumerate(steps) for ck in enumerate(items)):
        ax = axes[r, c]
        im = ax.imshow(grids[s, k], cmap="viridis", vmin=low, vmax=0.0, aspect="auto")
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.set_title(f"step {s}, output item {k}", fontsize=9)
        if c == 0:
            ax.set_ylabel("query token", fontsize=8)
        if r == len(steps) - 1:
            ax.set_xlabel("key token", fontsize=8)
    fig.colorbar(im, ax=axes, label="QK score less the row's largest", shrink=0.6)
    fig.suptitle(title, fontsize=10)
    return save_png(fig, path)

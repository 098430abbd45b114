"""PNG figures of circuit analyses (host-only; matplotlib, the ``plot`` extra, imported lazily
with the non-interactive Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tpcore.io import atomic_path


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight")
    _pyplot().close(fig)


def heatmap(ax: Any, m: np.ndarray, row_labels: list[str], col_labels: list[str],
            title: str) -> None:
    """Draw ``m: (R, C)`` on ``ax`` with its labels and a colour bar."""
    im = ax.imshow(m, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(col_labels)), col_labels, fontsize=7)
    ax.set_yticks(range(len(row_labels)), row_labels, fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.figure.colorbar(im, ax=ax)


def sorting_figures(out_dir: Path, name: str, qk: dict[int, np.ndarray], q_labels: list[str],
                    k_labels: list[str], ov: np.ndarray, bos_ratio: list[float],
                    patterns: dict[str, tuple[np.ndarray, list[str]]]) -> list[Path]:
    """Write ``<name>_qk.png`` (one standardised QK table per output item), ``<name>_ov.png``
    (OV logits per source token, BOS separately), ``<name>_bos.png`` (BOS / value attention per
    item) and ``<name>_attention.png`` (the given patterns); returns the paths."""
    plt = _pyplot()
    paths = [out_dir / f"{name}_{kind}.png" for kind in ("qk", "ov", "bos", "attention")]
    fig, axes = plt.subplots(1, len(qk), figsize=(5 * len(qk), 4), squeeze=False)
    for ax, (k, m) in zip(axes[0], qk.items()):
        heatmap(ax, m, q_labels, k_labels, f"{name}: QK for output item {k}")
        ax.set_xlabel("key token")
        ax.set_ylabel("query token")
    _save(fig, paths[0])
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
    _save(fig, paths[1])
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.plot(range(len(bos_ratio)), bos_ratio, marker="o")
    ax.set_title(f"{name}: attention on BOS / on a value token")
    ax.set_xlabel("output item k")
    _save(fig, paths[2])
    fig, axes = plt.subplots(1, len(patterns), figsize=(6 * len(patterns), 5), squeeze=False)
    for ax, (label, (pat, labels)) in zip(axes[0], patterns.items()):
        heatmap(ax, pat, labels, labels, f"{name}: attention, {label} list")
    _save(fig, paths[3])
    return paths

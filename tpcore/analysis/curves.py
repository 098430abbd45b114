"""Training curves: what a run recorded at each evaluation (``metrics.json["history"]`` of
``tpcore learn``, the ``history`` lists of the reproductions' JSON), drawn against the step.

A history is a list of ``{"step": int, name: number, ...}`` rows; :func:`find_histories` finds
every such list in a JSON document. :func:`curves_figure` draws each history as one row of two
panels: losses (names containing ``loss``) on a log scale when all are positive, and the other
numbers (accuracies, scores) beside them. Nested values and the bookkeeping fields
(:data:`NOT_PLOTTED`) are left out. Host-only code (matplotlib lazily, through
:mod:`tpcore.analysis.plots`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tpcore.analysis.plots import literal, pyplot, save_png
from tpcore.errors import TpcoreError

NOT_PLOTTED = ("step", "epoch", "train_seconds", "seconds")
"""Fields of a history row that are not curves (the x axis and timing)."""
LABELS = {"loss": "validation loss", "train_loss": "training loss (last batch)",
          "val_loss": "validation loss", "acc": "token accuracy", "seq_acc": "sequence accuracy",
          "score": "score"}
"""Legend entries of the usual fields; any other field is labelled by its name."""
MAX_DEPTH = 4
"""How deep :func:`find_histories` looks into a JSON document."""


def find_histories(doc: Any, path: str = "", depth: int = 0) -> list[tuple[str, list[dict],
                                                                         Mapping[str, Any]]]:
    """``(path, history, the dict holding it)`` for every ``"history"`` list of ``{"step":
    ...}`` rows in ``doc`` (dicts and lists, at most :data:`MAX_DEPTH` deep); ``path`` names
    where it was found (``""`` at the top, ``"transformer"``, ``"runs[2]"``)."""
    found: list[tuple[str, list[dict], Mapping[str, Any]]] = []
    if depth > MAX_DEPTH:
        return found
    if isinstance(doc, dict):
        h = doc.get("history")
        if (isinstance(h, list) and h and all(isinstance(r, dict) and "step" in r for r in h)):
            found.append((path, h, doc))
        for key, value in doc.items():
            if key != "history":
                found += find_histories(value, f"{path}.{key}" if path else str(key), depth + 1)
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            found += find_histories(value, f"{path}[{i}]", depth + 1)
    return found


def series(history: Sequence[Mapping[str, Any]]) -> dict[str, tuple[list[float], list[float]]]:
    """``{field: (steps, values)}`` of every numeric field of the rows but :data:`NOT_PLOTTED`
    (booleans and nested values left out), in the order fields first appear."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for row in history:
        for key, value in row.items():
            if (key in NOT_PLOTTED or isinstance(value, bool)
                    or not isinstance(value, (int, float))):
                continue
            xs, ys = out.setdefault(key, ([], []))
            xs.append(float(row["step"]))
            ys.append(float(value))
    return out


def plain_log_labels(ax: Any) -> None:
    """Label ``ax``'s log y axis with plain numbers (``0.3``, ``2``, ``0.0001``) instead of
    ``3 x 10^-1``; minor ticks labelled where they do not crowd: all of them when the axis spans
    less than a decade, those at 2 and 5 times a power of ten when it spans less than two."""
    from matplotlib.ticker import FuncFormatter

    lo, hi = ax.get_ylim()
    shown = (range(2, 10) if hi < 10 * lo else (2, 5) if hi < 100 * lo else ())

    def minor(y: float, _: int) -> str:
        mantissa = round(y / 10 ** math.floor(math.log10(y)))
        return f"{y:g}" if mantissa in shown else ""

    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))


def curves_figure(histories: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], path: Path,
                  title: str, selected: Sequence[int | None] = (),
                  split: str = "evaluation split") -> Path:
    """Write the training curves of ``histories`` (``(name, rows)`` pairs, one row of panels
    each) to the PNG ``path``. ``selected[i]``: the step whose model history ``i``'s run kept
    (a dashed line); ``split``: what the non-loss fields were measured on (axis label)."""
    drawn = [(name, series(rows)) for name, rows in histories]
    drawn = [(name, s) for name, s in drawn if s]
    if not drawn:
        raise TpcoreError(f"no numeric training curves to draw for {path.name}; expected "
                          "history rows like {\"step\": 100, \"loss\": 0.5, \"acc\": 0.9}")
    groups = [({k: v for k, v in curves.items() if "loss" in k},
               {k: v for k, v in curves.items() if "loss" not in k}) for _, curves in drawn]
    columns = [c for c in (0, 1) if any(g[c] for g in groups)]
    plt = pyplot()
    fig, axes = plt.subplots(len(drawn), len(columns), figsize=(5.5 * len(columns),
                                                                 3.6 * len(drawn)),
                             squeeze=False, layout="constrained")
    for i, ((name, _), group_pair) in enumerate(zip(drawn, groups)):
        prefix = f"{name}: " if name else ""
        step = selected[i] if i < len(selected) else None
        for ax, c in zip(axes[i], columns):
            group = group_pair[c]
            if c == 0:
                ylabel, panel = "loss", "losses"
            else:
                what = "accuracy" if all("acc" in k for k in group) else "value"
                ylabel, panel = f"{what} on the {split}", "evaluations"
            for key, (xs, ys) in group.items():
                ax.plot(xs, ys, marker="o", markersize=3, label=literal(LABELS.get(key, key)))
            if c == 0 and group and all(y > 0 for _, ys in group.values() for y in ys):
                ax.set_yscale("log")
                plain_log_labels(ax)
            if step is not None:
                ax.axvline(step, color="grey", linestyle="--", linewidth=1,
                           label=f"model kept (step {step})")
            if not group:
                ax.text(0.5, 0.5, "not recorded", ha="center", va="center",
                        transform=ax.transAxes, color="grey")
            ax.set(xlabel="training step", ylabel=ylabel)
            ax.set_title(literal(f"{prefix}{panel}"), fontsize=10)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(literal(title), fontsize=11)
    return save_png(fig, path)


def document_curves(doc: Any, source: Path, path: Path) -> Path:
    """Write the training curves of every history in the JSON document ``doc``, read from
    ``source`` (a run directory's ``metrics.json``, whose non-loss fields are validation
    metrics, or any other JSON file), to the PNG ``path``, each with the step its run kept."""
    found = find_histories(doc)
    if not found:
        raise TpcoreError(f"{source}: no training history in it (a \"history\" list of "
                          "{\"step\": ...} rows)")
    run = source.parent if source.name == "metrics.json" else source
    task = doc.get("task") if isinstance(doc, dict) else None
    title = f"training curves of {task}: {run}" if isinstance(task, str) else \
        f"training curves of {run}"
    return curves_figure([(name, rows) for name, rows, _ in found], path, title,
                         [holder.get("selected_at_step") for _, _, holder in found],
                         split="validation split" if source.name == "metrics.json"
                         else "evaluation split")

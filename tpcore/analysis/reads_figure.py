"""The paper's Figure 12 drawn from :func:`tpcore.programs.reads.read_table` rows: for categorical
and numerical heads (the two rows of panels) and each role, key, query and value (the three
columns), one stacked bar per layer splitting the layer's heads by the family of the variable
they read (tokens, positions, ones, attn, mlp, other), as shares of the heads, with the number
of heads over each bar. Host-only code (matplotlib lazily, through :mod:`tpcore.analysis.plots`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tpcore.analysis.plots import pyplot, save_png
from tpcore.programs.reads import FAMILIES, KINDS, ROLES

COLORS = {"tokens": "#4c72b0", "positions": "#dd8452", "ones": "#55a868", "attn": "#c44e52",
          "mlp": "#8172b3", "other": "#937860"}
"""One colour per family, the same in every panel."""


def reads_figure(rows: list[dict[str, Any]], path: Path, title: str) -> Path:
    """Write the figure of ``rows`` to the PNG ``path`` (see the module docstring)."""
    kinds = [k for k in KINDS if any(r["kind"] == k for r in rows)]
    layers = sorted({r["layer"] for r in rows})
    shown = [f for f in FAMILIES if any(r["counts"][f] for r in rows)]
    fig, axes = pyplot().subplots(len(kinds), len(ROLES), squeeze=False, sharey=True,
                                  figsize=(3.4 * len(ROLES) + 1.6, 3.2 * len(kinds) + 0.6),
                                  layout="constrained")
    for row_axes, kind in zip(axes, kinds):
        for ax, role in zip(row_axes, ROLES):
            cells = {r["layer"]: r for r in rows if r["kind"] == kind and r["role"] == role}
            bottom = [0.0] * len(layers)
            for fam in shown:
                share = [cells[x]["counts"][fam] / cells[x]["heads"] if x in cells else 0.0
                         for x in layers]
                ax.bar(layers, share, bottom=bottom, color=COLORS[fam], label=fam, width=0.7)
                bottom = [b + s for b, s in zip(bottom, share)]
            for x in layers:
                if x in cells:
                    ax.text(x, 1.02, f"n={cells[x]['heads']}", ha="center", va="bottom",
                            fontsize=8)
            ax.set_title(f"{kind} heads: {role}", fontsize=10)
            ax.set_xticks(layers, [str(x) for x in layers])
            ax.set_xlabel("layer")
            ax.set_ylim(0, 1.12)
            ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
        row_axes[0].set_ylabel("share of the layer's heads")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles[::-1], labels[::-1], title="variable read", loc="outside right center",
               fontsize=9)
    fig.suptitle(title, fontsize=11)
    return save_png(fig, path)

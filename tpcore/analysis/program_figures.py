"""Figures of a Transformer Program, read from its IR: every head's predicate and, on one input,
every head's attention; :func:`write_program_figures` writes them with the dependency graph.

A head's predicate (``Head.predicate``, ``predicate[q] = k``) is the matrix ``P[q, k] = 1``
where query value ``q`` matches key value ``k`` (query values along the rows, key values along
the columns; a row of zeros matches nothing). On an input of ``N`` tokens a head's attention is
the ``(N, N)`` matrix of what each query position reads: for a categorical head the one key its
rule chooses (:meth:`Head.choose_key`), for a numerical head every matching key, whose values it
sums. Host-only code (NumPy; matplotlib lazily, through :mod:`tpcore.analysis.plots`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.analysis.depgraph import dot_text, graph_png
from tpcore.analysis.plots import literal, pyplot, save_png
from tpcore.io import write_text
from tpcore.programs.examples import content_tokens
from tpcore.programs.interpret import encode, evaluate, key_mask
from tpcore.programs.ir import Head, Program

COLUMNS = 4
"""Heads per row of a figure."""
MAX_TICKS = 24
"""Axes with more values than this are drawn without tick labels."""


def heads(program: Program) -> list[Head]:
    """The program's attention heads, in program order."""
    return [m for m in program.modules if isinstance(m, Head)]


def predicate_matrix(program: Program, head: Head) -> np.ndarray:
    """``P: (|query values|, |key values|)`` bool, ``P[q, k]`` when query value ``q`` matches key
    value ``k`` (the IR's predicate table)."""
    v = program.variables
    p = np.zeros((v[head.query].size, v[head.key].size), dtype=bool)
    q = np.flatnonzero(head.predicate >= 0)
    p[q, head.predicate[q]] = True
    return p


def example_input(program: Program, seed: int = 0) -> list[str]:
    """A framed input of the longest length the program takes, its content drawn at random
    (``seed``) from :func:`~tpcore.programs.examples.content_tokens`."""
    content = content_tokens(program)
    n = program.max_len - (program.bos is not None) - (program.eos is not None)
    rng = np.random.default_rng(seed)
    return program.frame([content[i] for i in rng.integers(0, len(content), max(n, 1))])


def attention_maps(program: Program, tokens: Sequence[str]) -> dict[str, np.ndarray]:
    """``{head name: A (N, N)}`` on the framed input ``tokens``: ``A[i, j] = 1`` where query
    position ``i`` reads key position ``j`` (see the module docstring)."""
    ids, lengths = encode(program, [list(tokens)])
    return maps_of(program, evaluate(program, ids, lengths), lengths)


def maps_of(program: Program, env: dict[str, Any], lengths: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`attention_maps` from the variables ``env`` of one input of ``lengths``
    (:func:`tpcore.programs.interpret.evaluate`)."""
    mask = key_mask(lengths, env["tokens"].shape[1], program.causal)
    out = {}
    for h in heads(program):
        s = h.match_scores(env[h.query], env[h.key], mask)
        if h.kind == "categorical":
            a = np.zeros(s.shape[1:], dtype=float)
            a[np.arange(a.shape[0]), h.choose_key(s)[0]] = 1.0
        else:
            a = s[0].astype(float)
        out[h.name] = a
    return out


def _grid(n: int, cell: float) -> tuple[Any, np.ndarray]:
    """A figure of ``n`` square panels, :data:`COLUMNS` per row; unused panels hidden."""
    cols = min(COLUMNS, n)
    rows = -(-n // cols)
    fig, axes = pyplot().subplots(rows, cols, figsize=(cell * cols, cell * rows + 0.4),
                                  squeeze=False, layout="constrained")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes.flat


def _ticks(ax: Any, rows: Sequence[Any], cols: Sequence[Any]) -> None:
    """Label the axes' ticks with ``rows``/``cols`` where they are few enough to read, and draw
    the cell borders."""
    ax.set_xticks(np.arange(len(cols) + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(len(rows) + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="lightgrey", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    for labels, set_ticks in ((cols, ax.set_xticks), (rows, ax.set_yticks)):
        if len(labels) <= MAX_TICKS:
            set_ticks(range(len(labels)), [literal(x) for x in labels], fontsize=6)
        else:
            set_ticks([])
    ax.tick_params(axis="x", labelrotation=90)


def predicates_figure(program: Program, path: Path) -> Path:
    """Write every head's predicate matrix (dark: matches) to the PNG ``path``."""
    hs = heads(program)
    fig, axes = _grid(len(hs), 3.0)
    v = program.variables
    for ax, h in zip(axes, hs):
        ax.imshow(predicate_matrix(program, h), cmap="Greys", vmin=0, vmax=1,
                  interpolation="nearest")
        _ticks(ax, v[h.query].values, v[h.key].values)
        ax.set_xlabel(f"key: {h.key}", fontsize=7)
        ax.set_ylabel(f"query: {h.query}", fontsize=7)
        ax.set_title(f"{h.name} ({h.kind})", fontsize=8)
    fig.suptitle(f"{program.name}: head predicates (dark = query value matches key value)",
                 fontsize=11)
    return save_png(fig, path)


def attention_figure(program: Program, tokens: Sequence[str], path: Path) -> Path:
    """Write every head's attention on the framed input ``tokens`` to the PNG ``path``."""
    maps = attention_maps(program, tokens)
    fig, axes = _grid(len(maps), 2.8)
    labels = [f"{t} {i}" for i, t in enumerate(tokens)]
    for ax, h in zip(axes, heads(program)):
        ax.imshow(maps[h.name], cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
        _ticks(ax, labels, labels)
        ax.set_xlabel("key position", fontsize=7)
        ax.set_ylabel("query position", fontsize=7)
        what = "reads one key" if h.kind == "categorical" else "sums matching keys"
        ax.set_title(f"{h.name} ({what})", fontsize=8)
    fig.suptitle(literal(f"{program.name}: attention on {' '.join(tokens)}"), fontsize=11)
    return save_png(fig, path)


def write_program_figures(program: Program, out: Path,
                          tokens: Sequence[str] | None = None) -> dict[str, Any]:
    """Write ``NAME_predicates.png`` and ``NAME_attention.png`` (on ``tokens``, framed; default
    :func:`example_input`; both left out when the program has no heads), ``NAME_graph.dot`` and
    ``NAME_graph.png`` (:mod:`tpcore.analysis.depgraph`) into the folder ``out``. Returns
    ``{"files": [paths], "input": tokens, "graph_drawn_with": "graphviz" | "matplotlib"}``."""
    name = program.name
    tokens = program.frame(tokens) if tokens is not None else example_input(program)
    files = []
    if heads(program):
        files.append(predicates_figure(program, out / f"{name}_predicates.png"))
        files.append(attention_figure(program, tokens, out / f"{name}_attention.png"))
    dot = out / f"{name}_graph.dot"
    write_text(dot, dot_text(program))
    png, how = graph_png(program, out / f"{name}_graph.png")
    return {"files": [*files, dot, png], "input": list(tokens), "graph_drawn_with": how}

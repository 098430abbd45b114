"""A Transformer Program's dependency graph as a picture: Graphviz DOT text, and a PNG.

Nodes are the program's variables (the inputs ``tokens``, ``positions``, ``ones`` and each
module's output, named by its module) and the classifier; an edge ``a -> b`` says that ``b``'s
module reads ``a``: as query, key or value for a head (``q``, ``k``, ``v``), as an input for an
MLP or a counting module, as a feature for the classifier. Variables that no prediction depends
on are drawn grey and dashed in the DOT text, and left out of the picture.

:func:`dot_text` needs nothing installed. :func:`graph_png` renders the DOT text with Graphviz's
``dot`` program when it is on the ``PATH``, and otherwise draws the same graph with matplotlib in
the program's layers (:func:`layers`). Host-only code.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tpcore.analysis.plots import DPI, literal, pyplot, save_png
from tpcore.errors import TpcoreError
from tpcore.io import atomic_path
from tpcore.programs.describe import used_variables
from tpcore.programs.ir import INPUTS, Head, Program

CLASSIFIER = "classifier"
"""The classifier's node."""
ROLES = {"q": "#1f77b4", "k": "#ff7f0e", "v": "#2ca02c", "": "#555555", "feature": "#c9b3e0"}
"""Edge colour by what the edge's target does with its source (classifier features light: there
are many)."""
BEND = {"q": 0.08, "v": -0.08}
"""Curvature of query and value edges in the matplotlib drawing, so that a head reading one
variable in two roles shows both edges."""
DOT_TIMEOUT = 60
"""Seconds ``dot`` may take to lay out a graph."""


def node_label(program: Program, variable: str) -> str:
    """What a variable's node says: its module's name and kind in a few words (the kind's
    ``summary()``; inputs: their name)."""
    if variable == CLASSIFIER:
        return f"classifier\n{len(program.classifier.classes)} classes"
    m = program.producer(variable)
    if m is None:
        return variable
    return f"{m.name}\n{m.summary()}"


def edges(program: Program) -> list[tuple[str, str, str]]:
    """``(source variable, target node, role)`` for every read: role ``q``/``k``/``v`` for
    heads, ``""`` for other modules, ``"feature"`` for the classifier."""
    out = []
    for m in program.modules:
        roles = ("q", "k", "v") if isinstance(m, Head) else ("",) * len(m.reads)
        out += [(r, m.output, role) for r, role in zip(m.reads, roles)]
    out += [(f, CLASSIFIER, "feature") for f in program.classifier.features]
    return out


def _quote(text: str) -> str:
    """A DOT string literal of ``text`` (newlines as ``\\n``)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dot_text(program: Program, used_only: bool = False) -> str:
    """The dependency graph in Graphviz's DOT language, one row per layer of the program
    (:func:`layers`: the inputs on top, the classifier at the bottom); ``used_only``: without the
    variables no prediction depends on (what the picture draws), else with them dashed."""
    used = used_variables(program)
    shown = [n for n in program.variables if n in used or not used_only]
    lines = [f"digraph {_quote(program.name)} {{", "  rankdir=TB;",
             '  node [shape=box, style="rounded", fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8, arrowsize=0.6];']
    if used_only and len(shown) < len(program.variables):
        note = (f"{len(program.variables) - len(shown)} variables no prediction depends on "
                "are left out")
        lines.append(f"  label={_quote(note)}; labelloc=t;")
    for name in shown:
        attrs = [f"label={_quote(node_label(program, name))}"]
        if name in INPUTS:
            attrs.append("shape=ellipse")
        if name not in used:
            attrs += ['style="rounded,dashed"', "color=grey", "fontcolor=grey"]
        lines.append(f"  {_quote(name)} [{', '.join(attrs)}];")
    lines.append(f"  {_quote(CLASSIFIER)} [label={_quote(node_label(program, CLASSIFIER))}, "
                 "shape=doubleoctagon];")
    row = layers(program)
    for r in range(max(row.values())):
        names = [n for n in shown if row.get(n) == r]
        if names:
            lines.append("  { rank=same; " + " ".join(f"{_quote(x)};" for x in names) + " }")
    for source, target, role in edges(program):
        if source not in shown or (target != CLASSIFIER and target not in shown):
            continue
        label = f", label={_quote(role)}" if role in ("q", "k", "v") else ""
        lines.append(f"  {_quote(source)} -> {_quote(target)} [color={_quote(ROLES[role])}"
                     f"{label}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def layers(program: Program) -> dict[str, int]:
    """``{node: row}``, the program's layers: inputs on row 0, then the modules in program order,
    a new row where the kind changes between heads and other modules (a transformer layer's
    attention, then its MLPs) or where a module reads a variable of the current row; the
    classifier below everything."""
    row = {name: 0 for name in INPUTS}
    current, is_head = 0, None
    for m in program.modules:
        if isinstance(m, Head) != is_head or any(row[r] == current for r in m.reads):
            current, is_head = current + 1, isinstance(m, Head)
        row[m.output] = current
    row[CLASSIFIER] = current + 1
    return row


def layout(program: Program, keep: set[str] | None = None) -> dict[str, tuple[float, float]]:
    """``{node: (x, y)}`` of the nodes in ``keep`` (all when None): rows from :func:`layers`
    (``y = -row``), nodes of a row ordered by the mean ``x`` of what they read (fewer
    crossings) and centred on ``x = 0``, one unit apart."""
    row = {n: r for n, r in layers(program).items() if keep is None or n in keep}
    reads: dict[str, list[str]] = {}
    for source, target, _ in edges(program):
        if source in row:
            reads.setdefault(target, []).append(source)
    pos: dict[str, tuple[float, float]] = {}
    for r in range(max(row.values()) + 1):
        names = [n for n in row if row[n] == r]
        if r:
            names.sort(key=lambda n: sum(pos[s][0] for s in reads.get(n, [])) /
                       max(len(reads.get(n, [])), 1))
        for i, n in enumerate(names):
            pos[n] = (i - (len(names) - 1) / 2, -float(r))
    return pos


def _draw(program: Program, path: Path) -> Path:
    """The graph drawn with matplotlib in the layers of :func:`layout`, without the variables
    no prediction depends on."""
    used = used_variables(program) | {CLASSIFIER}
    pos = layout(program, used | set(INPUTS))
    width = max(x for x, _ in pos.values()) - min(x for x, _ in pos.values()) + 1
    depth = -min(y for _, y in pos.values()) + 1
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(min(1.8 * width + 1, 60), min(1.2 * depth + 1, 40)))
    for source, target, role in edges(program):
        if source not in pos or target not in pos:
            continue
        ax.annotate("", xy=pos[target], xytext=pos[source],
                    arrowprops=dict(arrowstyle="-|>", color=ROLES[role], lw=0.8,
                                    shrinkA=12, shrinkB=12, mutation_scale=8,
                                    connectionstyle=f"arc3,rad={BEND.get(role, 0.0)}"))
    for name, (x, y) in pos.items():
        grey = name not in used
        ax.text(x, y, literal(node_label(program, name)), ha="center", va="center", fontsize=7,
                color="grey" if grey else "black",
                bbox=dict(boxstyle="round,pad=0.3", facecolor="white",
                          edgecolor="grey" if grey else "black",
                          linestyle="--" if grey else "-"))
    for role, name in (("q", "query"), ("k", "key"), ("v", "value"), ("", "MLP / count input"),
                       ("feature", "classifier feature")):
        ax.plot([], [], color=ROLES[role], label=f"reads as {name}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    ax.set_xlim(min(x for x, _ in pos.values()) - 0.7, max(x for x, _ in pos.values()) + 0.7)
    ax.set_ylim(-depth + 0.5, 0.7)
    ax.set_axis_off()
    left_out = len(program.variables) - len(pos) + 1
    note = f"; {left_out} variables no prediction depends on left out" if left_out else ""
    ax.set_title(f"{program.name}: dependency graph (rows: the program's layers, attention then "
                 f"MLPs{note})", fontsize=10)
    return save_png(fig, path)


def graph_png(program: Program, path: Path) -> tuple[Path, str]:
    """Write the dependency graph as the PNG ``path``; returns it and how it was drawn
    (``"graphviz"`` or ``"matplotlib"``, see the module docstring)."""
    dot = shutil.which("dot")
    if dot is None:
        return _draw(program, path), "matplotlib"
    with atomic_path(path) as tmp:
        done = subprocess.run([dot, "-Tpng", f"-Gdpi={DPI}", "-o", str(tmp)],
                              input=dot_text(program, used_only=True), text=True,
                              capture_output=True,
                              timeout=DOT_TIMEOUT, check=False)
        if done.returncode != 0:
            raise TpcoreError(f"Graphviz dot could not draw the graph of {program.name!r}: "
                              f"{done.stderr.strip()[:200]}")
    return path, "graphviz"

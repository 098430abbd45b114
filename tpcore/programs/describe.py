"""A program IR described: reachable values, the variable dependency graph, per-feature
classifier contributions (the paper's Figure 7), summary statistics, and one head's predicate as
a table. (Figures and pages drawn from these live in :mod:`tpcore.analysis`.) Host-only code
(NumPy).
"""

from __future__ import annotations

import textwrap
from collections import Counter
from typing import Any

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.programs.interpret import encode, evaluate
from tpcore.programs.ir import Head, Mlp, Program
from tpcore.programs.reach import value_sets
from tpcore.programs.reads import family

__all__ = [
    "GRID_COLUMNS", "contributions", "dependencies", "dependency_text", "embedding_table",
    "head_table", "reachable", "stats", "used_variables",
]


def reachable(program: Program) -> dict[str, np.ndarray]:
    """``{variable: bool mask over its values}``: the values some framed input gives it at some
    position (:func:`tpcore.programs.reach.value_sets`, over every length and position)."""
    sets = value_sets(program)
    return {name: sets.union(name) for name in program.variables}


def dependencies(program: Program) -> list[tuple[str, str, tuple[str, ...]]]:
    """``(module, output, variables read)`` per module; heads read ``(query, key, value)``."""
    return [(m.name, m.output, m.reads) for m in program.modules]


def dependency_text(program: Program) -> str:
    """The dependency graph as text: one line per module, ``output <- module: what it computes``
    (its kind's ``describe()``), then the classifier's features and the unused variables."""
    lines = [f"{m.output:<24} <- {m.name}: {m.describe()}" for m in program.modules]
    used = used_variables(program)
    unused = [f for f in program.variables if f not in used]
    lines.append(f"{'classifier':<24} <- {', '.join(program.classifier.features)}")
    if unused:
        lines.append(f"unused (no effect on predictions): {', '.join(unused)}")
    return "\n".join(lines)


def used_variables(program: Program) -> set[str]:
    """Variables the predictions depend on: classifier features and what they read, recursively."""
    used = set(program.classifier.features)
    for m in reversed(program.modules):
        if m.output in used:
            used.update(m.reads)
    return used


def contributions(program: Program, tokens: list[str], position: int) -> list[dict[str, Any]]:
    """Per-feature classifier scores at one position of one input (Figure 7 style).

    Returns one entry per feature, ``{"feature", "value", "scores": {class: score}}``, sorted by
    the feature's score for the predicted class (largest first); a numerical feature's score is
    its row times its value.
    """
    ids, lengths = encode(program, [tokens])
    if not 0 <= position < len(tokens):
        raise ValueError(f"position {position} outside 0 .. {len(tokens) - 1}")
    env = evaluate(program, ids, lengths)
    c = program.classifier
    rows = []
    total = c.bias.copy()
    for f in c.features:
        var = program.variables[f]
        x = env[f][0, position]
        if var.kind == "categorical":
            value, score = var.values[int(x)], c.weights[f][int(x)]
        else:
            value = int(x) if float(x).is_integer() else float(x)
            score = float(x) * c.weights[f][0]
        total = total + score
        rows.append({"feature": f, "value": value, "scores": score})
    total[list(c.masked)] = -np.inf
    best = int(np.argmax(total))
    rows.sort(key=lambda r: -r["scores"][best])
    for r in rows:
        r["scores"] = dict(zip(c.classes, r["scores"].tolist()))
    return rows


def stats(program: Program) -> dict[str, Any]:
    """Counts of modules by type, variables, rules, and which variables heads read."""
    heads = [m for m in program.modules if isinstance(m, Head)]
    mlps = [m for m in program.modules if isinstance(m, Mlp)]
    reads: Counter[str] = Counter()
    for h in heads:
        for role, var in (("key", h.key), ("query", h.query), ("value", h.value)):
            reads[f"{h.kind} {role}: {family(program, var)}"] += 1
    return {
        "name": program.name,
        "max_len": program.max_len,
        "vocabulary": len(program.tokens.values),
        "classes": len(program.classifier.classes),
        "categorical_heads": sum(h.kind == "categorical" for h in heads),
        "numerical_heads": sum(h.kind == "numerical" for h in heads),
        "categorical_mlps": sum(m.kind == "categorical" for m in mlps),
        "numerical_mlps": sum(m.kind == "numerical" for m in mlps),
        "rules": sorted({h.rule for h in heads if h.kind == "categorical"}),
        "causal": program.causal,
        "unused_variables": sorted(set(program.variables) - used_variables(program)),
        "head_reads": dict(sorted(reads.items())),
    }


def embedding_table(program: Any, max_words: int = 12) -> str:
    """The paper's Figure 7 (c) table: for each embedding variable value, the words taking it
    (the ``max_words`` most frequent, i.e. lowest ids first; special ``<...>`` symbols left out), as
    Markdown (just the header when the program learned no embedding)."""
    rows = ["| variable | value | words |", "|---|---|---|"]
    words = program.variables["tokens"].values
    for m in program.modules:
        if not m.output.startswith("embed_") or m.inputs != ("tokens",):
            continue
        table = np.asarray(m.table)
        for value in range(int(table.max()) + 1):
            ids = [i for i in np.flatnonzero(table == value) if not _is_special(words[i])]
            if len(ids):
                shown = ", ".join(str(words[i]) for i in ids[:max_words])
                more = f" (+{len(ids) - max_words})" if len(ids) > max_words else ""
                rows.append(f"| {m.output} | {value} | {shown}{more} |")
    return "\n".join(rows) + "\n"


def _is_special(word: Any) -> bool:
    return isinstance(word, str) and word.startswith("<") and word.endswith(">")


GRID_COLUMNS = 24
"""Most key values :func:`head_table` draws as a grid; more are listed one query per line."""


def head_table(program: Program, name: str) -> str:
    """Head ``name``'s predicate as text: a line saying what the head computes, then a grid with
    a row per query value and a column per key value, ``x`` where the query selects the key
    (``predicate[q] == k``); with more than :data:`GRID_COLUMNS` key values, one line
    ``query -> key`` per query instead."""
    m = program.module(name)
    if not isinstance(m, Head):
        heads = [h.name for h in program.modules if isinstance(h, Head)]
        raise TpcoreError(f"{name!r} is not an attention head; heads: {heads}")
    q, k = program.variables[m.query], program.variables[m.key]
    if m.kind == "categorical":
        rule = ("the nearest one (the earlier on a tie)" if m.rule == "closest"
                else "the one the authors' select_closest picks")
        what = ("each position attends to a position whose key its query selects (x), "
                f"{rule}, and reads its value; a query selecting nothing attends to position 0")
    else:
        what = "each position sums the value over the positions whose key its query selects (x)"
    lines = [f"{name} ({m.kind} head): query {m.query}, key {m.key}, value {m.value} -> "
             f"{m.output}", *textwrap.wrap(what, 88), ""]
    queries = [str(x) for x in q.values]
    keys = [str(x) for x in k.values]
    if len(keys) > GRID_COLUMNS:
        width = max(map(len, queries))
        lines += [f"{qv:>{width}} -> {keys[j] if j >= 0 else '(nothing)'}"
                  for qv, j in zip(queries, m.predicate.tolist())]
        return "\n".join(lines)
    corner = f"{m.query} \\ {m.key}"
    first = max(len(corner), *map(len, queries))
    cols = [max(len(kv), 1) for kv in keys]
    lines.append(" ".join([f"{corner:<{first}}", *(f"{kv:>{w}}" for kv, w in zip(keys, cols))]))
    for qv, j in zip(queries, m.predicate.tolist()):
        cells = [f"{'x' if c == j else '.':>{w}}" for c, w in enumerate(cols)]
        lines.append(" ".join([f"{qv:<{first}}", *cells]))
    return "\n".join(lines)

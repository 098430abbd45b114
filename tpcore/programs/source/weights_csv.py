"""The weights CSV beside a program file: its classifier as rows ``feature,value,<classes>``,
written (:func:`write`) and read back (:func:`read`) here, for both program formats (tpcore's
and the authors' published one). Host-only code."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.programs.ir import LIMITS, Program, check_size, shorten

PLACEHOLDER = "_"
"""The value of a numerical feature's one row and of the ``bias`` row (and, in the authors'
files, of a categorical value without a name)."""


def write(program: Program, published: bool = False, features: Sequence[str] | None = None,
          reach: Mapping[str, np.ndarray] | None = None) -> str:
    """The classifier as CSV: ``feature,value,<classes>``; a categorical feature has one row per
    value (``str(label)``), a numerical one a ``_`` row; a nonzero bias is a ``bias,_`` row.
    The ``published`` format has no bias (it is added to the ``ones`` row,
    :func:`tpcore.programs.source.published_style.published_features`) and needs rows for
    every variable, all zero for those that are not features: its programs look up each
    variable's scores, and its reader takes the vocabulary and length from the ``tokens`` and
    ``positions`` rows. Masked classes have no
    column. A feature named ``bias`` or a categorical feature with the label ``_`` is refused:
    the format could not tell their rows from the bias or a numerical row. ``features`` and
    ``reach`` (a compressed tpcore program's, :class:`tpcore.programs.compress.Plan`): only those
    features, and of a categorical one only the rows of values it can take."""
    c = program.classifier
    keep = c.kept()
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["feature", "value", *(c.classes[i] for i in keep)])
    weights = {f: w[:, keep] for f, w in c.weights.items()}
    bias = c.bias[keep]
    feats = list(c.features if features is None else features)
    if published:
        feats = list(program.variables)
        for f in feats:
            if f not in weights:
                var = program.variables[f]
                weights[f] = np.zeros((var.size if var.kind == "categorical" else 1, len(keep)))
        weights["ones"] = weights["ones"] + bias
    elif np.any(bias != 0):
        out.writerow(["bias", PLACEHOLDER, *map(repr, bias.tolist())])
    for f in feats:
        var = program.variables[f]
        if f == "bias" or var.kind == "categorical" and PLACEHOLDER in var.lookup:
            raise TpcoreError(f"cannot write the weights CSV: feature {f!r} "
                              f"{'is named bias' if f == 'bias' else 'has the label _'}, which "
                              "the format reserves for the bias and numerical rows")
        labels: Iterable[Any] = var.values if var.kind == "categorical" else [PLACEHOLDER]
        for n, (label, row) in enumerate(zip(labels, weights[f])):
            if reach is None or var.kind == "numerical" or reach[f][n]:
                out.writerow([f, str(label), *map(repr, row.tolist())])
    return buf.getvalue()


def read(text: str, where: str) -> tuple[list[str], dict[tuple[str, str], np.ndarray]]:
    """The rows of a weights CSV ``feature,value,<classes>``: ``{(feature, value): (C,)}``.

    ``_`` is the value of a numerical feature's one row (and of the ``bias`` row). A feature with
    other values is categorical, and its ``_`` rows stand for values without a name (the authors'
    decompiler writes ``_`` for an unnamed value, e.g. the unused vocabulary slots of their Dyck
    programs): no input reaches them, and they are dropped. Any other repeated row, a weight that
    is not a finite number, or a row of another width is refused naming the line.
    """
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise TpcoreError(f"{where}: not a CSV file ({exc})") from None
    if not rows or len(rows[0]) < 3 or rows[0][:2] != ["feature", "value"]:
        raise TpcoreError(f"{where}: expected a header 'feature,value,<classes...>'")
    classes = rows[0][2:]
    check_size(len(classes), LIMITS.classes, f"{where}: classes")
    weights: dict[tuple[str, str], np.ndarray] = {}
    line: dict[tuple[str, str], int] = {}
    unnamed: dict[str, list[int]] = {}
    for n, row in enumerate(rows[1:], start=2):
        if len(row) != len(rows[0]):
            raise TpcoreError(f"{where}:{n}: expected {len(rows[0])} columns, got {len(row)}")
        try:
            w = np.asarray([float(x) for x in row[2:]])
        except ValueError:
            raise TpcoreError(f"{where}:{n}: weights must be numbers") from None
        key = (row[0], row[1])
        bad = np.flatnonzero(~(np.abs(w) <= LIMITS.number))
        if bad.size:
            raise TpcoreError(f"{where}:{n}: row {key}: weight {shorten(row[2 + bad[0]])} of "
                              f"class {shorten(classes[bad[0]])} is not a finite number of "
                              f"magnitude at most {LIMITS.number:.0f}")
        if key[1] == PLACEHOLDER:
            unnamed.setdefault(key[0], []).append(n)
        elif key in weights:
            raise TpcoreError(f"{where}:{n}: row {key} repeats line {line[key]}")
        weights.setdefault(key, w)
        line.setdefault(key, n)
    named = {f for f, v in weights if v != PLACEHOLDER}
    for f, lines in unnamed.items():
        if f in named:
            del weights[(f, PLACEHOLDER)]
        elif len(lines) > 1:
            raise TpcoreError(f"{where}:{lines[1]}: row ({f!r}, '_') repeats line {lines[0]} "
                              "(a numerical feature has one '_' row)")
    return classes, weights

"""What a compressed generated program keeps of each module, with the same predictions as the
program on every framed input (:mod:`tpcore.programs.reach`). Host-only code (NumPy).

:func:`plan` decides, from the value sets of :func:`tpcore.programs.reach.value_sets`:

- **classifier features**: a feature whose rows are zero at every class that can win (over
  the values it can take) adds exactly ``0.0`` and is left out of the sum; a feature whose rows
  are equal at every value it can take adds the same row on every input, so any of those values
  gives the same sums bit for bit;
- **constants**: a categorical variable that takes one value everywhere is written as that
  literal (numerical variables keep their module, so that an imported program reads them as
  numerical);
- **live modules**, from the classifier backwards: a feature that can change a sum (rows not
  all equal) and a numerical feature are live, and a live module makes the variables it reads
  live; a module whose output is not live is not written (a feature with equal rows becomes
  the literal of one of its values), transitively;
- **MLP arguments**: an MLP that reads one variable twice, or whose table over the input pairs
  that occur together does not depend on one input, reads one argument; its ``domain`` is the
  set of argument values (pairs) that occur, over which its code must equal the table.

The summation order of the remaining features is the program's, so the classifier's float64
sums, and its first maximum, are those of the full program on every framed input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpcore.programs.ir import Mlp, Program
from tpcore.programs.reach import ValueSets, value_sets


@dataclass
class MlpPlan:
    """The arguments an MLP's code reads (``inputs``), its ``table`` over them and its
    ``domain`` (bool, same shape): the argument values that occur together."""

    inputs: tuple[str, ...]
    table: np.ndarray
    domain: np.ndarray


@dataclass
class Plan:
    """See the module docstring. ``constant``: variables written as a literal (value index);
    ``written``: modules whose code is written; ``features``: the classifier features summed;
    ``mlps``: the plan of every written MLP."""

    sets: ValueSets
    reach: dict[str, np.ndarray]
    constant: dict[str, int]
    written: set[str]
    features: tuple[str, ...]
    mlps: dict[str, MlpPlan]


def mlp_plan(m: Mlp, sets: ValueSets) -> MlpPlan:
    """``m``'s arguments after dropping a repeated input or one the table ignores over the
    pairs that occur (see the module docstring); both stay when one may leave its listed
    values, which gives the default whatever the other is."""
    if len(m.inputs) == 1 or m.inputs[0] == m.inputs[1]:
        table = m.table if len(m.inputs) == 1 else np.diagonal(m.table).copy()
        return MlpPlan(m.inputs[:1], table, sets.union(m.inputs[0]))
    domain = sets.domain(m.inputs)
    if any(x in sets.outside for x in m.inputs):  # a value outside either gives the default
        return MlpPlan(m.inputs, m.table, domain)
    for keep in (0, 1):
        t = m.table if keep == 0 else m.table.T
        d = domain if keep == 0 else domain.T
        lo = np.where(d, t, np.iinfo(np.int64).max).min(axis=1)
        hi = np.where(d, t, -1).max(axis=1)
        rows = d.any(axis=1)
        if np.all(lo[rows] == hi[rows]):
            return MlpPlan((m.inputs[keep],), np.where(rows, lo, m.default), rows)
    return MlpPlan(m.inputs, m.table, domain)


def _rows_alike(w: np.ndarray, mask: np.ndarray) -> tuple[bool, bool]:
    """Whether the rows ``w[mask]`` are all equal, and whether they are all zero."""
    rows = w[mask]
    equal = bool(np.all(rows == rows[:1])) if len(rows) else True
    return equal, bool(np.all(rows == 0))


def plan(program: Program) -> Plan:
    """The compression plan of ``program`` (see the module docstring)."""
    p = program
    sets = value_sets(p)
    reach = {name: sets.union(name) for name in p.variables}
    c = p.classifier
    kept = c.kept()
    features, equal = [], set()
    for f in c.features:
        w = c.weights[f][:, kept]
        var = p.variables[f]
        if var.kind == "categorical":
            same, zero = _rows_alike(w, reach[f])
        else:
            zero = bool(np.all(w == 0))
            same = zero or (int(reach[f].sum()) == 1 and f not in sets.outside)
        if not zero:
            features.append(f)
        if same:
            equal.add(f)
    inputs = {"tokens", "positions", "ones"}
    constant = {name: int(np.flatnonzero(reach[name])[0]) for name, var in p.variables.items()
                if name not in inputs and var.kind == "categorical"
                and int(reach[name].sum()) == 1}
    live = {f for f in features if f not in equal or p.variables[f].kind == "numerical"}
    mlps: dict[str, MlpPlan] = {}
    written: set[str] = set()
    for m in reversed(p.modules):
        if m.output not in live or m.output in constant:
            continue
        written.add(m.name)
        if isinstance(m, Mlp):  # an MLP's plan may drop an argument it reads
            mlps[m.name] = mlp_plan(m, sets)
            live.update(mlps[m.name].inputs)
        else:
            live.update(m.reads)
    for f in features:
        if f not in inputs and f not in constant and f not in live:
            constant[f] = int(np.flatnonzero(reach[f])[0])
    needed = live | set(features)
    constant = {k: v for k, v in constant.items() if k in needed}
    return Plan(sets, reach, constant, written, tuple(features), mlps)

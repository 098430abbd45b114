"""Decision lists: the body of an MLP function of a program file, as
:func:`tpcore.programs.source.mlps.read` reads it, and its evaluation on a whole lookup table
at once. Host-only code.

A decision list is a list of statements, each ``("return", label)`` or ``("if", test, body,
orelse)`` with ``body`` and ``orelse`` decision lists. A test is ``("in", names, rows)``: the
arguments ``names`` take one of the tuples of labels ``rows``; or ``("le", left, right)``: two
linear expressions compared with ``<=``, each ``("num", x)``, ``("arg", name)``, ``("*", x,
name)`` or ``("+" | "-", a, b)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpcore.programs.ir import Label, Variable


def count_tests(stmts: list[Any], kind: str = "in") -> int:
    """How many tests of ``kind`` (``"in"`` or ``"le"``) a decision list makes."""
    return sum(0 if st[0] == "return" else
               (st[1][0] == kind) + count_tests(st[2], kind) + count_tests(st[3], kind)
               for st in stmts)


def returned(stmts: list[Any]) -> list[Label]:
    """Every returned label of a decision list, in order."""
    out: list[Label] = []
    for st in stmts:
        out += [st[1]] if st[0] == "return" else returned(st[2]) + returned(st[3])
    return out


def _value(tree: tuple, columns: dict[str, np.ndarray]) -> Any:
    """A linear expression tree evaluated per key, in Python's order of operations."""
    op = tree[0]
    if op == "num":
        return tree[1]
    if op == "arg":
        return columns[tree[1]]
    if op == "*":
        return tree[1] * columns[tree[2]]
    a, b = _value(tree[1], columns), _value(tree[2], columns)
    return a + b if op == "+" else a - b


def decide(stmts: list[Any], args: dict[str, tuple[Variable, np.ndarray]],
            active: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Run a decision list on every table entry at once, as Python would
    on each: ``args[name]`` is the argument's variable and its value index per entry; ``out``
    gets the label returned at the ``active`` entries. Returns the entries that returned. A
    set is looked up through the variables' labels (Python's ``in``: equal numbers match)."""
    done = np.zeros_like(active)
    for st in stmts:
        todo = active & ~done
        if st[0] == "return":
            out[todo] = st[1]
            return done | todo
        _, test, body, orelse = st
        if test[0] == "in":
            variables = [args[n][0] for n in test[1]]
            member = np.zeros([x.size for x in variables], dtype=bool)
            for row in test[2]:
                at = [x.lookup.get(label) for x, label in zip(variables, row)]
                if None not in at:
                    member[tuple(at)] = True
            hit = member[tuple(args[n][1] for n in test[1])]
        else:
            columns = {n: np.asarray(x.values)[i] for n, (x, i) in args.items()}
            hit = np.asarray(_value(test[1], columns) <= _value(test[2], columns)) & active
        done |= decide(body, args, todo & hit, out)
        done |= decide(orelse, args, todo & ~hit, out)
    return done

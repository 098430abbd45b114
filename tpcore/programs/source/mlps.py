"""An MLP's function, written and read back, in both formats.

Written (:class:`MlpWriter`) as the shortest of: key sets (``key = (a, b)``, then ``if key in
{...}: return v`` per output and a default ``return``); for two arguments, tests on one
argument or on both (:func:`tpcore.programs.rules.fit_sets`); for numerical arguments, rules
(exceptions, then thresholds and straight cuts, :func:`tpcore.programs.rules.fit`). The last
two only where the format's style fits them and every input stays in its listed values.

Read (:func:`read`) as a decision list (:mod:`tpcore.programs.source.decisions`): an optional
``key = ARG`` or ``key = (A, B)``, then ``if TEST: ...`` statements (``elif`` allowed) and
``return <literal>``, ending in a ``return``. Tests: ``SUBJECT in {literals}`` (the key, an
argument, or a tuple of the arguments) and ``LINEAR <= LINEAR`` over the arguments (literals,
names, ``N * NAME``, ``+``, ``-``). Host-only code (NumPy and the standard library).
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from tpcore.programs import rules
from tpcore.programs.compress import MlpPlan
from tpcore.programs.ir import LIMITS, Mlp, Program
from tpcore.programs.source.grammar import Reader, canon, dump, is_name
from tpcore.programs.source.layout import argument, literal, set_test
from tpcore.programs.source.templates import key, subject


class MlpWriter:
    """Writes the MLP functions of one program (each variable's literals computed once)."""

    def __init__(self, program: Program, compress: bool):
        self.p, self.compress = program, compress
        self._literals: dict[str, list[str]] = {}

    def function(self, m: Mlp, mp: MlpPlan, fixed: bool, fit: bool) -> list[str]:
        """``def mlp_L_M(...)`` and its body, indented for ``run``: the arguments, table and
        keys of ``mp``; ``fixed``: the IR's default stays last (where an input may leave its
        listed values, or uncompressed); ``fit``: rules and tests on one argument may be
        written."""
        v = self.p.variables
        keys = [tuple(ix) for ix in np.argwhere(mp.domain).tolist()]
        inputs = list(mp.inputs)
        args = [argument(x) for x in inputs]
        if len(args) == 2 and args[0] == args[1]:
            args[1] += "_2"
        options = []
        if not fixed and fit and keys:
            at = tuple(np.asarray(keys).T)
            labels = mp.table[at]
            if len(inputs) == 2 and len(keys) <= rules.MAX_SET_KEYS:
                options.append(self.set_lines(*rules.fit_sets(np.asarray(keys), labels),
                                              inputs, args, v[m.output].values))
            if m.kind == "numerical":
                values = np.stack([np.asarray(v[x].values)[i] for x, i in zip(inputs, at)], 1)
                fitted = rules.fit(values, labels)
                if fitted is not None:
                    options.append(self.rule_lines(fitted, args, v[m.output].values))
        if not options or _fewest_key_set_lines(mp.table, keys) < min(map(len, options)):
            options.append(self.key_sets(m, mp, keys, args, fixed))
        body = min(options, key=len)
        return [f"    def {m.name}({', '.join(args)}):", *(f"        {line}" for line in body)]

    def key_sets(self, m: Mlp, mp: MlpPlan, keys: list[tuple[int, ...]], args: list[str],
                 fixed: bool) -> list[str]:
        """The body ``key = ...``, ``if key in {...}: return v`` per output, then the default
        return (lines as indented in the function, less 8): when ``fixed`` the IR's default
        (every other output a branch; full: every output), else the output whose branch would
        take the most lines."""
        out = self.p.variables[m.output]
        groups = {}
        for o, members in _by_output(mp.table, keys).items():
            labels = [self.key_literal(list(mp.inputs), ix) for ix in members]
            groups[o] = [x[8:] for x in set_test(8, "if", "key", labels)] + [
                f"    return {literal(out.values[o])}"]
        if fixed:
            default = m.default
            if self.compress:
                groups.pop(default, None)
        else:
            default = max(groups, key=lambda o: (len(groups[o]), -o)) if groups else m.default
            groups.pop(default, None)
        body = [key(args)]
        for n, group in enumerate(groups.values()):
            body += [group[0] if n == 0 else "el" + group[0], *group[1:]]
        return body + [f"return {literal(out.values[default])}"]

    def key_literal(self, inputs: list[str], ix: tuple[int, ...]) -> str:
        """The literal of the key ``ix`` (value indices of ``inputs``): a label or a tuple."""
        vals = [self.literals(x)[i] for x, i in zip(inputs, ix)]
        return vals[0] if len(vals) == 1 else f"({', '.join(vals)})"

    def literals(self, name: str) -> list[str]:
        """The literals of variable ``name``'s values (computed once)."""
        if name not in self._literals:
            self._literals[name] = [literal(x) for x in self.p.variables[name].values]
        return self._literals[name]

    def set_lines(self, tests: list[rules.SetTest], default: int, inputs: list[str],
                  args: list[str], labels: tuple) -> list[str]:
        """The body of a two-argument MLP written as :func:`tpcore.programs.rules.fit_sets`'s
        decision list (lines as indented in the function, less 8)."""
        body: list[str] = []
        for t in tests:
            if t.arg is None:
                items = [self.key_literal(inputs, ix) for ix in t.values]
                tested = subject(args)
            else:
                items = [self.literals(inputs[t.arg])[i] for i in t.values]
                tested = args[t.arg]
            body += [x[8:] for x in set_test(8, "if", tested, items)]
            body.append(f"    return {literal(labels[t.out])}")
        return body + [f"return {literal(labels[default])}"]

    @staticmethod
    def rule_lines(r: rules.Rules, args: list[str], labels: tuple) -> list[str]:
        """The body of a numerical MLP written as rules (lines as indented in the function,
        less 8)."""
        body: list[str] = []
        by_output: dict[int, list[str]] = {}
        for k, o in r.exceptions:
            by_output.setdefault(o, []).append(
                literal(k[0]) if len(k) == 1 else f"({', '.join(map(literal, k))})")
        for o, keys in by_output.items():
            body += [x[8:] for x in set_test(8, "if", subject(args), keys)]
            body.append(f"    return {literal(labels[o])}")
        outer = args[r.outer] if r.outer is not None else None
        inner = args[1 - r.outer] if r.outer is not None else args[0]
        for band in r.bands:
            pad = ""
            if band.upto is not None:
                body.append(f"if {outer} <= {literal(band.upto)}:")
                pad = "    "
            for cut in band.cuts:
                body += [f"{pad}if {_cut_text(cut, inner, outer)}:",
                         f"{pad}    return {literal(labels[cut.out])}"]
            body.append(f"{pad}return {literal(labels[band.last])}")
        return body


def _cut_text(cut: rules.Cut, inner: str, outer: str | None) -> str:
    """``inner <= r`` or ``q * inner <= p * outer + r`` with the terms that are not zero."""
    left = inner if cut.q == 1 else f"{cut.q} * {inner}"
    if cut.p == 0:
        return f"{left} <= {literal(cut.r)}"
    right = outer if cut.p == 1 else f"-{outer}" if cut.p == -1 else f"{cut.p} * {outer}"
    if cut.r:
        right += f" + {literal(cut.r)}" if cut.r > 0 else f" - {literal(-cut.r)}"
    return f"{left} <= {right}"


def _fewest_key_set_lines(table: np.ndarray, keys: list[tuple[int, ...]]) -> int:
    """A lower bound on the lines of :meth:`MlpWriter.key_sets`: two per output but one, plus
    one per key of an output with more keys than fit on a line (44 of two characters)."""
    if not keys:
        return 0
    counts = np.bincount(table[tuple(np.asarray(keys).T)])
    counts = np.sort(counts[counts > 0])[:-1]
    return 2 + int(np.sum(np.where(counts > 44, counts + 2, 2)))


def _by_output(table: np.ndarray, keys: list[tuple[int, ...]]) -> dict[int, list]:
    """``{output index: [keys]}`` in order of first appearance."""
    out: dict[int, list] = {}
    for ix in keys:
        out.setdefault(int(table[ix]), []).append(ix)
    return out


def read(r: Reader, fn: ast.FunctionDef) -> list[Any]:
    """The body of MLP function ``fn`` as a decision list (see the module docstring): the
    statements as ``("if", test, body, orelse)`` and ``("return", label)`` with tests as
    ``("in", names, rows)`` and ``("le", left, right)`` (two linear expressions)."""
    args = [a.arg for a in fn.args.args]
    body = fn.body
    alias: tuple[str, ...] | None = None
    if body and isinstance(body[0], ast.Assign) and is_name(body[0].targets[-1], "key"):
        if dump(body[0]) != canon(key(args)):
            r.fail(body[0], f"{fn.name}: key must be {subject(args)}")
        alias, body = tuple(args), body[1:]
    if not body or not isinstance(body[-1], ast.Return):
        r.fail(fn, f"{fn.name}: must end with a default 'return <literal>'")
    return _decisions(r, fn.name, body, args, alias)


def _decisions(r: Reader, name: str, stmts: list[ast.stmt], args: list[str],
               alias: tuple[str, ...] | None) -> list[Any]:
    out: list[Any] = []
    for node in stmts:
        if isinstance(node, ast.Return) and node.value is not None:
            out.append(("return", r.const(node.value)))
        elif isinstance(node, ast.If):
            orelse = _decisions(r, name, node.orelse, args, alias)
            if orelse and not (len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If)):
                r.fail(node, f"{name}: else branches are not allowed")
            out.append(("if", _test(r, name, node.test, args, alias),
                        _decisions(r, name, node.body, args, alias), orelse))
        else:
            r.fail(node, f"{name}: only if-statements and returns of literals are allowed")
    return out


def _test(r: Reader, name: str, node: ast.expr, args: list[str],
          alias: tuple[str, ...] | None) -> tuple:
    """An MLP test (see the module docstring)."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
        r.fail(node, f"{name}: tests must be 'x in {{...}}' or a comparison with <=")
    left, op, right = node.left, node.ops[0], node.comparators[0]
    if isinstance(op, ast.In) and isinstance(right, ast.Set):
        if alias is not None and is_name(left, "key"):
            names = alias
        elif isinstance(left, ast.Tuple) and all(isinstance(e, ast.Name) for e in left.elts):
            names = tuple(e.id for e in left.elts)
        elif isinstance(left, ast.Name):
            names = (left.id,)
        else:
            names = ()
        if not names or any(n not in args for n in names) or len(set(names)) < len(names):
            r.fail(node, f"{name}: tests name the function's arguments")
        r.bounded(node, len(right.elts), LIMITS.table, f"{name}: set elements")
        return ("in", names, [r.key_const(e, len(names)) for e in right.elts])
    if isinstance(op, ast.LtE):
        return ("le", _linear(r, name, left, args), _linear(r, name, right, args))
    r.fail(node, f"{name}: tests must be 'x in {{...}}' or a comparison with <=")
    raise AssertionError


def _linear(r: Reader, name: str, node: ast.expr, args: list[str]) -> tuple:
    """A sum of number literals, arguments, ``-argument`` and ``literal * argument`` as a
    tree: ``("+" | "-", a, b)``, ``("*", number, argument)``, ``("arg", name)``,
    ``("num", number)``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return ("+" if isinstance(node.op, ast.Add) else "-",
                _linear(r, name, node.left, args), _linear(r, name, node.right, args))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(
            node.operand, ast.Name):
        return ("*", -1, _linear(r, name, node.operand, args)[1])
    if isinstance(node, ast.Name):
        if node.id not in args:
            r.fail(node, f"{name}: {node.id!r} is not an argument")
        return ("arg", node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return ("*", _number(r, name, node.left), _linear(r, name, node.right, args)[1]) \
            if isinstance(node.right, ast.Name) else r.fail(
                node, f"{name}: products are 'number * argument'")
    return ("num", _number(r, name, node))


def _number(r: Reader, name: str, node: ast.expr) -> int | float:
    c = r.const(node)
    if isinstance(c, str):
        r.fail(node, f"{name}: comparisons are between numbers")
    return c

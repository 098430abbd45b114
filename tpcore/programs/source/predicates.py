"""A head's predicate function, written and read back, in both formats:

    def predicate_0_0(q_token, k_token):
        if q_token in {"a", "b"}:
            return k_token == "</s>"
        elif q_token in {"c"}:
            return k_token == q_token

one ``if``/``elif`` branch per key value (the queries that look for it), ``return k == q`` for
queries that look for their own value, and ``return False`` when no query matches anything.
Host-only code (NumPy and the standard library).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

import numpy as np

from tpcore.programs.ir import Head, Label, Variable
from tpcore.programs.source.grammar import Reader, canon, dump, is_name
from tpcore.programs.source.layout import argument, branches, literal
from tpcore.programs.source.parsed import SAME
from tpcore.programs.source.templates import RETURN_FALSE, predicate_name


def write(h: Head, q: Variable, k: Variable, reach: Mapping[str, np.ndarray], compress: bool,
          merge_own: bool) -> list[str]:
    """``def predicate_L_H(q, k)`` and its branches, indented for ``run``. ``q`` and ``k``: the
    query and key variables; ``compress``: queries that look for one key value share a branch,
    and branches no input reaches (``reach``: the values each variable can take) are left
    out; ``merge_own``: the queries that look for their own value share ``return k == q``
    too, when that takes fewer lines."""
    qa, ka = argument(h.query), argument(h.key)
    if qa == ka:
        qa, ka = f"q_{qa}", f"k_{ka}"
    groups: dict[int, list[int]] = {}
    for qi, kj in enumerate(h.predicate.tolist()):
        if kj < 0 or compress and not (reach[h.query][qi] and reach[h.key][kj]):
            continue
        groups.setdefault(kj if compress else -2 - qi, []).append(qi)

    def chain(same: list[int]) -> list[str]:
        out = [([literal(q.values[i]) for i in same], f"return {ka} == {qa}")] if same else []
        for members in groups.values():
            rest = [i for i in members if i not in same]
            if rest:
                kj = int(h.predicate[rest[0]])
                out.append(([literal(q.values[i]) for i in rest],
                            f"return {ka} == {literal(k.values[kj])}"))
        return branches(8, qa, out) or [f"        {RETURN_FALSE}"]

    body = chain([])
    own = [qi for members in groups.values() for qi in members
           if _same_label(q.values[qi], k.values[h.predicate[qi]])]
    if merge_own and len(own) > 1:
        body = min(body, chain(own), key=len)
    return [f"    def {predicate_name(h.name)}({qa}, {ka}):", *body]


def _same_label(a: Label, b: Label) -> bool:
    """Whether labels ``a`` and ``b`` are equal in the generated program (``a == b``, both
    strings or both numbers)."""
    return isinstance(a, str) == isinstance(b, str) and a == b


def read(r: Reader, fn: ast.FunctionDef) -> list[tuple[list[Label], Any]]:
    """The branches ``if q in {...}: return k == <literal>`` (or ``k == q``: the key value
    equal to the query's, :data:`~tpcore.programs.source.parsed.SAME`) as ``(queries, key
    label)``."""
    q, k = (a.arg for a in fn.args.args)
    if len(fn.body) == 1 and dump(fn.body[0]) == canon(RETURN_FALSE):
        return []
    chain, rest = _chain(r, fn, fn.body, q, 1)
    if rest:
        r.fail(rest[0], f"{fn.name}: only if/elif branches are allowed")
    out = []
    for keys, ret in chain:
        if not (isinstance(ret, ast.Compare) and is_name(ret.left, k) and len(ret.ops) == 1
                and isinstance(ret.ops[0], ast.Eq)):
            r.fail(ret, f"{fn.name}: branches must return {k} == <literal> or {k} == {q}")
        same = is_name(ret.comparators[0], q)
        out.append(([key[0] for key in keys],
                    SAME if same else r.const(ret.comparators[0])))
    return out


def _chain(r: Reader, fn: ast.FunctionDef, stmts: list[ast.stmt], subject: str,
           arity: int) -> tuple[list[tuple[list[tuple[Label, ...]], ast.AST]], list[ast.stmt]]:
    """Branches ``if subject in {...}: <return>`` / ``elif`` -> [(keys, return value node)]."""
    found = []
    rest = stmts
    while rest and isinstance(rest[0], ast.If):
        node = rest[0]
        test = node.test
        ok = (isinstance(test, ast.Compare) and is_name(test.left, subject)
              and len(test.ops) == 1 and isinstance(test.ops[0], ast.In)
              and isinstance(test.comparators[0], ast.Set)
              and len(node.body) == 1 and isinstance(node.body[0], ast.Return))
        if not ok:
            r.fail(node, f"{fn.name}: expected 'if {subject} in {{...}}: return ...'")
        keys = [r.key_const(e, arity) for e in test.comparators[0].elts]
        found.append((keys, node.body[0].value))
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            rest = node.orelse + rest[1:]
        elif node.orelse:
            r.fail(node, f"{fn.name}: else branches are not allowed")
        else:
            rest = rest[1:]
    return found, rest

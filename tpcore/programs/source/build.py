"""A parsed program file (:mod:`tpcore.programs.source.parsed` records, from
:mod:`tpcore.programs.source.reader`) and its weights CSV rows turned into the IR, each table
sized by :data:`~tpcore.programs.ir.LIMITS` before it is built; the predicate and MLP bodies are
read here (:func:`tpcore.programs.source.predicates.read`,
:func:`tpcore.programs.source.mlps.read`). Host-only code."""

from __future__ import annotations

import math

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.programs.ir import (
    LIMITS,
    Classifier,
    Head,
    Label,
    Mlp,
    PrefixCount,
    Program,
    ProgramModule,
    RunningCount,
    Variable,
    check_size,
    numerical_range,
)
from tpcore.programs.source import decisions, mlps, predicates
from tpcore.programs.source.grammar import Reader
from tpcore.programs.source.parsed import SAME, Constant, Count, Lookup, Parsed, Pattern


def _typed(label: str, like: Label) -> Label:
    """A CSV value label converted to the type of ``like``."""
    if isinstance(like, str):
        return label
    try:
        return int(label) if isinstance(like, int) else float(label)
    except ValueError:
        return label


class _Builder:
    """The IR of a parsed file, module by module, each variable sized by :data:`LIMITS` before
    its table is built."""

    def __init__(self, p: Reader, csv_values: dict[str, list[str]], max_len: int):
        self.p, self.csv_values, self.max_len = p, csv_values, max_len
        self.variables: dict[str, Variable] = {}
        self.total = 0
        self.entries = 0

    def define(self, var: Variable) -> Variable:
        self.variables[var.name] = var
        self.total += var.size
        check_size(self.total, LIMITS.total_values, f"{self.p.file}: values of all variables")
        return var

    def build(self, rec: Parsed) -> ProgramModule:
        if isinstance(rec, Count):
            return self.count(rec)
        if isinstance(rec, Constant):
            return self.constant(rec)
        if isinstance(rec, Pattern):
            return self.head(rec)
        return self.mlp(rec)

    def count(self, rec: Count) -> ProgramModule:
        if rec.token is None:
            self.define(Variable(rec.name, "numerical", tuple(range(1, self.max_len + 1))))
            return RunningCount(rec.name, rec.name)
        self.define(Variable(rec.name, "numerical", tuple(range(self.max_len))))
        return PrefixCount(rec.name, rec.token, rec.name)

    def constant(self, rec: Constant) -> ProgramModule:
        """One value: a one-entry table over ``ones``."""
        out, c = f"{rec.name}_outputs", rec.value
        ov = self.define(Variable(out, "categorical", tuple(dict.fromkeys(
            [c] + [_typed(x, c) for x in self.csv_values.get(out, ())]))))
        return Mlp(rec.name, "numerical", ("ones",), out,
                   np.full((1,), ov.index(c), dtype=np.int64), ov.index(c))

    def head(self, rec: Pattern) -> ProgramModule:
        p, v = self.p, self.variables
        if rec.value is None:
            p.fail(rec.node, f"{rec.name}_pattern has no {rec.name}_outputs line")
        numerical = rec.name.startswith("num_")
        q, k, val = v[rec.query], v[rec.key], v[rec.value]
        pred = np.full(q.size, -1, dtype=np.int64)
        for qs, kl in reversed(predicates.read(p, rec.fn)):
            for ql in qs:
                if ql in q.lookup:
                    pred[q.lookup[ql]] = k.lookup.get(ql if kl is SAME else kl, -1)
        kind = "numerical" if numerical else "categorical"
        if val.kind != kind:
            p.fail(rec.node, f"{rec.name} reads {val.kind} {val.name!r} as its value")
        labels = numerical_range(val, self.max_len) if numerical else val.values
        out = self.define(Variable(f"{rec.name}_outputs", kind, labels)).name
        return Head(rec.name, kind, q.name, k.name, val.name, out, pred, rec.rule or "closest")

    def mlp(self, rec: Lookup) -> ProgramModule:
        p, out = self.p, f"{rec.name}_outputs"
        stmts = mlps.read(p, rec.fn)
        ins = [self.variables[x] for x in rec.inputs]
        kind = ins[0].kind
        if any(x.kind != kind for x in ins):
            p.fail(rec.node, f"{rec.name} mixes categorical and numerical inputs")
        shape = [x.size for x in ins]
        check_size(math.prod(shape), LIMITS.table, f"{p.file}: {rec.name}: table entries")
        if kind == "categorical" and decisions.count_tests(stmts, "le"):
            p.fail(rec.node, f"{rec.name}: comparisons with <= need numerical inputs")
        self.entries += math.prod(shape)
        check_size(self.entries, LIMITS.total_table,
                   f"{p.file}: table entries of all MLPs up to {rec.name}")
        check_size((decisions.count_tests(stmts) + decisions.count_tests(stmts, "le"))
                   * math.prod(shape), LIMITS.decisions,
                   f"{p.file}: {rec.name}: tests times table entries")
        returned = decisions.returned(stmts)
        default = stmts[-1][1]
        try:
            returned = sorted(set(returned))
        except TypeError:
            pass
        found = [_typed(x, default) for x in self.csv_values.get(out, ())] + returned
        ov = Variable(out, "categorical", tuple(dict.fromkeys(found)))
        check_size(ov.size, LIMITS.values, f"{p.file}: values of {out}")
        grid = np.indices(shape).reshape(len(shape), -1)
        args = {a.arg: (x, g) for a, x, g in zip(rec.fn.args.args, ins, grid)}
        labels = np.empty(grid.shape[1], dtype=object)
        decisions.decide(stmts, args, np.ones(grid.shape[1], dtype=bool), labels)
        table = np.asarray([ov.index(x) for x in labels], dtype=np.int64).reshape(shape)
        self.define(ov)
        return Mlp(rec.name, kind, tuple(rec.inputs), out, table, ov.index(default))


def build(p: Reader, classes: list[str], rows: dict[tuple[str, str], np.ndarray],
           name: str) -> Program:
    """The program of a parsed file: ``p`` is the reader after its pass
    (:class:`tpcore.programs.source.reader.ProgramReader`: its records ``modules``, the file's
    constants, style, features and framing), ``classes`` and ``rows`` the weights CSV
    (:func:`tpcore.programs.source.weights_csv.read`); the modules through :class:`_Builder`."""
    values: dict[str, list[str]] = {}
    for f, x in rows:
        values.setdefault(f, []).append(x)
    if p.style == "tpcore":
        vocab = tuple(p.consts.get("VOCAB", ()))
        max_len = p.consts.get("MAX_LEN", 0)
    else:
        vocab = tuple(values.get("tokens", ()))
        max_len = len(values.get("positions", ()))
    if not vocab or max_len <= 0:
        raise TpcoreError(f"{p.file}: cannot tell the vocabulary and maximum length")
    check_size(len(vocab), LIMITS.vocabulary, f"{p.file}: vocabulary")
    check_size(max_len, LIMITS.max_len, f"{p.file}: maximum length")
    check_size(len(p.modules) + 3, LIMITS.variables, f"{p.file}: variables")
    b = _Builder(p, values, max_len)
    b.define(Variable("tokens", "categorical", vocab))
    b.define(Variable("positions", "categorical", tuple(range(max_len))))
    b.define(Variable("ones", "numerical", (1,)))
    modules = [b.build(rec) for rec in p.modules]
    v = b.variables
    weights, bias = {}, np.asarray(rows.get(("bias", "_"), np.zeros(len(classes))))
    n_rows = sum(v[f].size if v[f].kind == "categorical" else 1 for f in p.features)
    check_size(n_rows * len(classes), LIMITS.weights, f"{p.file}: classifier weights")
    for f in p.features:
        var = v[f]
        if var.kind == "numerical":
            if (f, "_") not in rows:
                raise TpcoreError(f"{p.file}: weights have no row ({f}, _)")
            weights[f] = rows[(f, "_")][None, :]
        else:
            zero = np.zeros(len(classes))
            weights[f] = np.stack([rows.get((f, str(x)), zero) for x in var.values])
    if p.style == "tpcore":
        bos, eos = p.consts.get("BOS"), p.consts.get("EOS")
    else:
        bos, eos = (t if t in vocab else None for t in (p.passthrough.get("bos"),
                                                         p.passthrough.get("eos")))
    return Program(name, v, modules, Classifier(tuple(classes), tuple(p.features), weights, bias),
                   causal=True in p.causal, bos=bos, eos=eos,
                   pad="<pad>" if "<pad>" in vocab else None,
                   passthrough=bool(p.passthrough),
                   meta={"imported_from": p.file, "format": p.style})

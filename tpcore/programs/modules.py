"""The module kinds of the program IR and its classifier, each owning its code.

A kind is one class: its fields, the variables it ``reads``, its ``output`` variable, the
``opcode`` :func:`tpcore.programs.interpret.compile_program` writes for it
(:mod:`tpcore.kernels.program_opcodes`), and

- ``validate(variables, framing)``: raises unless it is well formed among a program's
  variables (whose names, order and reads :func:`tpcore.programs.ir.validate` checks first);
- ``to_json(variables)``: its JSON form, with labels, not indices, under ``"type":
  type_name``; ``from_json(d, common, scope)`` reads it back from untrusted JSON, checking
  every field and size before allocating, and defines its output variable in ``scope``;
- ``evaluate(env, batch)``: its output ``(B, N)`` from the variables before it (the array
  reference of :func:`tpcore.programs.interpret.evaluate`, array module from the inputs).

:data:`ProgramModule` lists the kinds and :data:`MODULE_TYPES` maps each ``type_name`` back to its
class: adding a kind means adding its class here and naming it in :data:`ProgramModule`. Keys ``j``
past a sequence's length are masked, and keys after the query too when the program is
``causal``. Host-only code (NumPy) but for ``evaluate``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, get_args

import numpy as np

from tpcore.backend import xp_of
from tpcore.counts import EXPERTS, expert_features, length_rule, running_counts
from tpcore.kernels import program_opcodes as op
from tpcore.programs.values import (
    KINDS,
    LIMITS,
    Framing,
    Scope,
    Variable,
    check_finite,
    check_label,
    check_name,
    check_size,
    check_variable_name,
    fail,
    need,
    read_labels,
    read_numbers,
    shorten,
)

RULES = ("closest", "published")
FLOAT_TYPES = ("float32", "float64")


@dataclass(frozen=True)
class Batch:
    """What a module's reference evaluation reads besides the variables before it: ``lengths
    (B,)``, the key mask ``(B, N, N)`` (:func:`tpcore.programs.interpret.key_mask`) and the
    program's variables."""

    lengths: Any
    mask: Any
    variables: dict[str, Variable]


def _check_output(m: ProgramModule, variables: dict[str, Variable], categorical: bool) -> None:
    """Raise unless ``m``'s output variable is categorical (``categorical``) or numerical."""
    kind = variables[m.output].kind
    if categorical and kind != "categorical":
        fail(m.name, "output must be categorical")
    if not categorical and kind != "numerical":
        fail(m.name, "numerical head output must be numerical")


@dataclass
class Head:
    """An attention head (categorical or numerical) with its predicate map and rule.

    ``predicate[q] = k`` maps each query index to the one key index it matches (``-1``: matches
    nothing). ``kind="categorical"``: each position attends to one matching key chosen by
    ``rule``: ``"closest"`` (the tpcore model: the nearest matching position, the earlier one on
    equal distance, the query itself only if nothing else matches) or ``"published"`` (the
    authors' ``select_closest`` helper: the query's own position ranks as if at distance
    ``len(matches)``, first minimum in position order); position 0 when nothing matches. Output:
    the value variable at that position (a categorical variable with the value variable's
    labels). ``kind="numerical"``: ``out_i = sum_j [predicate(q_i) == k_j] * value_j`` over
    unmasked keys ``j`` (numerical value variable, numerical output).
    """

    name: str
    kind: str
    query: str
    key: str
    value: str
    output: str
    predicate: np.ndarray
    rule: str = "closest"

    type_name = "head"

    @property
    def reads(self) -> tuple[str, ...]:
        return (self.query, self.key, self.value)

    @property
    def opcode(self) -> int:
        """The kernel's opcode, by ``kind`` (the other kinds name theirs as a class
        attribute)."""
        return op.CAT_HEAD if self.kind == "categorical" else op.NUM_HEAD

    def validate(self, variables: dict[str, Variable], framing: Framing) -> None:
        if self.kind not in KINDS:
            fail(self.name, f"kind {self.kind!r}; expected one of {KINDS}")
        if self.rule not in RULES:
            fail(self.name, f"rule {self.rule!r}; expected one of {RULES}")
        q, k, val = variables[self.query], variables[self.key], variables[self.value]
        if q.kind != "categorical" or k.kind != "categorical":
            fail(self.name, "query and key must be categorical")
        if val.kind != self.kind:
            fail(self.name, f"a {self.kind} head needs a {self.kind} value, got {val.kind} "
                 f"{val.name!r}")
        if self.kind == "categorical" and variables[self.output].values != val.values:
            fail(self.name, "output labels must equal the value variable's labels")
        pred = self.predicate
        if pred.shape != (q.size,) or pred.dtype.kind != "i":
            fail(self.name, f"predicate must be {q.size} ints, got shape {pred.shape} "
                 f"{pred.dtype}")
        if pred.size and (pred.min() < -1 or pred.max() >= k.size):
            fail(self.name, f"predicate entries must be in -1 .. {k.size - 1}")
        _check_output(self, variables, self.kind == "categorical")

    def to_json(self, variables: dict[str, Variable]) -> dict[str, Any]:
        """The predicate as ``[query label, key label]`` pairs of the queries that match."""
        q, k = variables[self.query], variables[self.key]
        pairs = [[q.values[i], k.values[j]] for i, j in enumerate(self.predicate.tolist())
                 if j >= 0]
        return {"type": self.type_name, "name": self.name, "kind": self.kind,
                "query": self.query, "key": self.key, "value": self.value,
                "output": self.output, "rule": self.rule, "predicate": pairs}

    @classmethod
    def from_json(cls, d: dict[str, Any], common: tuple[str, str, str], scope: Scope) -> Head:
        """A numerical head's output values are the file's ``numerical_values`` entry."""
        name, kind, out = common
        q, k, val = (scope.get(need(d, f, name, str), name) for f in ("query", "key", "value"))
        pred = np.full(q.size, -1, dtype=np.int64)
        for pair in need(d, "predicate", name, list):
            if not isinstance(pair, list) or len(pair) != 2:
                fail(name, f"predicate entries must be [query, key] pairs, got {shorten(pair)}")
            pred[q.index(pair[0])] = k.index(pair[1])
        if kind == "categorical":
            scope.add(out, "categorical", val.values)
        else:
            scope.add(out, "numerical", read_labels(need(scope.numerical, out, name), out))
        return cls(name, kind, q.name, k.name, val.name, out, pred, need(d, "rule", name, str))

    def match_scores(self, q: Any, k: Any, mask: Any) -> Any:
        """``S[b, i, j] = (predicate[q[b, i]] == k[b, j])`` on visible keys; ``(B, N, N)``
        bool."""
        xp = xp_of(q)
        target = xp.asarray(self.predicate)[q]
        return (target[:, :, None] == k[:, None, :]) & (target[:, :, None] >= 0) & mask

    def choose_key(self, scores: Any) -> Any:
        """Index of the attended key per query ``(B, N)``, by ``rule``; 0 when nothing matches.

        ``closest``: rank ``2|i-j| - [j < i]`` (nearest, earlier on ties), the query itself
        last. ``published``: rank ``|i-j|``, the query itself ``len(matches)``, ties to the
        earlier position.
        """
        xp = xp_of(scores)
        n = scores.shape[-1]
        i = xp.arange(n)[:, None]
        j = xp.arange(n)[None, :]
        dist = xp.abs(i - j)
        if self.rule == "closest":
            rank = xp.where(i == j, 4 * n, 2 * dist - (j < i))[None] * (n + 1) + j[None]
        else:
            count = scores.sum(axis=-1, keepdims=True)
            rank = xp.where((i == j)[None], count, dist[None]) * (n + 1) + j[None]
        big = 8 * n * (n + 1)
        best = xp.where(scores, rank, big).argmin(axis=-1)
        return xp.where(scores.any(axis=-1), best, 0)

    def evaluate(self, env: dict[str, Any], batch: Batch) -> Any:
        s = self.match_scores(env[self.query], env[self.key], batch.mask)
        if self.kind == "categorical":
            return xp_of(s).take_along_axis(env[self.value], self.choose_key(s), axis=1)
        return (s * env[self.value][:, None, :]).sum(axis=-1)


@dataclass
class Mlp:
    """A lookup ``table`` over the product of its inputs' value sets (``table.shape ==
    (|values_1|, ..., |values_l|)``, ``l`` 1 or 2) giving output indices; a numerical input
    outside its value set gives ``default``."""

    name: str
    kind: str
    inputs: tuple[str, ...]
    output: str
    table: np.ndarray
    default: int

    type_name = "mlp"
    opcode = op.MLP

    @property
    def reads(self) -> tuple[str, ...]:
        return self.inputs

    def validate(self, variables: dict[str, Variable], framing: Framing) -> None:
        if self.kind not in KINDS:
            fail(self.name, f"kind {self.kind!r}; expected one of {KINDS}")
        if not 1 <= len(self.inputs) <= 2:
            fail(self.name, f"reads {len(self.inputs)} inputs; expected 1 or 2")
        for name in self.inputs:
            if variables[name].kind != self.kind:
                fail(self.name, f"a {self.kind} MLP cannot read {variables[name].kind} {name!r}")
        shape = tuple(variables[name].size for name in self.inputs)
        check_size(math.prod(shape), LIMITS.table, f"{self.name}: table entries")
        if self.table.shape != shape or self.table.dtype.kind != "i":
            fail(self.name, f"table must be ints of shape {shape}, got {self.table.shape} "
                 f"{self.table.dtype}")
        k = variables[self.output].size
        if (self.table.size and (self.table.min() < 0 or self.table.max() >= k)
                or not 0 <= self.default < k):
            fail(self.name, f"table entries and default must be in 0 .. {k - 1}")
        _check_output(self, variables, True)

    def to_json(self, variables: dict[str, Variable]) -> dict[str, Any]:
        """The table as output labels in row-major order, with the output's values."""
        out = variables[self.output].values
        return {"type": self.type_name, "name": self.name, "kind": self.kind,
                "inputs": list(self.inputs), "output": self.output, "output_values": list(out),
                "table": [out[i] for i in self.table.ravel().tolist()],
                "default": out[self.default]}

    @classmethod
    def from_json(cls, d: dict[str, Any], common: tuple[str, str, str], scope: Scope) -> Mlp:
        name, kind, out = common
        inputs = [scope.get(r, name) for r in need(d, "inputs", name, list)]
        if not 1 <= len(inputs) <= 2:
            fail(name, f"reads {len(inputs)} inputs; expected 1 or 2")
        shape = tuple(x.size for x in inputs)
        check_size(math.prod(shape), LIMITS.table, f"{name}: table entries")
        entries = need(d, "table", name, list)
        if len(entries) != math.prod(shape):
            fail(name, f"table has {len(entries)} entries; expected {math.prod(shape)}")
        ov = scope.add(out, "categorical", read_labels(need(d, "output_values", name), out))
        table = np.asarray([ov.index(x) for x in entries], dtype=np.int64).reshape(shape)
        return cls(name, kind, tuple(x.name for x in inputs), out, table,
                   ov.index(need(d, "default", name)))

    def table_index(self, env: dict[str, Any], variables: dict[str, Variable]) -> Any:
        """Flat table index per position, or ``-1`` where a numerical input is outside its
        values."""
        xp = xp_of(env["tokens"])
        flat = None
        for name in self.inputs:
            var = variables[name]
            x = env[name]
            if var.kind == "numerical":
                vals = xp.asarray(np.asarray(var.values, dtype=np.float64))
                pos = xp.clip(xp.searchsorted(vals, x), 0, var.size - 1)
                x = xp.where(vals[pos] == x, pos, -1)
            flat = x if flat is None else xp.where((flat < 0) | (x < 0), -1, flat * var.size + x)
        return flat

    def evaluate(self, env: dict[str, Any], batch: Batch) -> Any:
        xp = xp_of(env["tokens"])
        idx = self.table_index(env, batch.variables)
        table = xp.asarray(self.table.ravel())
        return xp.where(idx >= 0, table[xp.maximum(idx, 0)], self.default)


@dataclass
class PrefixCount:
    """PrefixSumCounts: ``out_t = #{i < t : tokens_i = token}``, a numerical variable
    with values ``0 .. max_len - 1``."""

    name: str
    token: str
    output: str
    kind: str = "numerical"

    type_name = "prefix_count"
    opcode = op.PREFIX_COUNT

    @property
    def reads(self) -> tuple[str, ...]:
        return ("tokens",)

    def validate(self, variables: dict[str, Variable], framing: Framing) -> None:
        max_len = variables["positions"].size
        if not isinstance(self.token, str) or self.token not in variables["tokens"].lookup or \
                variables[self.output].values != tuple(range(max_len)):
            fail(self.name, f"counts a token of the vocabulary ({shorten(self.token)}) into "
                 f"values 0 .. {max_len - 1}")
        _check_output(self, variables, self.kind == "categorical")

    def to_json(self, variables: dict[str, Variable]) -> dict[str, Any]:
        return {"type": self.type_name, "name": self.name, "kind": self.kind,
                "token": self.token, "output": self.output}

    @classmethod
    def from_json(cls, d: dict[str, Any], common: tuple[str, str, str],
                  scope: Scope) -> PrefixCount:
        name, _, out = common
        m = cls(name, need(d, "token", name, str), out)
        scope.add(out, "numerical", count_values(m, scope.tokens, *scope.framing, scope.max_len))
        return m

    def evaluate(self, env: dict[str, Any], batch: Batch) -> Any:
        ids, lengths = env["tokens"], batch.lengths
        xp = xp_of(ids)
        hit = ((ids == batch.variables["tokens"].index(self.token))
               & (xp.arange(ids.shape[1])[None, :] < lengths[:, None]))
        return (xp.cumsum(hit, axis=1) - hit).astype(np.float64)


@dataclass
class RunningCount:
    """The running count of each position's own token, itself included: ``out_t = #{i <= t :
    tokens_i = tokens_t}``, a numerical variable with values ``1 .. max_len`` (the
    PrefixSumCounts of the counting paper's released code)."""

    name: str
    output: str
    kind: str = "numerical"

    type_name = "running_count"
    opcode = op.RUNNING_COUNT

    @property
    def reads(self) -> tuple[str, ...]:
        return ("tokens",)

    def validate(self, variables: dict[str, Variable], framing: Framing) -> None:
        max_len = variables["positions"].size
        if variables[self.output].values != tuple(range(1, max_len + 1)):
            fail(self.name, f"counts into values 1 .. {max_len}")
        _check_output(self, variables, False)

    def to_json(self, variables: dict[str, Variable]) -> dict[str, Any]:
        return {"type": self.type_name, "name": self.name, "kind": self.kind,
                "output": self.output}

    @classmethod
    def from_json(cls, d: dict[str, Any], common: tuple[str, str, str],
                  scope: Scope) -> RunningCount:
        name, _, out = common
        m = cls(name, out)
        scope.add(out, "numerical", count_values(m, scope.tokens, *scope.framing, scope.max_len))
        return m

    def evaluate(self, env: dict[str, Any], batch: Batch) -> Any:
        ids, lengths = env["tokens"], batch.lengths
        xp = xp_of(ids)
        pad = xp.arange(ids.shape[1])[None, :] >= lengths[:, None]
        return running_counts(xp.where(pad, 0, ids), batch.variables["tokens"].size, pad,
                              np.float64)


@dataclass
class ExpertCount:
    """The SparseExpertCountingNetwork's discrete gate: ``weights: (5, V)`` (columns
    in token order), ``bias: (5,)``, both host float64 (the model's values), ``dtype``: the
    model's float type, which relative frequencies are divided in (numerical output).

    With the histogram ``h[v]`` of the sequence's tokens (every position before its length,
    framing included) and ``n = sum h``, the experts at ``t`` are ``E1 = n``, ``E2 = h[x_t]``,
    ``E3 = [h[x_t] = max h]``, ``E4 = [h[x_t] = 1]``, ``E5 = h[x_t] / n``; the gate scores
    ``z_i = b_i + sum_v W[i, v] h[v]`` (float64, added in token order), the first maximum picks
    one expert per sequence, ``out_t = E_{i*}(t)``. Its values (:func:`expert_values`) are what
    the experts the gate can pick on framed inputs produce.
    """

    name: str
    output: str
    weights: np.ndarray
    bias: np.ndarray
    dtype: str = "float32"
    kind: str = "numerical"

    type_name = "expert_count"
    opcode = op.EXPERT_COUNT

    @property
    def reads(self) -> tuple[str, ...]:
        return ("tokens",)

    def check_gate(self, n_tokens: int, max_len: int) -> None:
        """Shapes, finiteness, size and float type of the gate (what :func:`expert_values`
        needs)."""
        shape = (len(EXPERTS), n_tokens)
        if self.weights.shape != shape or self.bias.shape != shape[:1]:
            fail(self.name, f"weights must have shape {shape} and bias ({shape[0]},), got "
                 f"{self.weights.shape} and {self.bias.shape}")
        check_finite(self.weights, f"{self.name}: gate weights")
        check_finite(self.bias, f"{self.name}: gate bias")
        check_size(n_tokens * max_len, LIMITS.gate,
                   f"{self.name}: vocabulary times maximum length")
        if self.dtype not in FLOAT_TYPES:
            fail(self.name, f"dtype {self.dtype!r}; expected one of {FLOAT_TYPES}")

    def validate(self, variables: dict[str, Variable], framing: Framing) -> None:
        tokens, max_len = variables["tokens"], variables["positions"].size
        self.check_gate(tokens.size, max_len)
        if variables[self.output].values != expert_values(self, tokens, *framing, max_len):
            fail(self.name, "output values must be those of the experts its gate can pick")
        _check_output(self, variables, self.kind == "categorical")

    def to_json(self, variables: dict[str, Variable]) -> dict[str, Any]:
        """The gate as ``{expert: bias}`` and ``{expert: {token: weight}}``."""
        tok = variables["tokens"].values
        return {"type": self.type_name, "name": self.name, "kind": self.kind,
                "output": self.output, "dtype": self.dtype,
                "bias": dict(zip(EXPERTS, self.bias.tolist())),
                "weights": {e: dict(zip(tok, row))
                            for e, row in zip(EXPERTS, self.weights.tolist())}}

    @classmethod
    def from_json(cls, d: dict[str, Any], common: tuple[str, str, str],
                  scope: Scope) -> ExpertCount:
        name, _, out = common
        tok = scope.tokens
        gate_w, gate_b = need(d, "weights", name, dict), need(d, "bias", name, dict)
        rows = [[need(need(gate_w, e, name, dict), t, name) for t in tok.values]
                for e in EXPERTS]
        m = cls(name, out, read_numbers(rows, f"{name} gate weights", 2),
                read_numbers([need(gate_b, e, name) for e in EXPERTS], f"{name} gate bias", 1),
                need(d, "dtype", name, str))
        scope.add(out, "numerical", count_values(m, tok, *scope.framing, scope.max_len))
        return m

    def evaluate(self, env: dict[str, Any], batch: Batch) -> Any:
        """The experts of :func:`tpcore.counts.expert_features` (in ``dtype``, as the model
        computes them) at the gate's first maximum ``argmax_i b_i + sum_v W[i, v] h[v]``
        (float64, added in token order, as the numba kernel and the generated program add
        them); float64, 0 past each length."""
        ids, lengths = env["tokens"], batch.lengths
        xp = xp_of(ids)
        pad = xp.arange(ids.shape[1])[None, :] >= lengths[:, None]
        h, e = expert_features(xp.where(pad, 0, ids), self.weights.shape[1], pad, self.dtype)
        h = h.astype(np.float64)
        w = xp.asarray(self.weights)
        z = xp.broadcast_to(xp.asarray(self.bias), (ids.shape[0], len(self.bias)))
        for v in range(w.shape[1]):
            z = z + h[:, v, None] * w[:, v]
        pick = z.argmax(axis=1)[None, :, None]
        return xp.take_along_axis(e, pick, axis=0)[0].astype(np.float64)


ProgramModule = Head | Mlp | PrefixCount | RunningCount | ExpertCount
MODULE_TYPES: dict[str, type[ProgramModule]] = {kind.type_name: kind
                                                for kind in get_args(ProgramModule)}
"""The class of each module ``"type"`` of the JSON form."""


def read_module(d: Any, i: int, scope: Scope) -> ProgramModule:
    """Module ``i`` of a JSON program: its name, kind and output checked here, the rest by its
    kind's ``from_json``, which defines its output variable in ``scope``."""
    name = check_variable_name(need(d, "name", f"module {i}"), f"module {i} name")
    kind, out = need(d, "kind", name, str), need(d, "output", name, str)
    check_variable_name(out, f"{name} output")
    mtype = d.get("type")
    cls = MODULE_TYPES.get(mtype) if isinstance(mtype, str) else None
    if cls is None:
        names = [repr(t) for t in MODULE_TYPES]
        fail(f"module {i}", f"type {shorten(mtype)}; expected {', '.join(names[:-1])} or "
             f"{names[-1]}")
    return cls.from_json(d, (name, kind, out), scope)


def count_values(m: PrefixCount | RunningCount | ExpertCount, tokens: Variable,
                 bos: str | None, eos: str | None, pad: str | None, max_len: int
                 ) -> tuple[int | float, ...]:
    """The values of the output of a module that reads only the tokens, on framed inputs of at
    most ``max_len`` tokens: a prefix count's ``0 .. max_len - 1``; a running count's
    ``1 .. max_len``; an expert gate's :func:`expert_values`, once its shapes and size are
    checked."""
    if isinstance(m, PrefixCount):
        return tuple(range(max_len))
    if isinstance(m, RunningCount):
        return tuple(range(1, max_len + 1))
    m.check_gate(tokens.size, max_len)
    return expert_values(m, tokens, bos, eos, pad, max_len)


def expert_rule(m: ExpertCount, tokens: Variable, bos: str | None, eos: str | None,
                pad: str | None, max_len: int) -> dict[int, str | None]:
    """Content length ``L`` -> the expert ``m``'s gate picks for every framed input with ``L``
    content tokens, None where it depends on the input (:func:`tpcore.counts.
    length_rule`): ``bos``/``eos`` occur once, every other token but ``pad`` is content, and
    ``L`` runs over ``0 .. max_len - #framing``."""
    framing = {tokens.values.index(t): 1 for t in (bos, eos) if t in tokens.values}
    content = [i for i, t in enumerate(tokens.values) if t not in (bos, eos, pad)]
    longest = max_len - len(framing) if content else 0
    return length_rule(m.weights, m.bias, framing, content, range(longest + 1))


def expert_values(m: ExpertCount, tokens: Variable, bos: str | None, eos: str | None,
                  pad: str | None, max_len: int) -> tuple[int | float, ...]:
    """Sorted values of ``m``'s output on framed inputs of at most ``max_len`` tokens: the
    integers ``0 .. max_len`` when the gate can pick a count or an indicator expert, and every
    ``a / n`` (``1 <= a <= n <= max_len``, divided in ``m.dtype``; integral ones as ints) when it
    can pick ``relative_frequency``. An expert can be picked when :func:`expert_rule` fixes it
    at some length; all can be where the choice depends on the input."""
    rule = expert_rule(m, tokens, bos, eos, pad, max_len)
    experts = set(EXPERTS) if None in rule.values() else set(rule.values())
    values: set[int | float] = set()
    if experts - {"relative_frequency"}:
        values.update(range(max_len + 1))
    if "relative_frequency" in experts:
        check_size(max_len * (max_len + 1) // 2, LIMITS.values,
                   f"{m.name}: relative frequencies a / n with n <= {max_len}")
        n = np.arange(1, max_len + 1)
        a, n = np.meshgrid(n, n, indexing="ij")
        q = (a.astype(m.dtype) / n.astype(m.dtype))[a <= n]
        values.update(int(x) if x.is_integer() else x for x in q.astype(np.float64).tolist())
    return tuple(sorted(values))


@dataclass
class Classifier:
    """Linear classifier over ``features``; ``weights[f]: (k_f, C)`` (``(1, C)`` if numerical);
    ``masked``: indices of classes never predicted (kept so that class indices stay the
    model's).

    ``logits_i = bias + sum_f W_f[index of f_i]`` for a categorical feature ``f`` and
    ``+ W_f[0] * f_i`` for a numerical one, summed in ``features`` order in float64; the
    prediction is the first maximum over the classes not ``masked``.
    """

    classes: tuple[str, ...]
    features: tuple[str, ...]
    weights: dict[str, np.ndarray]
    bias: np.ndarray
    masked: tuple[int, ...] = ()

    def kept(self) -> list[int]:
        """Indices of the classes that can be predicted."""
        return [c for c in range(len(self.classes)) if c not in self.masked]

    def validate(self, variables: dict[str, Variable]) -> None:
        n = len(self.classes)
        check_size(n, LIMITS.classes, "classes")
        for x in self.classes:
            check_label(x, "classes")
        if n == 0 or len(set(self.classes)) != n:
            fail("classifier", "classes must be non-empty and distinct")
        if any(not 0 <= m < n for m in self.masked) or len(set(self.masked)) >= n:
            fail("classifier", f"masked classes must be distinct indices in 0 .. {n - 1}, "
                 "leaving at least one class")
        if self.bias.shape != (n,):
            fail("classifier", f"bias must have shape ({n},), got {self.bias.shape}")
        check_finite(self.bias, "classifier bias")
        if set(self.features) != set(self.weights) or len(set(self.features)) != len(
                self.features):
            fail("classifier", "features and weights must name the same distinct variables")
        for f in self.features:
            if f not in variables:
                fail("classifier", f"feature {f!r} is not a variable")
            rows = variables[f].size if variables[f].kind == "categorical" else 1
            if self.weights[f].shape != (rows, n):
                fail("classifier", f"weights of {f!r} must have shape ({rows}, {n}), "
                     f"got {self.weights[f].shape}")
            check_finite(self.weights[f], f"classifier weights of {f!r}")
        check_size(sum(self.weights[f].size for f in self.features), LIMITS.weights,
                   "classifier weights")

    def to_json(self) -> dict[str, Any]:
        """Masked classes by label; weights as rows of lists."""
        return {"classes": list(self.classes), "bias": self.bias.tolist(),
                "masked": [self.classes[m] for m in self.masked],
                "features": list(self.features),
                "weights": {f: self.weights[f].tolist() for f in self.features}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Classifier:
        classes = need(d, "classes", "classifier", list)
        check_size(len(classes), LIMITS.classes, "classes")
        feats = [check_name(f, "classifier feature")
                 for f in need(d, "features", "classifier", list)]
        masked = need(d, "masked", "classifier", list) if "masked" in d else []
        index = {c: i for i, c in enumerate(classes) if isinstance(c, str)}
        for x in masked:
            if not isinstance(x, str) or x not in index:
                fail("classifier", f"masked class {shorten(x)} is not a class")
        weights = need(d, "weights", "classifier", dict)
        check_size(sum(len(w) * len(classes) for w in weights.values() if isinstance(w, list)),
                   LIMITS.weights, "classifier weights")
        return cls(
            tuple(classes), tuple(feats),
            {f: read_numbers(w, f"classifier weights of {shorten(f)}", 2)
             for f, w in weights.items()},
            read_numbers(need(d, "bias", "classifier"), "classifier bias", 1),
            tuple(index[x] for x in masked))

    def evaluate(self, env: dict[str, Any], variables: dict[str, Variable]) -> Any:
        """Logits ``(B, N, C)`` in float64, summed in ``features`` order; masked classes get
        ``-inf``."""
        xp = xp_of(env["tokens"])
        logits = xp.broadcast_to(xp.asarray(self.bias),
                                 env["tokens"].shape + self.bias.shape).copy()
        for f in self.features:
            w = xp.asarray(self.weights[f])
            if variables[f].kind == "categorical":
                logits = logits + w[env[f]]
            else:
                logits = logits + env[f][..., None] * w[0]
        if self.masked:
            logits[..., list(self.masked)] = -np.inf
        return logits

"""The program IR: a discrete Transformer Program as plain data.

A :class:`Program` is a list of named variables and a list of modules run in order, each reading
variables defined before it and defining one new variable, followed by a linear classifier over
chosen variables. Host-only code (NumPy and the standard library).

Variables
    ``categorical``: ``values`` lists the labels of the one-hot indices (index ``i`` has label
    ``values[i]``; token strings for ``tokens`` and what copies them, ints for ``positions`` and MLP
    outputs). ``numerical``: ``values`` lists every value the variable can take (sorted).
    Inputs: ``tokens`` (categorical), ``positions`` (categorical, ``0 .. max_len - 1``) and
    ``ones`` (numerical, ``[1]``).

Modules
    :class:`Head` (``kind="categorical"``): ``predicate[q] = k`` maps each query index to the one
    key index it matches (``-1``: matches nothing). Each position attends to one matching key chosen
    by ``rule``: ``"closest"`` (the tpcore model: the nearest matching position, the earlier one on
    equal distance, the query itself only if nothing else matches) or ``"published"`` (the authors'
    ``select_closest`` helper: the query's own position ranks as if at distance ``len(matches)``,
    first minimum in position order); position 0 when nothing matches. Output: the value variable
    at that position (a categorical variable with the value variable's labels).
    :class:`Head` (``kind="numerical"``): ``out_i = sum_j [predicate(q_i) == k_j] * value_j`` over
    unmasked keys ``j`` (numerical value variable, numerical output).
    :class:`Mlp`: a lookup ``table`` over the product of its inputs' value sets (``table.shape ==
    (|values_1|, ..., |values_l|)``) giving output indices; a numerical input outside its value set
    gives ``default``.
    :class:`PrefixCount` (PrefixSumCounts, issue 5): ``out_t = #{i < t : tokens_i = token}``, a
    numerical variable with values ``0 .. max_len - 1``.
    :class:`ExpertCount` (the SparseExpertCountingNetwork's discrete gate, issue 5): with the
    histogram ``h[v]`` of the sequence's tokens (every position before its length, framing
    included) and ``n = sum h``, the experts at ``t`` are ``E1 = n``, ``E2 = h[x_t]``,
    ``E3 = [h[x_t] = max h]``, ``E4 = [h[x_t] = 1]``, ``E5 = h[x_t] / n`` (divided in ``dtype``,
    the model's float type); the gate scores ``z_i = b_i + sum_v W[i, v] h[v]`` (float64, added
    in token order), the first maximum picks one expert per sequence, ``out_t = E_{i*}(t)``.
    Its values (:func:`expert_values`) are what the experts the gate can pick on framed inputs
    produce.
    Keys ``j`` past a sequence's length are masked, and keys after the query too when ``causal``.

Classifier
    ``logits_i = bias + sum_f W_f[index of f_i]`` for a categorical feature ``f`` (``W_f: (k, C)``)
    and ``+ W_f[0] * f_i`` for a numerical one (``W_f: (1, C)``), summed in ``features`` order in
    float64;
    the prediction is the first maximum over ``classes`` not listed in ``masked`` (classes the
    model never predicts, kept so that class indices stay the model's).
    Pass-through (``passthrough=True``): at position 0 a ``bos`` token predicts ``bos``; at the last
    position an ``eos`` token predicts ``eos`` (the published programs do this).

Untrusted input
    A program read from a file is data: names are ASCII Python identifiers (not keywords) of at
    most ``LIMITS.name_chars`` characters, labels are strings of bounded length or finite numbers,
    and every size is bounded by :data:`LIMITS`, checked before anything of that size is
    allocated. :func:`validate` checks every program against them.
"""

from __future__ import annotations

import json
import keyword
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from tpcore.counts import EXPERTS, length_rule
from tpcore.errors import TpcoreError
from tpcore.io import write_json
from tpcore.kernels import program_opcodes as op

FORMAT = "tpcore-program"
VERSION = 1
KINDS = ("categorical", "numerical")
RULES = ("closest", "published")
FLOAT_TYPES = ("float32", "float64")
INPUTS = ("tokens", "positions", "ones")

Label = str | int | float


@dataclass(frozen=True)
class Limits:
    """Bounds on what a program file can make tpcore read, allocate or compute. Loaders check
    each one before allocating anything of that size; the largest value among the programs of
    the tests, ``results/`` and the authors' published RASP programs is given in brackets."""

    file_bytes: int = 16 * 2**20
    """Bytes of one file: an IR ``.json``, a program ``.py``, a weights CSV, a saved model's
    ``.npz`` (its arrays' bytes) or ``.json`` (the program generated from the Dyck-2 model of
    ``results/table1``: 13 MB)."""
    depth: int = 64
    """Nesting depth of a JSON document or of a program's syntax tree; an ``elif`` continues its
    ``if`` at the same depth (12)."""
    name_chars: int = 64
    """Characters of a program, variable or module name (20)."""
    label_chars: int = 256
    """Characters of a string label (19)."""
    number: float = 2.0**53
    """Magnitude of a numerical label or value, so that integers are exact in float64 (61,440)."""
    max_len: int = 4096
    """Maximum sequence length: the size of ``positions`` (66)."""
    vocabulary: int = 2**16
    """Tokens (862)."""
    classes: int = 4096
    """Output classes (15)."""
    variables: int = 4096
    """Variables, inputs included; each module defines one (55)."""
    values: int = 2**17
    """Values of one variable (61,441)."""
    total_values: int = 2**21
    """Values of all variables together: what the interpreter lays out per value (86,365)."""
    table: int = 2**21
    """Entries of one MLP table: the product of its inputs' value-set sizes (1,052,929; a
    failed seed of ``results/counting_arch``, prefix seed 5, has 14,753,281 and is refused)."""
    weights: int = 2**22
    """Classifier weights: rows of all features times classes (6,675)."""
    gate: int = 2**20
    """Vocabulary size times maximum length for an expert gate (the lengths its rule is
    decided at; 256)."""


LIMITS = Limits()
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def shorten(x: Any, chars: int = 60) -> str:
    """``repr(x)``, cut to about ``chars`` characters for error messages."""
    text = repr(x) if not isinstance(x, str) or len(x) <= 4 * chars else repr(x[: 4 * chars])
    return text if len(text) <= chars else f"{text[: chars - 5]}...{text[-1]}"


def check_name(name: Any, what: str) -> str:
    """``name`` when it is an ASCII Python identifier of at most ``LIMITS.name_chars``
    characters and not a keyword; else raises naming it."""
    if not (isinstance(name, str) and len(name) <= LIMITS.name_chars and NAME.fullmatch(name)
            and not keyword.iskeyword(name)):
        raise TpcoreError(f"{what} {shorten(name)} is not a name: expected an ASCII Python "
                          f"identifier of at most {LIMITS.name_chars} characters, not a keyword")
    return name


def check_label(x: Any, what: str) -> Label:
    """``x`` when it is a string of at most ``LIMITS.label_chars`` characters or a finite number
    of magnitude at most ``LIMITS.number``; else raises naming it."""
    if isinstance(x, str):
        if len(x) <= LIMITS.label_chars:
            return x
        raise TpcoreError(f"{what}: label {shorten(x)} has {len(x)} characters; expected at most "
                          f"{LIMITS.label_chars}")
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        if abs(x) <= LIMITS.number:
            return x
        raise TpcoreError(f"{what}: value {shorten(x)} is not a finite number of magnitude at "
                          f"most {LIMITS.number:.0f}")
    raise TpcoreError(f"{what}: label {shorten(x)} is not a string or a number")


def check_size(n: int, limit: int, what: str) -> None:
    """Raise naming ``what`` when ``n`` exceeds ``limit``."""
    if n > limit:
        raise TpcoreError(f"{what}: {n:,} exceeds the limit of {limit:,}")


def check_finite(a: np.ndarray, what: str) -> None:
    """Raise naming ``what`` and the first row (first axis) holding NaN, inf or a magnitude
    above ``LIMITS.number``."""
    bad = ~(np.abs(a) <= LIMITS.number)
    if bad.any():
        row = np.argwhere(bad)[0]
        where = f" row {row[0]}" if a.ndim > 1 else f" entry {row[0]}" if a.ndim == 1 else ""
        raise TpcoreError(f"{what}{where}: {a[tuple(row)]} is not a finite number of magnitude "
                          f"at most {LIMITS.number:.0f}")


def read_limited(path: str | Path, what: str = "file") -> str:
    """The UTF-8 text of ``path``, reading at most ``LIMITS.file_bytes + 1`` bytes."""
    path = Path(path)
    with open(path, "rb") as f:
        data = f.read(LIMITS.file_bytes + 1)
    if len(data) > LIMITS.file_bytes:
        raise TpcoreError(f"{path}: {what} larger than the limit of {LIMITS.file_bytes:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TpcoreError(f"{path}: {what} is not UTF-8 text ({exc.reason} at byte "
                          f"{exc.start})") from None


@dataclass(frozen=True)
class Variable:
    """A named variable; ``values`` are its labels (categorical) or reachable values (numerical)."""

    name: str
    kind: str
    values: tuple[Label, ...]

    @property
    def size(self) -> int:
        return len(self.values)

    @cached_property
    def lookup(self) -> dict[Label, int]:
        """``{label: index}`` (the first index of a label)."""
        out: dict[Label, int] = {}
        for i, x in enumerate(self.values):
            out.setdefault(x, i)
        return out

    def index(self, label: Label) -> int:
        """Index of ``label`` among ``values``; raises naming the variable when absent."""
        try:
            return self.lookup[label]
        except (KeyError, TypeError):
            raise TpcoreError(
                f"value {shorten(label)} is not a value of variable {self.name!r} "
                f"(values: {shorten(list(self.values)[:12], 200)}"
                f"{' ...' if self.size > 12 else ''})"
            ) from None


@dataclass
class Head:
    """An attention head (categorical or numerical) with its predicate map and rule."""

    name: str
    kind: str
    query: str
    key: str
    value: str
    output: str
    predicate: np.ndarray
    rule: str = "closest"

    @property
    def reads(self) -> tuple[str, ...]:
        return (self.query, self.key, self.value)

    @property
    def opcode(self) -> int:
        """The kernel's opcode of this kind of module (:mod:`tpcore.kernels.program_opcodes`;
        the other module kinds name theirs as a class attribute)."""
        return op.CAT_HEAD if self.kind == "categorical" else op.NUM_HEAD


@dataclass
class Mlp:
    """A lookup table from the product of input value sets to output indices."""

    name: str
    kind: str
    inputs: tuple[str, ...]
    output: str
    table: np.ndarray
    default: int

    opcode = op.MLP

    @property
    def reads(self) -> tuple[str, ...]:
        return self.inputs


@dataclass
class PrefixCount:
    """How often ``token`` occurs strictly before each position (numerical output)."""

    name: str
    token: str
    output: str
    kind: str = "numerical"
    opcode = op.PREFIX_COUNT

    @property
    def reads(self) -> tuple[str, ...]:
        return ("tokens",)


@dataclass
class ExpertCount:
    """The expert gate: ``weights: (5, V)`` (columns in token order), ``bias: (5,)``, both host
    float64 (the model's values), ``dtype``: the float type relative frequencies are divided in
    (numerical output; semantics in the module docstring)."""

    name: str
    output: str
    weights: np.ndarray
    bias: np.ndarray
    dtype: str = "float32"
    kind: str = "numerical"
    opcode = op.EXPERT_COUNT

    @property
    def reads(self) -> tuple[str, ...]:
        return ("tokens",)


Module = Head | Mlp | PrefixCount | ExpertCount


@dataclass
class Classifier:
    """Linear classifier over ``features``; ``weights[f]: (k_f, C)`` (``(1, C)`` if numerical);
    ``masked``: indices of classes never predicted."""

    classes: tuple[str, ...]
    features: tuple[str, ...]
    weights: dict[str, np.ndarray]
    bias: np.ndarray
    masked: tuple[int, ...] = ()

    def kept(self) -> list[int]:
        """Indices of the classes that can be predicted."""
        return [c for c in range(len(self.classes)) if c not in self.masked]


@dataclass
class Program:
    """A whole discrete program. ``bos``/``eos``: framing tokens the task adds around an input."""

    name: str
    variables: dict[str, Variable]
    modules: list[Module]
    classifier: Classifier
    causal: bool = False
    bos: str | None = None
    eos: str | None = None
    pad: str | None = None
    passthrough: bool = True
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate(self)

    @property
    def tokens(self) -> Variable:
        return self.variables["tokens"]

    @property
    def max_len(self) -> int:
        return self.variables["positions"].size

    def module(self, name: str) -> Module:
        for m in self.modules:
            if m.name == name:
                return m
        raise TpcoreError(f"no module named {name!r}; modules: {[m.name for m in self.modules]}")

    def producer(self, variable: str) -> Module | None:
        """The module whose output is ``variable`` (``None`` for inputs)."""
        return next((m for m in self.modules if m.output == variable), None)

    def output_labels(self) -> tuple[str, ...]:
        """Labels of prediction indices: the classes, then pass-through tokens not among them."""
        extra = [t for t in (self.bos, self.eos)
                 if self.passthrough and t is not None and t not in self.classifier.classes]
        return self.classifier.classes + tuple(extra)

    def frame(self, tokens: Iterable[str]) -> list[str]:
        """``tokens`` with the task's BOS/EOS added where missing."""
        out = list(tokens)
        if self.bos is not None and (not out or out[0] != self.bos):
            out.insert(0, self.bos)
        if self.eos is not None and (not out or out[-1] != self.eos):
            out.append(self.eos)
        return out


def _fail(where: str, msg: str) -> NoReturn:
    raise TpcoreError(f"invalid program ({where}): {msg}")


def validate(p: Program) -> None:
    """Check that ``p`` is well formed: names, inputs, read-before-write order, kinds, shapes,
    ranges and the :data:`LIMITS`."""
    v = p.variables
    check_name(p.name, "program name")
    check_size(len(v), LIMITS.variables, "variables")
    for name in [*v, *(m.name for m in p.modules)]:
        check_name(name, "variable or module name")
    if len({m.name for m in p.modules}) != len(p.modules):
        _fail("modules", "module names must be distinct")
    for name in INPUTS:
        if name not in v:
            _fail("variables", f"missing input variable {name!r}")
    check_size(sum(var.size for var in v.values()), LIMITS.total_values,
               "values of all variables")
    for name, var in v.items():
        if name != var.name:
            _fail(name, f"variable stored under {name!r} is named {shorten(var.name)}")
        if var.kind not in KINDS:
            _fail(name, f"kind {shorten(var.kind)}; expected one of {KINDS}")
        if var.size == 0:
            _fail(name, "empty value set")
        check_size(var.size, LIMITS.values, f"values of {name!r}")
        for x in var.values:
            check_label(x, name)
        if var.kind == "categorical" and len(var.lookup) != var.size:
            _fail(name, "repeated labels")
        if var.kind == "numerical" and (any(isinstance(x, str) for x in var.values)
                                        or list(var.values) != sorted(set(var.values))):
            _fail(name, "numerical values must be sorted and distinct numbers")
    if v["tokens"].kind != "categorical" or v["positions"].kind != "categorical":
        _fail("variables", "tokens and positions must be categorical")
    if any(not isinstance(t, str) for t in v["tokens"].values):
        _fail("tokens", "tokens must be strings")
    check_size(v["tokens"].size, LIMITS.vocabulary, "vocabulary")
    check_size(v["positions"].size, LIMITS.max_len, "maximum length (positions)")
    if list(v["positions"].values) != list(range(v["positions"].size)):
        _fail("positions", "values must be 0 .. max_len - 1")
    if v["ones"].kind != "numerical" or list(v["ones"].values) != [1]:
        _fail("ones", "must be numerical with values [1]")
    if any(not isinstance(c, str) for c in p.classifier.classes):
        _fail("classifier", "classes must be strings")
    for tok in (p.bos, p.eos, p.pad):
        if tok is not None and (not isinstance(tok, str) or tok not in v["tokens"].lookup):
            _fail("framing", f"token {shorten(tok)} is not in the vocabulary")
    if not isinstance(p.meta, dict):
        _fail("meta", "must be a dict")
    defined = set(INPUTS)
    for m in p.modules:
        for r in m.reads:
            if r not in defined:
                _fail(m.name, f"reads {r!r}, which is not defined before it")
        if m.output in defined:
            _fail(m.name, f"output {m.output!r} is defined twice")
        if m.output not in v:
            _fail(m.name, f"output {m.output!r} has no variable entry")
        out = v[m.output]
        if isinstance(m, Head):
            _validate_head(m, v)
        elif isinstance(m, Mlp):
            _validate_mlp(m, v)
        elif isinstance(m, ExpertCount):
            _validate_expert(m, p)
        elif not isinstance(m.token, str) or m.token not in v["tokens"].lookup or \
                out.values != tuple(range(p.max_len)):
            _fail(m.name, f"counts a token of the vocabulary ({shorten(m.token)}) into values "
                  f"0 .. {p.max_len - 1}")
        if isinstance(m, Mlp) or m.kind == "categorical":
            if out.kind != "categorical":
                _fail(m.name, "output must be categorical")
        elif out.kind != "numerical":
            _fail(m.name, "numerical head output must be numerical")
        defined.add(m.output)
    if set(v) != defined:
        _fail("variables", f"variables nobody defines: {sorted(set(v) - defined)}")
    _validate_classifier(p.classifier, v)


def _validate_head(h: Head, v: dict[str, Variable]) -> None:
    if h.kind not in KINDS:
        _fail(h.name, f"kind {h.kind!r}; expected one of {KINDS}")
    if h.rule not in RULES:
        _fail(h.name, f"rule {h.rule!r}; expected one of {RULES}")
    q, k, val = v[h.query], v[h.key], v[h.value]
    if q.kind != "categorical" or k.kind != "categorical":
        _fail(h.name, "query and key must be categorical")
    if val.kind != h.kind:
        _fail(h.name, f"a {h.kind} head needs a {h.kind} value, got {val.kind} {val.name!r}")
    if h.kind == "categorical" and v[h.output].values != val.values:
        _fail(h.name, "output labels must equal the value variable's labels")
    pred = h.predicate
    if pred.shape != (q.size,) or pred.dtype.kind != "i":
        _fail(h.name, f"predicate must be {q.size} ints, got shape {pred.shape} {pred.dtype}")
    if pred.size and (pred.min() < -1 or pred.max() >= k.size):
        _fail(h.name, f"predicate entries must be in -1 .. {k.size - 1}")


def _validate_mlp(m: Mlp, v: dict[str, Variable]) -> None:
    if m.kind not in KINDS:
        _fail(m.name, f"kind {m.kind!r}; expected one of {KINDS}")
    if not 1 <= len(m.inputs) <= 2:
        _fail(m.name, f"reads {len(m.inputs)} inputs; expected 1 or 2")
    for name in m.inputs:
        if v[name].kind != m.kind:
            _fail(m.name, f"a {m.kind} MLP cannot read {v[name].kind} {name!r}")
    shape = tuple(v[name].size for name in m.inputs)
    check_size(math.prod(shape), LIMITS.table, f"{m.name}: table entries")
    if m.table.shape != shape or m.table.dtype.kind != "i":
        _fail(m.name, f"table must be ints of shape {shape}, got {m.table.shape} {m.table.dtype}")
    k = v[m.output].size
    if m.table.size and (m.table.min() < 0 or m.table.max() >= k) or not 0 <= m.default < k:
        _fail(m.name, f"table entries and default must be in 0 .. {k - 1}")


def _validate_gate(m: ExpertCount, n_tokens: int, max_len: int) -> None:
    """Shapes, finiteness, size and float type of an expert gate (what :func:`expert_values`
    needs)."""
    shape = (len(EXPERTS), n_tokens)
    if m.weights.shape != shape or m.bias.shape != shape[:1]:
        _fail(m.name, f"weights must have shape {shape} and bias ({shape[0]},), got "
              f"{m.weights.shape} and {m.bias.shape}")
    check_finite(m.weights, f"{m.name}: gate weights")
    check_finite(m.bias, f"{m.name}: gate bias")
    check_size(n_tokens * max_len, LIMITS.gate, f"{m.name}: vocabulary times maximum length")
    if m.dtype not in FLOAT_TYPES:
        _fail(m.name, f"dtype {m.dtype!r}; expected one of {FLOAT_TYPES}")


def _validate_expert(m: ExpertCount, p: Program) -> None:
    _validate_gate(m, p.tokens.size, p.max_len)
    if p.variables[m.output].values != expert_values(m, p.tokens, p.bos, p.eos, p.pad,
                                                     p.max_len):
        _fail(m.name, "output values must be those of the experts its gate can pick")


def _validate_classifier(c: Classifier, v: dict[str, Variable]) -> None:
    n = len(c.classes)
    check_size(n, LIMITS.classes, "classes")
    for x in c.classes:
        check_label(x, "classes")
    if n == 0 or len(set(c.classes)) != n:
        _fail("classifier", "classes must be non-empty and distinct")
    if any(not 0 <= m < n for m in c.masked) or len(set(c.masked)) >= n:
        _fail("classifier", f"masked classes must be distinct indices in 0 .. {n - 1}, leaving "
              "at least one class")
    if c.bias.shape != (n,):
        _fail("classifier", f"bias must have shape ({n},), got {c.bias.shape}")
    check_finite(c.bias, "classifier bias")
    if set(c.features) != set(c.weights) or len(set(c.features)) != len(c.features):
        _fail("classifier", "features and weights must name the same distinct variables")
    for f in c.features:
        if f not in v:
            _fail("classifier", f"feature {f!r} is not a variable")
        rows = v[f].size if v[f].kind == "categorical" else 1
        if c.weights[f].shape != (rows, n):
            _fail("classifier", f"weights of {f!r} must have shape ({rows}, {n}), "
                  f"got {c.weights[f].shape}")
        check_finite(c.weights[f], f"classifier weights of {f!r}")
    check_size(sum(c.weights[f].size for f in c.features), LIMITS.weights, "classifier weights")


# JSON ---------------------------------------------------------------------------------------


def to_dict(p: Program) -> dict[str, Any]:
    """A JSON-ready dict; predicates and tables are written with labels, not indices."""
    v = p.variables
    modules: list[dict[str, Any]] = []
    for m in p.modules:
        if isinstance(m, Head):
            q, k = v[m.query], v[m.key]
            pairs = [[q.values[i], k.values[j]]
                     for i, j in enumerate(m.predicate.tolist()) if j >= 0]
            modules.append({"type": "head", "name": m.name, "kind": m.kind, "query": m.query,
                            "key": m.key, "value": m.value, "output": m.output, "rule": m.rule,
                            "predicate": pairs})
        elif isinstance(m, PrefixCount):
            modules.append({"type": "prefix_count", "name": m.name, "kind": m.kind,
                            "token": m.token, "output": m.output})
        elif isinstance(m, ExpertCount):
            tok = p.tokens.values
            modules.append({"type": "expert_count", "name": m.name, "kind": m.kind,
                            "output": m.output, "dtype": m.dtype,
                            "bias": dict(zip(EXPERTS, m.bias.tolist())),
                            "weights": {e: dict(zip(tok, row))
                                        for e, row in zip(EXPERTS, m.weights.tolist())}})
        else:
            out = v[m.output].values
            modules.append({"type": "mlp", "name": m.name, "kind": m.kind,
                            "inputs": list(m.inputs), "output": m.output,
                            "output_values": list(out),
                            "table": [out[i] for i in m.table.ravel().tolist()],
                            "default": out[m.default]})
    c = p.classifier
    return {
        "format": FORMAT, "version": VERSION, "name": p.name, "causal": p.causal,
        "bos": p.bos, "eos": p.eos, "pad": p.pad, "passthrough": p.passthrough, "meta": p.meta,
        "inputs": {name: {"kind": v[name].kind, "values": list(v[name].values)}
                   for name in INPUTS},
        "numerical_values": {name: list(var.values) for name, var in v.items()
                             if var.kind == "numerical" and name not in INPUTS},
        "modules": modules,
        "classifier": {"classes": list(c.classes), "bias": c.bias.tolist(),
                       "masked": [c.classes[m] for m in c.masked],
                       "features": list(c.features),
                       "weights": {f: c.weights[f].tolist() for f in c.features}},
    }


_TYPE_NAMES = {str: "a string", list: "a list", dict: "an object", bool: "true or false"}


def _need(d: Any, key: str, where: str, kind: type | None = None) -> Any:
    """``d[key]``; raises naming ``where`` when ``d`` is not a dict, lacks ``key`` or (with
    ``kind``) holds another type."""
    if not isinstance(d, dict) or key not in d:
        _fail(where, f"missing field {key!r}")
    x = d[key]
    if kind is not None and (not isinstance(x, kind) or isinstance(x, bool) and kind is not bool):
        _fail(where, f"field {key!r} must be {_TYPE_NAMES[kind]}, got {type(x).__name__}")
    return x


def _optional(d: dict[str, Any], key: str, kinds: tuple[type, ...], default: Any) -> Any:
    """``d.get(key, default)``; raises unless it is one of ``kinds``."""
    x = d.get(key, default)
    if not isinstance(x, kinds):
        names = " or ".join(_TYPE_NAMES.get(k, "null") for k in kinds)
        _fail("header", f"field {key!r} must be {names}, got {shorten(x)}")
    return x


def _check_json(d: Any) -> None:
    """Raise unless ``d`` is a JSON object (objects with string keys, lists, strings, numbers,
    booleans, null) nested at most ``LIMITS.depth`` deep; names the path of the offending value.
    Numbers are checked where they are used, which names their variable or row."""
    if not isinstance(d, dict):
        _fail("document", f"expected a JSON object, got {type(d).__name__}")
    stack: list[tuple[Any, int, str]] = [(d, 1, "document")]
    while stack:
        x, depth, path = stack.pop()
        if depth > LIMITS.depth:
            _fail(path, f"nested deeper than the limit of {LIMITS.depth}")
        is_dict = isinstance(x, dict)
        for k, e in x.items() if is_dict else enumerate(x):
            if is_dict and not isinstance(k, str):
                _fail(path, f"key {shorten(k)} is not a string")
            if isinstance(e, (dict, list)):
                stack.append((e, depth + 1, f"{path}.{k}" if is_dict else f"{path}[{k}]"))
            elif not (e is None or isinstance(e, (str, int, float))):
                _fail(f"{path}.{k}" if is_dict else f"{path}[{k}]",
                      f"{shorten(e)} is not JSON data")


def _labels(x: Any, where: str) -> tuple[Label, ...]:
    """A list of labels from JSON, checked (:func:`check_label`) and bounded in number."""
    if not isinstance(x, list):
        _fail(where, f"values must be a list, got {type(x).__name__}")
    check_size(len(x), LIMITS.values, f"values of {where}")
    return tuple(check_label(e, where) for e in x)


def _numbers(x: Any, where: str, ndim: int) -> np.ndarray:
    """A float64 array from rectangular nested lists of numbers (``ndim`` 1 or 2)."""
    rows = [x] if ndim == 1 else x
    if not isinstance(rows, list) or any(not isinstance(r, list) for r in rows) or any(
            isinstance(e, bool) or not isinstance(e, (int, float)) for r in rows for e in r):
        _fail(where, f"expected {'a list' if ndim == 1 else 'lists'} of numbers")
    if len({len(r) for r in rows}) > 1:
        _fail(where, "rows of different lengths")
    try:
        a = np.asarray(rows, dtype=np.float64)
    except OverflowError:
        _fail(where, "a number too large for float64")
    return a[0] if ndim == 1 else a


class _Builder:
    """The variables of a program being read, with a running bound on their values."""

    def __init__(self) -> None:
        self.variables: dict[str, Variable] = {}
        self.total = 0

    def add(self, name: Any, kind: Any, values: tuple[Label, ...]) -> Variable:
        name = check_name(name, "variable name")
        if name in self.variables:
            _fail(name, "variable defined twice")
        self.total += len(values)
        check_size(self.total, LIMITS.total_values, "values of all variables")
        self.variables[name] = Variable(name, kind, values)
        return self.variables[name]

    def get(self, name: Any, where: str) -> Variable:
        if not isinstance(name, str) or name not in self.variables:
            _fail(where, f"reads {shorten(name)}, which is not defined before it")
        return self.variables[name]


def from_dict(d: Any) -> Program:
    """Rebuild and validate a program from :func:`to_dict` output. Any other JSON data raises
    a :class:`TpcoreError` naming the field; sizes are checked against :data:`LIMITS` before
    anything of that size is built."""
    _check_json(d)
    if d.get("format") != FORMAT or d.get("version") != VERSION:
        _fail("header", f"expected format {FORMAT!r} version {VERSION}, got "
              f"{shorten(d.get('format'))} version {shorten(d.get('version'))}")
    b = _Builder()
    for name, spec in _need(d, "inputs", "header", dict).items():
        b.add(name, _need(spec, "kind", name, str), _labels(_need(spec, "values", name), name))
    for name in INPUTS:
        b.get(name, "inputs")
    tok, max_len = b.variables["tokens"], b.variables["positions"].size
    check_size(tok.size, LIMITS.vocabulary, "vocabulary")
    check_size(max_len, LIMITS.max_len, "maximum length (positions)")
    framing = [_optional(d, f, (str, type(None)), None) for f in ("bos", "eos", "pad")]
    numerical = _need(d, "numerical_values", "header", dict)
    specs = _need(d, "modules", "header", list)
    check_size(len(specs) + len(b.variables), LIMITS.variables, "variables")
    modules = [_module(md, i, b, numerical, framing, max_len) for i, md in enumerate(specs)]
    cd = _need(d, "classifier", "header", dict)
    classes = _need(cd, "classes", "classifier", list)
    check_size(len(classes), LIMITS.classes, "classes")
    feats = [check_name(f, "classifier feature") for f in _need(cd, "features", "classifier",
                                                                list)]
    masked = _need(cd, "masked", "classifier", list) if "masked" in cd else []
    index = {c: i for i, c in enumerate(classes) if isinstance(c, str)}
    for x in masked:
        if not isinstance(x, str) or x not in index:
            _fail("classifier", f"masked class {shorten(x)} is not a class")
    weights = _need(cd, "weights", "classifier", dict)
    check_size(sum(len(w) * len(classes) for w in weights.values() if isinstance(w, list)),
               LIMITS.weights, "classifier weights")
    classifier = Classifier(
        tuple(classes), tuple(feats),
        {f: _numbers(w, f"classifier weights of {shorten(f)}", 2) for f, w in weights.items()},
        _numbers(_need(cd, "bias", "classifier"), "classifier bias", 1),
        tuple(index[x] for x in masked))
    return Program(_optional(d, "name", (str,), "program"), b.variables, modules, classifier,
                   causal=_optional(d, "causal", (bool,), False), bos=framing[0],
                   eos=framing[1], pad=framing[2],
                   passthrough=_optional(d, "passthrough", (bool,), True),
                   meta=_optional(d, "meta", (dict,), {}))


def _module(md: Any, i: int, b: _Builder, numerical: dict[str, Any],
            framing: list[str | None], max_len: int) -> Module:
    """Module ``i`` of a JSON program; defines its output variable in ``b``."""
    name = check_name(_need(md, "name", f"module {i}"), f"module {i} name")
    kind, out = _need(md, "kind", name, str), _need(md, "output", name, str)
    check_name(out, f"{name} output")
    mtype = md.get("type")
    if mtype == "head":
        q, k, val = (b.get(_need(md, f, name, str), name) for f in ("query", "key", "value"))
        pred = np.full(q.size, -1, dtype=np.int64)
        for pair in _need(md, "predicate", name, list):
            if not isinstance(pair, list) or len(pair) != 2:
                _fail(name, f"predicate entries must be [query, key] pairs, got {shorten(pair)}")
            pred[q.index(pair[0])] = k.index(pair[1])
        if kind == "categorical":
            b.add(out, "categorical", val.values)
        else:
            b.add(out, "numerical", _labels(_need(numerical, out, name), out))
        return Head(name, kind, q.name, k.name, val.name, out, pred, _need(md, "rule", name, str))
    if mtype == "mlp":
        inputs = [b.get(r, name) for r in _need(md, "inputs", name, list)]
        if not 1 <= len(inputs) <= 2:
            _fail(name, f"reads {len(inputs)} inputs; expected 1 or 2")
        shape = tuple(x.size for x in inputs)
        check_size(math.prod(shape), LIMITS.table, f"{name}: table entries")
        entries = _need(md, "table", name, list)
        if len(entries) != math.prod(shape):
            _fail(name, f"table has {len(entries)} entries; expected {math.prod(shape)}")
        ov = b.add(out, "categorical", _labels(_need(md, "output_values", name), out))
        table = np.asarray([ov.index(x) for x in entries], dtype=np.int64).reshape(shape)
        return Mlp(name, kind, tuple(x.name for x in inputs), out, table,
                   ov.index(_need(md, "default", name)))
    tok = b.variables["tokens"]
    if mtype == "prefix_count":
        m = PrefixCount(name, _need(md, "token", name, str), out)
        b.add(out, "numerical", count_values(m, tok, *framing, max_len))
        return m
    if mtype == "expert_count":
        gate_w, gate_b = _need(md, "weights", name, dict), _need(md, "bias", name, dict)
        rows = [[_need(_need(gate_w, e, name, dict), t, name) for t in tok.values]
                for e in EXPERTS]
        m = ExpertCount(name, out, _numbers(rows, f"{name} gate weights", 2),
                        _numbers([_need(gate_b, e, name) for e in EXPERTS], f"{name} gate bias",
                                 1), _need(md, "dtype", name, str))
        b.add(out, "numerical", count_values(m, tok, *framing, max_len))
        return m
    _fail(f"module {i}", f"type {shorten(mtype)}; expected 'head', 'mlp', 'prefix_count' or "
          "'expert_count'")


def save(p: Program, path: str | Path) -> None:
    """Write ``p`` as JSON atomically."""
    write_json(path, to_dict(p))


def load(path: str | Path) -> Program:
    """Read and validate a program saved by :func:`save` (at most ``LIMITS.file_bytes``)."""
    path = Path(path)
    text = read_limited(path, "program")
    try:
        d = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise TpcoreError(f"{path}: not a JSON program ({str(exc)[:200]})") from None
    try:
        return from_dict(d)
    except TpcoreError as exc:
        raise TpcoreError(f"{path}: {exc}") from None


def numerical_range(value: Variable, max_len: int) -> tuple[int, ...]:
    """Reachable outputs of a numerical head summing ``value`` over at most ``max_len`` keys.

    For integer values ``lo..hi`` it is ``min(0, max_len*lo) .. max(0, max_len*hi)`` (the paper's
    bound: length times the value's largest value), at most ``LIMITS.values`` of them.
    """
    if not all(isinstance(x, (int, float)) and float(x).is_integer() for x in value.values):
        raise TpcoreError(f"cannot list the sums of non-integer variable {value.name!r} (the "
                          "model adds fractions in its own float rounding order)")
    lo, hi = min(0, max_len * int(min(value.values))), max(0, max_len * int(max(value.values)))
    check_size(hi - lo + 1, LIMITS.values, f"sums of {value.name!r} over {max_len} positions")
    return tuple(range(lo, hi + 1))


def count_values(m: PrefixCount | ExpertCount, tokens: Variable, bos: str | None,
                 eos: str | None, pad: str | None, max_len: int) -> tuple[int | float, ...]:
    """The values of the output of a module that reads only the tokens, on framed inputs of at
    most ``max_len`` tokens: a prefix count's ``0 .. max_len - 1``; an expert gate's
    :func:`expert_values`, once its shapes and size are checked."""
    if isinstance(m, PrefixCount):
        return tuple(range(max_len))
    _validate_gate(m, tokens.size, max_len)
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

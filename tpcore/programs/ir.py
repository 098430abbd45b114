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
"""

from __future__ import annotations

import json
import keyword
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.counts import EXPERTS, length_rule
from tpcore.errors import TpcoreError

FORMAT = "tpcore-program"
VERSION = 1
KINDS = ("categorical", "numerical")
RULES = ("closest", "published")
FLOAT_TYPES = ("float32", "float64")
INPUTS = ("tokens", "positions", "ones")

Label = str | int | float


@dataclass(frozen=True)
class Variable:
    """A named variable; ``values`` are its labels (categorical) or reachable values (numerical)."""

    name: str
    kind: str
    values: tuple[Label, ...]

    @property
    def size(self) -> int:
        return len(self.values)

    def index(self, label: Label) -> int:
        """Index of ``label`` among ``values``; raises naming the variable when absent."""
        try:
            return self.values.index(label)
        except ValueError:
            raise TpcoreError(
                f"value {label!r} is not a value of variable {self.name!r} "
                f"(values: {list(self.values)[:12]}{' ...' if self.size > 12 else ''})"
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


@dataclass
class Mlp:
    """A lookup table from the product of input value sets to output indices."""

    name: str
    kind: str
    inputs: tuple[str, ...]
    output: str
    table: np.ndarray
    default: int

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


def _fail(where: str, msg: str) -> None:
    raise TpcoreError(f"invalid program ({where}): {msg}")


def validate(p: Program) -> None:
    """Check that ``p`` is well formed: inputs, read-before-write order, kinds, shapes, ranges."""
    v = p.variables
    for name in [*v, *(m.name for m in p.modules)]:
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            _fail("names", f"{name!r} is not a Python identifier")
    for name in INPUTS:
        if name not in v:
            _fail("variables", f"missing input variable {name!r}")
    for name, var in v.items():
        if name != var.name:
            _fail(name, f"variable stored under {name!r} is named {var.name!r}")
        if var.kind not in KINDS:
            _fail(name, f"kind {var.kind!r}; expected one of {KINDS}")
        if var.size == 0:
            _fail(name, "empty value set")
        if var.kind == "categorical" and len(set(var.values)) != var.size:
            _fail(name, "repeated labels")
        if any(isinstance(x, bool) or not isinstance(x, (str, int, float)) for x in var.values):
            _fail(name, "labels must be strings or numbers")
        if var.kind == "numerical" and list(var.values) != sorted(set(var.values)):
            _fail(name, "numerical values must be sorted and distinct")
    if v["tokens"].kind != "categorical" or v["positions"].kind != "categorical":
        _fail("variables", "tokens and positions must be categorical")
    if list(v["positions"].values) != list(range(v["positions"].size)):
        _fail("positions", "values must be 0 .. max_len - 1")
    if v["ones"].kind != "numerical" or list(v["ones"].values) != [1]:
        _fail("ones", "must be numerical with values [1]")
    if any(not isinstance(c, str) for c in p.classifier.classes):
        _fail("classifier", "classes must be strings")
    for tok in (p.bos, p.eos, p.pad):
        if tok is not None and tok not in v["tokens"].values:
            _fail("framing", f"token {tok!r} is not in the vocabulary")
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
        elif m.token not in v["tokens"].values or out.values != tuple(range(p.max_len)):
            _fail(m.name, f"counts a token of the vocabulary ({m.token!r}) into values "
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
    if m.table.shape != shape or m.table.dtype.kind != "i":
        _fail(m.name, f"table must be ints of shape {shape}, got {m.table.shape} {m.table.dtype}")
    k = v[m.output].size
    if m.table.size and (m.table.min() < 0 or m.table.max() >= k) or not 0 <= m.default < k:
        _fail(m.name, f"table entries and default must be in 0 .. {k - 1}")


def _validate_gate(m: ExpertCount, n_tokens: int) -> None:
    """Shapes, finiteness and float type of an expert gate (what :func:`expert_values` needs)."""
    shape = (len(EXPERTS), n_tokens)
    if m.weights.shape != shape or m.bias.shape != shape[:1]:
        _fail(m.name, f"weights must have shape {shape} and bias ({shape[0]},), got "
              f"{m.weights.shape} and {m.bias.shape}")
    if not (np.isfinite(m.weights).all() and np.isfinite(m.bias).all()):
        _fail(m.name, "weights and bias must be finite")
    if m.dtype not in FLOAT_TYPES:
        _fail(m.name, f"dtype {m.dtype!r}; expected one of {FLOAT_TYPES}")


def _validate_expert(m: ExpertCount, p: Program) -> None:
    _validate_gate(m, p.tokens.size)
    if p.variables[m.output].values != expert_values(m, p.tokens, p.bos, p.eos, p.pad,
                                                     p.max_len):
        _fail(m.name, "output values must be those of the experts its gate can pick")


def _validate_classifier(c: Classifier, v: dict[str, Variable]) -> None:
    n = len(c.classes)
    if n == 0 or len(set(c.classes)) != n:
        _fail("classifier", "classes must be non-empty and distinct")
    if any(not 0 <= m < n for m in c.masked) or len(set(c.masked)) >= n:
        _fail("classifier", f"masked classes must be distinct indices in 0 .. {n - 1}, leaving "
              "at least one class")
    if c.bias.shape != (n,):
        _fail("classifier", f"bias must have shape ({n},), got {c.bias.shape}")
    if set(c.features) != set(c.weights) or len(set(c.features)) != len(c.features):
        _fail("classifier", "features and weights must name the same distinct variables")
    for f in c.features:
        if f not in v:
            _fail("classifier", f"feature {f!r} is not a variable")
        rows = v[f].size if v[f].kind == "categorical" else 1
        if c.weights[f].shape != (rows, n):
            _fail("classifier", f"weights of {f!r} must have shape ({rows}, {n}), "
                  f"got {c.weights[f].shape}")


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


def _need(d: dict[str, Any], key: str, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        _fail(where, f"missing field {key!r}")
    return d[key]


def from_dict(d: dict[str, Any]) -> Program:
    """Rebuild and validate a program from :func:`to_dict` output."""
    if _need(d, "format", "header") != FORMAT or _need(d, "version", "header") != VERSION:
        _fail("header", f"expected format {FORMAT!r} version {VERSION}, got "
              f"{d.get('format')!r} version {d.get('version')!r}")
    variables = {name: Variable(name, spec["kind"], tuple(spec["values"]))
                 for name, spec in _need(d, "inputs", "header").items()}
    numerical = _need(d, "numerical_values", "header")
    modules: list[Module] = []
    for i, md in enumerate(_need(d, "modules", "header")):
        where = f"module {i}"
        name = _need(md, "name", where)
        kind, out = _need(md, "kind", name), _need(md, "output", name)
        if md.get("type") == "head":
            reads = [_need(md, f, name) for f in ("query", "key", "value")]
            for r in reads:
                if r not in variables:
                    _fail(name, f"reads {r!r}, which is not defined before it")
            q, k, val = (variables[r] for r in reads)
            pred = np.full(q.size, -1, dtype=np.int64)
            for ql, kl in _need(md, "predicate", name):
                pred[q.index(ql)] = k.index(kl)
            if kind == "categorical":
                variables[out] = Variable(out, "categorical", val.values)
            else:
                variables[out] = Variable(out, "numerical", tuple(_need(numerical, out, name)))
            modules.append(Head(name, kind, *reads, out, pred, _need(md, "rule", name)))
        elif md.get("type") == "mlp":
            inputs = tuple(_need(md, "inputs", name))
            for r in inputs:
                if r not in variables:
                    _fail(name, f"reads {r!r}, which is not defined before it")
            ov = Variable(out, "categorical", tuple(_need(md, "output_values", name)))
            variables[out] = ov
            flat = [ov.index(x) for x in _need(md, "table", name)]
            shape = tuple(variables[r].size for r in inputs)
            if len(flat) != int(np.prod(shape)):
                _fail(name, f"table has {len(flat)} entries; expected {int(np.prod(shape))}")
            table = np.asarray(flat, dtype=np.int64).reshape(shape)
            default = ov.index(_need(md, "default", name))
            modules.append(Mlp(name, kind, inputs, out, table, default))
        elif md.get("type") == "prefix_count":
            variables[out] = Variable(out, "numerical",
                                      tuple(range(variables["positions"].size)))
            modules.append(PrefixCount(name, _need(md, "token", name), out))
        elif md.get("type") == "expert_count":
            tok = variables["tokens"]
            gate_w, gate_b = _need(md, "weights", name), _need(md, "bias", name)
            weights = [[_need(_need(gate_w, e, name), t, name) for t in tok.values]
                       for e in EXPERTS]
            m = ExpertCount(name, out, np.asarray(weights, dtype=np.float64),
                            np.asarray([_need(gate_b, e, name) for e in EXPERTS],
                                       dtype=np.float64), _need(md, "dtype", name))
            _validate_gate(m, tok.size)
            variables[out] = Variable(out, "numerical", expert_values(
                m, tok, d.get("bos"), d.get("eos"), d.get("pad"), variables["positions"].size))
            modules.append(m)
        else:
            _fail(where, f"type {md.get('type')!r}; expected 'head', 'mlp', 'prefix_count' or "
                  "'expert_count'")
    cd = _need(d, "classifier", "header")
    feats = tuple(_need(cd, "features", "classifier"))
    classes = tuple(_need(cd, "classes", "classifier"))
    masked = [x for x in cd.get("masked", []) if x not in classes]
    if masked:
        _fail("classifier", f"masked class {masked[0]!r} is not a class")
    classifier = Classifier(
        classes, feats,
        {f: np.asarray(w, dtype=np.float64) for f, w in _need(cd, "weights", "classifier").items()},
        np.asarray(_need(cd, "bias", "classifier"), dtype=np.float64),
        tuple(classes.index(x) for x in cd.get("masked", [])))
    return Program(d.get("name", "program"), variables, modules, classifier,
                   causal=bool(d.get("causal", False)), bos=d.get("bos"), eos=d.get("eos"),
                   pad=d.get("pad"), passthrough=bool(d.get("passthrough", True)),
                   meta=dict(d.get("meta", {})))


def save(p: Program, path: str | Path) -> None:
    """Write ``p`` as JSON atomically."""
    from tpcore.io import write_json

    write_json(path, to_dict(p))


def load(path: str | Path) -> Program:
    """Read and validate a program saved by :func:`save`."""
    path = Path(path)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TpcoreError(f"{path}: not a JSON program ({exc})") from None
    try:
        return from_dict(d)
    except (KeyError, TypeError, AttributeError) as exc:
        raise TpcoreError(f"{path}: malformed program ({type(exc).__name__}: {exc})") from None
    except TpcoreError as exc:
        raise TpcoreError(f"{path}: {exc}") from None


def numerical_range(value: Variable, max_len: int) -> tuple[int, ...]:
    """Reachable outputs of a numerical head summing ``value`` over at most ``max_len`` keys.

    For integer values ``lo..hi`` it is ``min(0, max_len*lo) .. max(0, max_len*hi)`` (the paper's
    bound: length times the value's largest value).
    """
    if not all(float(x).is_integer() for x in value.values):
        raise TpcoreError(f"cannot list the sums of non-integer variable {value.name!r} (the "
                          "model adds fractions in its own float rounding order)")
    lo, hi = int(min(value.values)), int(max(value.values))
    return tuple(range(min(0, max_len * lo), max(0, max_len * hi) + 1))


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
        n = np.arange(1, max_len + 1)
        a, n = np.meshgrid(n, n, indexing="ij")
        q = (a.astype(m.dtype) / n.astype(m.dtype))[a <= n]
        values.update(int(x) if x.is_integer() else x for x in q.astype(np.float64).tolist())
    return tuple(sorted(values))

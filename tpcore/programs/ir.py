"""The program IR: a discrete Transformer Program as plain data.

A :class:`Program` is a list of named variables and a list of modules run in order, each reading
variables defined before it and defining one new variable, followed by a linear classifier over
chosen variables. Host-only code (NumPy and the standard library).

Variables (:class:`~tpcore.programs.values.Variable`)
    ``categorical``: ``values`` lists the labels of the one-hot indices (index ``i`` has label
    ``values[i]``; token strings for ``tokens`` and what copies them, ints for ``positions`` and MLP
    outputs). ``numerical``: ``values`` lists every value the variable can take (sorted).
    Inputs: ``tokens`` (categorical), ``positions`` (categorical, ``0 .. max_len - 1``) and
    ``ones`` (numerical, ``[1]``).

Modules and the classifier (:mod:`tpcore.programs.modules`)
    :class:`Head` (categorical or numerical), :class:`Mlp`, :class:`PrefixCount`,
    :class:`RunningCount` and :class:`ExpertCount`, each stating its semantics and owning its
    validation, JSON form, reference evaluation, kernel opcode and operands, and its description
    in words; :class:`Classifier` likewise. Pass-through (``passthrough=True``): at position 0 a
    ``bos`` token predicts ``bos``; at the last position an ``eos`` token predicts ``eos`` (the
    published programs do this).

Untrusted input
    A program read from a file is data, bounded by :data:`LIMITS` and checked as
    :mod:`tpcore.programs.values` says; :func:`validate` checks every program against them.

This module is the IR's one namespace: it re-exports the names of those two modules that the
rest of tpcore reads programs with.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpcore.errors import TpcoreError
from tpcore.io import write_json
from tpcore.programs.modules import (
    Classifier,
    ExpertCount,
    Head,
    Mlp,
    PrefixCount,
    ProgramModule,
    RunningCount,
    count_values,
    expert_rule,
    expert_values,
    read_module,
)
from tpcore.programs.values import (
    LIMITS,
    TYPE_NAMES,
    Label,
    Scope,
    Variable,
    check_label,
    check_name,
    check_size,
    check_variable_name,
    fail,
    need,
    read_labels,
    read_limited,
    shorten,
)

__all__ = [
    "FORMAT", "INPUTS", "LIMITS", "VERSION", "Classifier", "ExpertCount", "Head", "Label", "Mlp",
    "PrefixCount", "Program", "ProgramModule", "RunningCount", "Variable", "check_label",
    "check_name", "check_size",
    "count_values", "expert_rule", "expert_values", "from_dict", "load", "numerical_range",
    "read_limited", "save", "shorten", "to_dict", "validate",
]

FORMAT = "tpcore-program"
VERSION = 1
INPUTS = ("tokens", "positions", "ones")


@dataclass
class Program:
    """A whole discrete program. ``bos``/``eos``: framing tokens the task adds around an input."""

    name: str
    variables: dict[str, Variable]
    modules: list[ProgramModule]
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

    def module(self, name: str) -> ProgramModule:
        for m in self.modules:
            if m.name == name:
                return m
        raise TpcoreError(f"no module named {name!r}; modules: {[m.name for m in self.modules]}")

    def producer(self, variable: str) -> ProgramModule | None:
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


def validate(p: Program) -> None:
    """Check that ``p`` is well formed: names, inputs, read-before-write order, then each
    variable, module and the classifier by its own ``validate`` (kinds, shapes, ranges and the
    :data:`LIMITS`)."""
    v = p.variables
    check_name(p.name, "program name")
    check_size(len(v), LIMITS.variables, "variables")
    for name in [*v, *(m.name for m in p.modules)]:
        check_variable_name(name, "variable or module name")
    if len({m.name for m in p.modules}) != len(p.modules):
        fail("modules", "module names must be distinct")
    for name in INPUTS:
        if name not in v:
            fail("variables", f"missing input variable {name!r}")
    check_size(sum(var.size for var in v.values()), LIMITS.total_values,
               "values of all variables")
    for name, var in v.items():
        if name != var.name:
            fail(name, f"variable stored under {name!r} is named {shorten(var.name)}")
        var.validate()
    if v["tokens"].kind != "categorical" or v["positions"].kind != "categorical":
        fail("variables", "tokens and positions must be categorical")
    if any(not isinstance(t, str) for t in v["tokens"].values):
        fail("tokens", "tokens must be strings")
    check_size(v["tokens"].size, LIMITS.vocabulary, "vocabulary")
    check_size(v["positions"].size, LIMITS.max_len, "maximum length (positions)")
    if list(v["positions"].values) != list(range(v["positions"].size)):
        fail("positions", "values must be 0 .. max_len - 1")
    if v["ones"].kind != "numerical" or list(v["ones"].values) != [1]:
        fail("ones", "must be numerical with values [1]")
    if any(not isinstance(c, str) for c in p.classifier.classes):
        fail("classifier", "classes must be strings")
    for tok in (p.bos, p.eos, p.pad):
        if tok is not None and (not isinstance(tok, str) or tok not in v["tokens"].lookup):
            fail("framing", f"token {shorten(tok)} is not in the vocabulary")
    if not isinstance(p.meta, dict):
        fail("meta", "must be a dict")
    defined = set(INPUTS)
    for m in p.modules:
        for r in m.reads:
            if r not in defined:
                fail(m.name, f"reads {r!r}, which is not defined before it")
        if m.output in defined:
            fail(m.name, f"output {m.output!r} is defined twice")
        if m.output not in v:
            fail(m.name, f"output {m.output!r} has no variable entry")
        m.validate(v, (p.bos, p.eos, p.pad))
        defined.add(m.output)
    if set(v) != defined:
        fail("variables", f"variables nobody defines: {sorted(set(v) - defined)}")
    p.classifier.validate(v)


# JSON ---------------------------------------------------------------------------------------


def to_dict(p: Program) -> dict[str, Any]:
    """A JSON-ready dict; predicates and tables are written with labels, not indices."""
    v = p.variables
    return {
        "format": FORMAT, "version": VERSION, "name": p.name, "causal": p.causal,
        "bos": p.bos, "eos": p.eos, "pad": p.pad, "passthrough": p.passthrough, "meta": p.meta,
        "inputs": {name: {"kind": v[name].kind, "values": list(v[name].values)}
                   for name in INPUTS},
        "numerical_values": {name: list(var.values) for name, var in v.items()
                             if var.kind == "numerical" and name not in INPUTS},
        "modules": [m.to_json(v) for m in p.modules],
        "classifier": p.classifier.to_json(),
    }


def _optional(d: dict[str, Any], key: str, kinds: tuple[type, ...], default: Any) -> Any:
    """``d.get(key, default)``; raises unless it is one of ``kinds``."""
    x = d.get(key, default)
    if not isinstance(x, kinds):
        names = " or ".join(TYPE_NAMES.get(k, "null") for k in kinds)
        fail("header", f"field {key!r} must be {names}, got {shorten(x)}")
    return x


def _check_json(d: Any) -> None:
    """Raise unless ``d`` is a JSON object (objects with string keys, lists, strings, numbers,
    booleans, null) nested at most ``LIMITS.depth`` deep; names the path of the offending value.
    Numbers are checked where they are used, which names their variable or row."""
    if not isinstance(d, dict):
        fail("document", f"expected a JSON object, got {type(d).__name__}")
    stack: list[tuple[Any, int, str]] = [(d, 1, "document")]
    while stack:
        x, depth, path = stack.pop()
        if depth > LIMITS.depth:
            fail(path, f"nested deeper than the limit of {LIMITS.depth}")
        is_dict = isinstance(x, dict)
        for k, e in x.items() if is_dict else enumerate(x):
            if is_dict and not isinstance(k, str):
                fail(path, f"key {shorten(k)} is not a string")
            if isinstance(e, (dict, list)):
                stack.append((e, depth + 1, f"{path}.{k}" if is_dict else f"{path}[{k}]"))
            elif not (e is None or isinstance(e, (str, int, float))):
                fail(f"{path}.{k}" if is_dict else f"{path}[{k}]",
                      f"{shorten(e)} is not JSON data")


def from_dict(d: Any) -> Program:
    """Rebuild and validate a program from :func:`to_dict` output. Any other JSON data raises
    a :class:`TpcoreError` naming the field; sizes are checked against :data:`LIMITS` before
    anything of that size is built."""
    _check_json(d)
    if d.get("format") != FORMAT or d.get("version") != VERSION:
        fail("header", f"expected format {FORMAT!r} version {VERSION}, got "
             f"{shorten(d.get('format'))} version {shorten(d.get('version'))}")
    scope = Scope()
    for name, spec in need(d, "inputs", "header", dict).items():
        scope.add(name, need(spec, "kind", name, str),
                  read_labels(need(spec, "values", name), name))
    for name in INPUTS:
        scope.get(name, "inputs")
    check_size(scope.tokens.size, LIMITS.vocabulary, "vocabulary")
    check_size(scope.max_len, LIMITS.max_len, "maximum length (positions)")
    scope.framing = tuple(_optional(d, f, (str, type(None)), None) for f in ("bos", "eos", "pad"))
    scope.numerical = need(d, "numerical_values", "header", dict)
    specs = need(d, "modules", "header", list)
    check_size(len(specs) + len(scope.variables), LIMITS.variables, "variables")
    modules = [read_module(md, i, scope) for i, md in enumerate(specs)]
    classifier = Classifier.from_json(need(d, "classifier", "header", dict))
    bos, eos, pad = scope.framing
    return Program(_optional(d, "name", (str,), "program"), scope.variables, modules, classifier,
                   causal=_optional(d, "causal", (bool,), False), bos=bos, eos=eos, pad=pad,
                   passthrough=_optional(d, "passthrough", (bool,), True),
                   meta=_optional(d, "meta", (dict,), {}))


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

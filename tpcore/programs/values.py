"""Variables and their values, the bounds a program file is held to, and the checked readers of
its JSON fields. Host-only code (NumPy and the standard library).

A program read from a file is data: names are ASCII Python identifiers (not keywords) of at most
``LIMITS.name_chars`` characters, labels are strings of bounded length or finite numbers, and
every size is bounded by :data:`LIMITS`, checked before anything of that size is allocated. The
readers here (:func:`need`, :func:`read_labels`, :func:`read_numbers`) and :class:`Scope` are
what :func:`tpcore.programs.ir.from_dict` and each module kind's ``from_json`` parse with.
"""

from __future__ import annotations

import builtins
import keyword
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.io import TEXT_BYTES, read_text

KINDS = ("categorical", "numerical")
Label = str | int | float
Framing = tuple[str | None, str | None, str | None]
"""A program's ``(bos, eos, pad)`` tokens."""


@dataclass(frozen=True)
class Limits:
    """Bounds on what a program file can make tpcore read, allocate or compute. Loaders check
    each one before allocating anything of that size; the largest value among the programs of
    the tests, ``results/`` and the authors' published RASP programs is given in brackets."""

    file_bytes: int = TEXT_BYTES
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
    total_table: int = 2**22
    """Entries of all the MLP tables of a program file together, which an imported program
    computes from its decision lists (276,782 for the main job's sort program, 269,374 for the
    authors' published one)."""
    decisions: int = 2**28
    """Tests times table entries of an imported MLP written as a decision list, each test
    evaluated on every entry (40 tests on 1,052,929 entries)."""
    weights: int = 2**22
    """Classifier weights: rows of all features times classes (6,675)."""
    gate: int = 2**20
    """Vocabulary size times maximum length for an expert gate (the lengths its rule is
    decided at; 256)."""
    work: int = 2**32
    """Entries one run of the interpreter computes: per sequence ``N^2`` for each head and
    ``N`` for every other module and the classifier (a batch of 10^5 sequences of the 3-layer
    sort program: 1.5 x 10^8)."""


LIMITS = Limits()
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def shorten(x: Any, chars: int = 60) -> str:
    """``repr(x)``, cut to about ``chars`` characters for error messages."""
    text = repr(x) if not isinstance(x, str) or len(x) <= 4 * chars else repr(x[: 4 * chars])
    return text if len(text) <= chars else f"{text[: chars - 5]}...{text[-1]}"


def fail(where: str, msg: str) -> NoReturn:
    """Raise that the program is invalid at ``where`` (a variable, module or section)."""
    raise TpcoreError(f"invalid program ({where}): {msg}")


def check_name(name: Any, what: str) -> str:
    """``name`` when it is an ASCII Python identifier of at most ``LIMITS.name_chars``
    characters and not a keyword; else raises naming it."""
    if not (isinstance(name, str) and len(name) <= LIMITS.name_chars and NAME.fullmatch(name)
            and not keyword.iskeyword(name)):
        raise TpcoreError(f"{what} {shorten(name)} is not a name: expected an ASCII Python "
                          f"identifier of at most {LIMITS.name_chars} characters, not a keyword")
    return name


RESERVED = frozenset(dir(builtins)) | {
    "select_closest", "select", "aggregate", "aggregate_sum", "classify", "load_weights", "run",
    "features", "predictions", "csv", "functools", "os", "sys", "np", "pd", "BOS", "EOS",
    "MAX_LEN", "VOCAB", "WEIGHTS"}
"""Names a generated program gives its helpers, imports, constants and the end of ``run``, and
Python's builtins: a variable or module named so would shadow them in the program."""


def check_variable_name(name: Any, what: str) -> str:
    """``name`` when :func:`check_name` accepts it and a generated program does not already use
    it (:data:`RESERVED`); else raises naming it."""
    check_name(name, what)
    if name in RESERVED:
        raise TpcoreError(f"{what} {name!r} is a name the generated program uses itself (a "
                          "helper, a constant or a Python builtin); rename it")
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
    """The UTF-8 text of ``path``, at most ``LIMITS.file_bytes`` (:func:`tpcore.io.read_text`)."""
    return read_text(path, what, LIMITS.file_bytes)


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

    def validate(self) -> None:
        """Raise unless the kind is known and the values are non-empty, bounded labels: distinct
        (categorical) or sorted distinct numbers (numerical)."""
        if self.kind not in KINDS:
            fail(self.name, f"kind {shorten(self.kind)}; expected one of {KINDS}")
        if self.size == 0:
            fail(self.name, "empty value set")
        check_size(self.size, LIMITS.values, f"values of {self.name!r}")
        for x in self.values:
            check_label(x, self.name)
        if self.kind == "categorical" and len(self.lookup) != self.size:
            fail(self.name, "repeated labels")
        if self.kind == "numerical" and (any(isinstance(x, str) for x in self.values)
                                         or list(self.values) != sorted(set(self.values))):
            fail(self.name, "numerical values must be sorted and distinct numbers")


# reading JSON ---------------------------------------------------------------------------------

TYPE_NAMES = {str: "a string", list: "a list", dict: "an object", bool: "true or false"}


def need(d: Any, key: str, where: str, kind: type | None = None) -> Any:
    """``d[key]``; raises naming ``where`` when ``d`` is not a dict, lacks ``key`` or (with
    ``kind``) holds another type."""
    if not isinstance(d, dict) or key not in d:
        fail(where, f"missing field {key!r}")
    x = d[key]
    if kind is not None and (not isinstance(x, kind) or isinstance(x, bool) and kind is not bool):
        fail(where, f"field {key!r} must be {TYPE_NAMES[kind]}, got {type(x).__name__}")
    return x


def read_labels(x: Any, where: str) -> tuple[Label, ...]:
    """A list of labels from JSON, checked (:func:`check_label`) and bounded in number."""
    if not isinstance(x, list):
        fail(where, f"values must be a list, got {type(x).__name__}")
    check_size(len(x), LIMITS.values, f"values of {where}")
    return tuple(check_label(e, where) for e in x)


def read_numbers(x: Any, where: str, ndim: int) -> np.ndarray:
    """A float64 array from rectangular nested lists of numbers (``ndim`` 1 or 2)."""
    rows = [x] if ndim == 1 else x
    if not isinstance(rows, list) or any(not isinstance(r, list) for r in rows) or any(
            isinstance(e, bool) or not isinstance(e, (int, float)) for r in rows for e in r):
        fail(where, f"expected {'a list' if ndim == 1 else 'lists'} of numbers")
    if len({len(r) for r in rows}) > 1:
        fail(where, "rows of different lengths")
    try:
        a = np.asarray(rows, dtype=np.float64)
    except OverflowError:
        fail(where, "a number too large for float64")
    return a[0] if ndim == 1 else a


@dataclass
class Scope:
    """The variables of a program being read, in definition order, with a running bound on their
    values; ``numerical`` (the file's ``numerical_values``) and ``framing`` are what modules'
    output values are read or computed from."""

    variables: dict[str, Variable] = field(default_factory=dict)
    total: int = 0
    numerical: dict[str, Any] = field(default_factory=dict)
    framing: Framing = (None, None, None)

    @property
    def tokens(self) -> Variable:
        return self.variables["tokens"]

    @property
    def max_len(self) -> int:
        return self.variables["positions"].size

    def add(self, name: Any, kind: Any, values: tuple[Label, ...]) -> Variable:
        """Define variable ``name``; raises when it is defined already or the values of all
        variables exceed ``LIMITS.total_values``."""
        name = check_variable_name(name, "variable name")
        if name in self.variables:
            fail(name, "variable defined twice")
        self.total += len(values)
        check_size(self.total, LIMITS.total_values, "values of all variables")
        self.variables[name] = Variable(name, kind, values)
        return self.variables[name]

    def get(self, name: Any, where: str) -> Variable:
        """Variable ``name``; raises naming ``where`` when it is not defined yet."""
        if not isinstance(name, str) or name not in self.variables:
            fail(where, f"reads {shorten(name)}, which is not defined before it")
        return self.variables[name]

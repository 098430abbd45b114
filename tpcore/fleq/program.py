"""FLEQ programs: memory cells and instructions named symbolically, and the instruction word
``FLEQ(a, b, c, m, flag, p, w_a, w_b, w_c)`` as it is stored in a punchcard column. Host-only
code (NumPy).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tpcore.errors import TpcoreError

FIELDS = ("a", "b", "c", "m", "flag", "p", "wa", "wb", "wc")
"""Instruction fields in the order of the ``instr`` rows."""


def field_heights(L: int, Lm: int) -> dict[str, int]:
    return {"a": L, "b": L, "c": L, "m": Lm, "flag": L, "p": L, "wa": 1, "wb": 1, "wc": 1}


@dataclass
class Cell:
    """A memory cell: ``value`` of shape ``(h, w)``; ``kind`` is ``real``, ``int`` (an integer
    scalar, usable as a flag) or ``code`` (instruction fields, for self-modifying programs)."""

    name: str
    value: np.ndarray
    kind: str = "real"
    code: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int]:
        return (1, 1) if self.kind == "code" else tuple(self.value.shape)


@dataclass
class Instr:
    """``mem[c] = f(mem[a], mem[b]); if mem[flag] <= 0 goto p``; names of cells or labels;
    ``f`` is a function name or its index ``m`` in the toolkit."""

    f: str | int
    c: str
    a: str
    b: str
    flag: str
    goto: str | None
    label: str | None = None


class FleqProgram:
    """A FLEQ program: cells and instructions named symbolically (resolved by :func:`assemble`).

    Reserved cells: ``_zero`` (0, a flag that always jumps), ``_one`` (1, never jumps) and
    ``_dummy`` (target of pure jumps). The last instruction is the halting one, which jumps to
    itself (added by :meth:`halt`).
    """

    def __init__(self, d: int) -> None:
        self.d = d
        self.cells: dict[str, Cell] = {}
        self.views: dict[str, tuple[str, int, tuple[int, int]]] = {}
        self.instrs: list[Instr] = []
        self.cell("_zero", 0, kind="int")
        self.cell("_one", 1, kind="int")
        self.cell("_dummy", 0.0)

    def cell(self, name: str, value: Any, kind: str = "real") -> str:
        """Declare a cell (scalar, vector ``(h,)`` stored as a column, or matrix ``(h, w)``)."""
        if name in self.cells:
            raise TpcoreError(f"cell {name!r} declared twice")
        v = np.asarray(value, dtype=np.float64)
        v = v.reshape(1, 1) if v.ndim == 0 else v[:, None] if v.ndim == 1 else v
        if v.ndim != 2 or v.shape[0] > self.d or v.shape[1] > self.d:
            raise TpcoreError(f"cell {name!r} has shape {v.shape}; cells are at most "
                              f"d x d = {self.d} x {self.d}")
        if kind == "int" and (v.shape != (1, 1) or v[0, 0] != np.round(v[0, 0])):
            raise TpcoreError(f"cell {name!r} is declared int but holds {v.tolist()}")
        self.cells[name] = Cell(name, v, kind)
        return name

    def view(self, name: str, of: str, col: int = 0, shape: tuple[int, int] = (1, 1)) -> str:
        """A name for part of a cell: ``shape`` starting at column ``col`` of cell ``of`` (e.g.
        one element of a row vector, to walk it with pointer increments)."""
        if name in self.cells or name in self.views:
            raise TpcoreError(f"cell {name!r} declared twice")
        if of not in self.cells:
            raise TpcoreError(f"view {name!r} of unknown cell {of!r}")
        h, w = self.cells[of].shape
        if shape[0] > h or col + shape[1] > w:
            raise TpcoreError(f"view {name!r} ({shape} at column {col}) exceeds cell {of!r} "
                              f"of shape {(h, w)}")
        self.views[name] = (of, col, tuple(shape))
        return name

    def code_cell(self, name: str, **fields: Any) -> str:
        """A memory cell holding instruction fields (``a b c`` as addresses/offsets or names,
        ``copy_of`` = an instruction label to copy every field from)."""
        if name in self.cells:
            raise TpcoreError(f"cell {name!r} declared twice")
        self.cells[name] = Cell(name, np.zeros((1, 1)), "code", dict(fields))
        return name

    def op(self, f: str | int, c: str, a: str, b: str = "_zero", flag: str = "_one",
           goto: str | None = None, label: str | None = None) -> None:
        self.instrs.append(Instr(f, c, a, b, flag, goto, label))

    def jump(self, flag: str, goto: str, label: str | None = None) -> None:
        """``if mem[flag] <= 0 goto`` (Corollary 1: a dummy ``_dummy = _zero + _zero``)."""
        self.op("add", "_dummy", "_zero", "_zero", flag, goto, label)

    def halt(self) -> None:
        self.op("add", "_dummy", "_zero", "_zero", "_zero", "_halt", "_halt")

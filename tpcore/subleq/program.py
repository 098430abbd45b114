"""SUBLEQ programs in the punchcard's absolute-column form, validation, and the authors' CSVs.

Algorithm 2 semantics: ``SUBLEQ(a, b, c): mem[b] = mem[b] - mem[a]; if mem[b] <= 0 goto c else
goto next``, with ``N``-bit wraparound. Operands are absolute column indices: ``a, b`` in the memory
columns ``s..s+m-1``, ``c`` in the instruction columns ``s+m..n-1``. The last instruction is EOF:
it jumps to itself (``c = n-1``) from a cell holding 0 (``a``) onto a cell holding a value <= 0
(``b``) that no other instruction writes, so executing it changes nothing (a fixed point).
Host-only code (NumPy, csv).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.looped.encodings import int_range
from tpcore.subleq.layout import Layout


@dataclass(frozen=True)
class SubleqProgram:
    """``commands: (k, 3)`` absolute columns ``(a, b, c)``; ``memory: (m,)`` initial values;
    ``s`` scratchpad columns; ``N`` bits per integer; ``names``: memory cell name -> column;
    ``labels``: label -> instruction column (both optional, for printing)."""

    commands: np.ndarray
    memory: np.ndarray
    s: int = 1
    N: int = 8
    names: dict[str, int] = field(default_factory=dict, compare=False)
    labels: dict[str, int] = field(default_factory=dict, compare=False)

    @property
    def layout(self) -> Layout:
        return Layout(self.s, len(self.memory), len(self.commands), self.N)

    def __repr__(self) -> str:
        names = ", ".join(list(self.names)[:8]) + (", ..." if len(self.names) > 8 else "")
        labels = ", ".join(list(self.labels)[:8]) + (", ..." if len(self.labels) > 8 else "")
        return (f"SubleqProgram({len(self.commands)} instructions, {len(self.memory)} cells of "
                f"{self.N} bits, s={self.s}; cells: {names or '-'}; labels: {labels or '-'})")

    def cell(self, name: str) -> int:
        """Index into ``memory`` of the named cell."""
        if name not in self.names:
            raise TpcoreError(f"no memory cell named {name!r}; known: {sorted(self.names)}")
        return self.names[name] - self.s


def validate(program: SubleqProgram) -> Layout:
    """Check ranges, initial values and the EOF instruction; raise naming the offender."""
    cmds = np.asarray(program.commands)
    mem = np.asarray(program.memory)
    if cmds.ndim != 2 or cmds.shape[1] != 3 or len(cmds) < 1:
        raise TpcoreError(f"commands have shape {cmds.shape}; expected (k, 3) with k >= 1")
    if mem.ndim != 1 or len(mem) < 2:
        raise TpcoreError(f"memory has shape {mem.shape}; expected (m,) with m >= 2 (EOF needs "
                          "a 0 cell and a <= 0 cell)")
    layout = program.layout
    s, m, n = layout.s, layout.m, layout.n
    lo, hi = int_range(program.N)
    for j, v in enumerate(mem):
        if not lo <= int(v) <= hi:
            raise TpcoreError(f"initial value {int(v)} of {_cell(program, s + j)} is outside the "
                              f"{program.N}-bit range [{lo}, {hi}]")
    for i, (a, b, c) in enumerate(cmds.tolist()):
        at = _instruction(program, i)
        for name, v in (("a", a), ("b", b)):
            if not s <= v < s + m:
                raise TpcoreError(f"{at}: operand {name} = {v} is not a memory column (expected "
                                  f"{s}..{s + m - 1})")
        if not s + m <= c < n:
            raise TpcoreError(f"{at}: jump target c = {c} is not an instruction column "
                              f"(expected {s + m}..{n - 1})")
    a_eof, b_eof, c_eof = (int(v) for v in cmds[-1])
    where = f"last instruction (column {n - 1})"
    if c_eof != n - 1:
        raise TpcoreError(f"missing EOF: {where} jumps to {c_eof}, not to itself")
    if mem[a_eof - s] != 0 or mem[b_eof - s] > 0 or a_eof == b_eof:
        raise TpcoreError(f"missing EOF: {where} must subtract a 0 cell from a different cell "
                          f"<= 0; {_cell(program, a_eof)}, {_cell(program, b_eof)} hold "
                          f"{int(mem[a_eof - s])}, "
                          f"{int(mem[b_eof - s])}")
    for i, (a, b, _) in enumerate(cmds[:-1].tolist()):
        if b == b_eof or (b == a_eof and a != b):
            raise TpcoreError(f"{_instruction(program, i)} writes {_cell(program, b)}, which "
                              "the EOF instruction needs constant")
    return layout


def _cell(program: SubleqProgram, col: int) -> str:
    """A memory column in words: ``cell 'x' (column 4)``, or ``cell 4`` where it has no name."""
    name = next((k for k, v in program.names.items() if v == col), None)
    return f"cell {col}" if name is None else f"cell {name!r} (column {col})"


def _instruction(program: SubleqProgram, i: int) -> str:
    """Instruction ``i`` in words, with its label where it has one and its column."""
    col = program.s + len(program.memory) + i
    name = next((k for k, v in program.labels.items() if v == col), None)
    return f"instruction {i}" + (f" {name!r}" if name else "") + f" (column {col})"


def load_csv(commands_csv: str | Path, memory_csv: str | Path, s: int, N: int) -> SubleqProgram:
    """Read the authors' files: ``a,b,c`` absolute 0-based columns, and ``mem`` initial values."""
    rows = _read_columns(commands_csv, ("a", "b", "c"))
    mem = _read_columns(memory_csv, ("mem",))
    program = SubleqProgram(np.array(rows, dtype=np.int64).reshape(-1, 3),
                      np.array(mem, dtype=np.int64).reshape(-1), s=s, N=N)
    validate(program)
    return program


def _read_columns(path: str | Path, header: tuple[str, ...]) -> list[list[int]]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None or tuple(h.strip() for h in reader.fieldnames) != header:
            raise TpcoreError(f"{path}: header {reader.fieldnames}; expected {','.join(header)}")
        out = []
        for line, row in enumerate(reader, start=2):
            try:
                out.append([int(row[h]) for h in reader.fieldnames])
            except (TypeError, ValueError) as exc:
                raise TpcoreError(f"{path}, line {line}: {row} is not integers") from exc
    return out

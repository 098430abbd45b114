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
            raise TpcoreError(f"initial value {int(v)} of memory cell {s + j} is outside the "
                              f"{program.N}-bit range [{lo}, {hi}]")
    for i, (a, b, c) in enumerate(cmds.tolist()):
        col = s + m + i
        for name, v in (("a", a), ("b", b)):
            if not s <= v < s + m:
                raise TpcoreError(f"instruction {i} (column {col}): operand {name} = {v} is not a "
                                  f"memory column (expected {s}..{s + m - 1})")
        if not s + m <= c < n:
            raise TpcoreError(f"instruction {i} (column {col}): jump target c = {c} is not an "
                              f"instruction column (expected {s + m}..{n - 1})")
    a_eof, b_eof, c_eof = (int(v) for v in cmds[-1])
    where = f"last instruction (column {n - 1})"
    if c_eof != n - 1:
        raise TpcoreError(f"missing EOF: {where} jumps to {c_eof}, not to itself")
    if mem[a_eof - s] != 0 or mem[b_eof - s] > 0 or a_eof == b_eof:
        raise TpcoreError(f"missing EOF: {where} must subtract a 0 cell from a different cell "
                          f"<= 0; cells {a_eof}, {b_eof} hold {int(mem[a_eof - s])}, "
                          f"{int(mem[b_eof - s])}")
    for i, (a, b, _) in enumerate(cmds[:-1].tolist()):
        if b == b_eof or (b == a_eof and a != b):
            raise TpcoreError(f"instruction {i} (column {s + m + i}) writes cell {b}, which the "
                              "EOF instruction needs constant")
    return layout


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

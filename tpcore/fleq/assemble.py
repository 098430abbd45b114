"""Laying a FLEQ program out on a machine: validate it against the toolkit, give cells and
instructions their columns, build the machine and the punchcard. Host-only code (NumPy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.fleq.machine import FleqMachine, build_machine
from tpcore.fleq.program import FIELDS, Cell, FleqProgram, Instr, field_heights
from tpcore.fleq.toolkit import Toolkit
from tpcore.looped.encodings import address_bits, encode_address


@dataclass
class AssembledProgram:
    """A program laid out on a machine: punchcard ``X0``, addresses and instruction words."""

    program: FleqProgram
    machine: FleqMachine
    X0: np.ndarray
    addr: dict[str, int]
    labels: dict[str, int]
    words: list[dict[str, Any]]

    @property
    def halt(self) -> int:
        return self.labels["_halt"]


SHAPE_RULES: dict[str, str] = {"add": "same", "sub": "same", "perc": "unary", "mul": "AtB",
                               "transp": "T", "ptr": "code", "diag": "diag"}


def _result_shape(kind: str, A: tuple[int, int], B: tuple[int, int],
                  fit_inputs: int | None) -> tuple[int, int] | None:
    if kind == "same":
        return A if A == B else None
    if kind == "unary":
        return A
    if kind == "AtB":
        return (A[1], B[1]) if A[0] == B[0] else None
    if kind == "T":
        return (A[1], A[0])
    if kind == "diag":
        return (A[1], A[1]) if A[0] == 1 else None
    if kind == "sig":
        return (1, A[1]) if A[0] == fit_inputs else None
    return (1, 1)


def assemble(program: FleqProgram, tk: Toolkit, lam: float = 30.0) -> AssembledProgram:
    """Lay ``program`` out (scratchpad, memory cells, instructions), validate it and build the
    machine. Rejected before running, naming the instruction: unknown function (index beyond M),
    operand shapes that exceed ``d`` or do not fit the function, a non-integer flag cell, an
    integer cell written by anything but add/sub of integer cells, unknown names or labels."""
    if program.d != tk.d:
        raise TpcoreError(f"program has d = {program.d} but the toolkit has d = {tk.d}")
    if not program.instrs or program.instrs[-1].label != "_halt":
        raise TpcoreError("program must end with halt()")
    s, d = tk.s, tk.d
    addr, col = {}, s
    for c in program.cells.values():
        addr[c.name] = col
        col += c.shape[1]
    m = col - s
    labels = {}
    for i, ins in enumerate(program.instrs):
        if ins.label is not None:
            if ins.label in labels:
                raise TpcoreError(f"label {ins.label!r} used twice")
            labels[ins.label] = col + i
    n = col + len(program.instrs)
    fits = {b.name: b for b in tk.blocks}
    shapes = {name: c.shape for name, c in program.cells.items()}
    kinds = {name: c.kind for name, c in program.cells.items()}
    for name, (of, vcol, shape) in program.views.items():
        addr[name], shapes[name], kinds[name] = addr[of] + vcol, shape, kinds[of]
    for lab in labels:
        shapes[lab], kinds[lab] = (1, 1), "code"
    words = []
    for i, ins in enumerate(program.instrs):
        where = f"instruction {i} ({ins.f} -> {ins.c})"
        if isinstance(ins.f, int | np.integer):
            if not 0 <= ins.f < len(tk.blocks):
                raise TpcoreError(f"{where}: function index {ins.f} is beyond the machine's "
                                  f"M = {len(tk.blocks)} functions {tk.names}")
            ins = Instr(tk.names[ins.f], ins.c, ins.a, ins.b, ins.flag, ins.goto, ins.label)
        if ins.f not in fits:
            raise TpcoreError(f"{where}: function {ins.f!r} is not one of the machine's M = "
                              f"{len(tk.blocks)} functions {tk.names}")
        for nm in (ins.a, ins.b, ins.c, ins.flag):
            if nm not in addr and nm not in labels:
                raise TpcoreError(f"{where}: unknown cell or label {nm!r}")
        if ins.goto is not None and ins.goto not in labels:
            raise TpcoreError(f"{where}: unknown jump target {ins.goto!r}")
        if kinds[ins.flag] != "int":
            raise TpcoreError(f"{where}: flag cell {ins.flag!r} is not an integer cell")
        blk = fits[ins.f]
        rule = "sig" if blk.params.get("N") else SHAPE_RULES.get(ins.f, "same")
        A, B, Cs = shapes[ins.a], shapes[ins.b], shapes[ins.c]
        if max(A + B + Cs) > d:
            raise TpcoreError(f"{where}: operand shapes {A}, {B}, {Cs} exceed d = {d}")
        fit_inputs = blk.params.get("dx", 1) if rule == "sig" else None
        want = _result_shape(rule, A, B, fit_inputs)
        if rule == "code" and not (kinds[ins.a] == kinds[ins.b] == kinds[ins.c] == "code"):
            raise TpcoreError(f"{where}: ptr works on code cells only")
        if want is None or (rule != "code" and want != Cs):
            raise TpcoreError(f"{where}: {ins.f} of shapes {A} and {B} gives {want}, but the "
                              f"result cell {ins.c!r} has shape {Cs}")
        if kinds[ins.c] == "int" and not (ins.f in ("add", "sub") and kinds[ins.a] == "int"
                                          and kinds[ins.b] == "int"):
            raise TpcoreError(f"{where}: integer cell {ins.c!r} may only be written by add/sub "
                              "of integer cells")
        target = labels[ins.goto] if ins.goto is not None else col + i + 1
        if target >= n:
            raise TpcoreError(f"{where}: falls off the end of the program")
        words.append({"a": _address(ins.a, addr, labels), "b": _address(ins.b, addr, labels),
                      "c": _address(ins.c, addr, labels), "m": tk.names.index(ins.f),
                      "flag": addr[ins.flag], "p": target, "wa": A[1], "wb": B[1],
                      "wc": Cs[1]})
    machine = build_machine(tk, n, m, lam)
    X0 = _punchcard(machine, program, addr, labels, words)
    return AssembledProgram(program, machine, X0, addr, labels, words)


def _address(name: str, addr: dict[str, int], labels: dict[str, int]) -> int:
    return addr[name] if name in addr else labels[name]


def _word_column(machine: FleqMachine, w: dict[str, Any]) -> np.ndarray:
    """Instruction fields as the ``instr`` rows of one column."""
    L = address_bits(machine.n)
    Lm = address_bits(len(machine.tk.blocks))
    hs = field_heights(L, Lm)
    parts = []
    for f in FIELDS:
        if f in ("wa", "wb", "wc"):
            parts.append(np.array([float(w.get(f, 0))]))
        else:
            parts.append(encode_address([int(w.get(f, 0))], hs[f])[:, 0])
    return np.concatenate(parts)


def _punchcard(machine: FleqMachine, program: FleqProgram, addr: dict[str, int],
               labels: dict[str, int], words: list[dict[str, Any]]) -> np.ndarray:
    rows, s, d, n = machine.rows, machine.s, machine.d, machine.n
    L = address_bits(n)
    X = np.zeros((rows.size, n))
    X[rows["one"]] = 1.0
    X[rows["scr"], :s] = 1.0
    X[rows["enc"], s:] = encode_address(np.arange(s, n), L)
    start = s + machine.m
    X[rows["pc"], :s] = encode_address([start], L)
    for r in range(3):
        cols = np.arange(r * d, (r + 1) * d)
        X[rows["off"][:, None], cols] = encode_address(np.arange(d), L)
        X[rows["reg"][r], cols] = 1.0
        X[rows["idx"][0], cols] = np.arange(d)
    for b in machine.tk.blocks:
        X[machine.blockmap[b.name], :s] = b.initial()[:, :s]
    for c in program.cells.values():
        a = addr[c.name]
        if c.kind == "code":
            X[rows["instr"], a] = _word_column(machine, code_fields(c, addr, labels, words))
        else:
            h, w = c.value.shape
            X[rows["data"][:h, None], np.arange(a, a + w)] = c.value
    for i, w in enumerate(words):
        X[rows["instr"], start + i] = _word_column(machine, w)
    return X


def code_fields(c: Cell, addr: dict[str, int], labels: dict[str, int],
                words: list[dict[str, Any]]) -> dict[str, Any]:
    """Fields of a code cell: a copy of a labelled instruction, or the given fields."""
    if "copy_of" in c.code:
        first = labels["_halt"] - (len(words) - 1)
        return dict(words[labels[c.code["copy_of"]] - first])
    return {f: (addr.get(v, v) if isinstance(v, str) else v) for f, v in c.code.items()}


def batch_punchcards(comp: AssembledProgram, values: dict[str, np.ndarray]) -> np.ndarray:
    """``B`` copies of the punchcard with cells replaced: ``values[name]: (B, h, w)``."""
    B = len(next(iter(values.values())))
    X = np.repeat(comp.X0[None], B, axis=0)
    rows = comp.machine.rows
    for name, v in values.items():
        v = np.asarray(v, dtype=np.float64)
        v = v.reshape(B, 1, 1) if v.ndim == 1 else v
        h, w = comp.program.cells[name].value.shape
        if v.shape[1:] != (h, w):
            raise TpcoreError(f"cell {name!r} has shape {(h, w)}; got values of {v.shape[1:]}")
        a = comp.addr[name]
        X[:, rows["data"][:h, None], np.arange(a, a + w)] = v
    return X

"""Running a FLEQ machine: loop its layers until every program halts, and read cells and the PC
back from the punchcard. Execution runs over the backend array module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tpcore.backend import get_xp, to_host
from tpcore.errors import TpcoreError
from tpcore.fleq.assemble import AssembledProgram
from tpcore.fleq.machine import FleqMachine
from tpcore.looped.encodings import decode_unsigned
from tpcore.looped.layer import layer_forward


@dataclass
class FleqRun:
    """Result of :func:`execute`: final punchcard, steps and the PC after every step."""

    X: Any
    steps: int
    pcs: list[np.ndarray]
    halted: bool


def decode_pc(machine: FleqMachine, X: Any) -> np.ndarray:
    """PC (absolute column) of each program: ``(B,)`` or scalar array."""
    return decode_unsigned(X[..., machine.rows["pc"], :1])[..., 0]


def read_cell(comp: AssembledProgram, X: Any, name: str) -> np.ndarray:
    """The value of a cell decoded from ``X`` (``(..., h, w)`` host array)."""
    c = comp.program.cells[name]
    h, w = c.value.shape
    a = comp.addr[name]
    return to_host(X[..., comp.machine.rows["data"][:h], a:a + w])


def execute(comp: AssembledProgram, X: Any | None = None, max_steps: int = 10_000,
            dtype: Any = np.float64) -> FleqRun:
    """Loop the machine until every program sits on its halting instruction; a PC outside the
    instructions (a broken run, e.g. in float32) or the step limit raises ``TpcoreError``."""
    xp = get_xp()
    machine = comp.machine
    X = xp.asarray(comp.X0 if X is None else X, dtype=dtype)
    layers = machine.layer_objects(xp, dtype)
    pcs = []
    for step in range(1, max_steps + 1):
        for lay in layers:
            X, _ = layer_forward(X, lay)
        pc = decode_pc(machine, X)
        pcs.append(pc)
        if np.all(pc == comp.halt):
            return FleqRun(X, step, pcs, True)
        if np.any((pc < machine.s + machine.m) | (pc >= machine.n)):
            raise TpcoreError(f"FLEQ run lost its program counter at step {step}: PC "
                              f"{pc.tolist()} is outside the instructions "
                              f"[{machine.s + machine.m}, {machine.n})")
    raise TpcoreError(f"FLEQ run reached the step limit {max_steps} at PC {pcs[-1].tolist()}")

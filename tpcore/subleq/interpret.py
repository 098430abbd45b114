"""The reference SUBLEQ interpreter, with the looped transformer's exact semantics (plain Python).

One step at ``pc`` (an instruction column other than EOF): ``mem[b] = wrap_N(mem[b] - mem[a])``;
``pc = c if mem[b] <= 0 else pc + 1``. Execution stops when ``pc`` reaches the EOF column.
:func:`step` is the one statement of that rule: :func:`interpret` and
:func:`run_batch_reference` loop it, and the numba kernel ``tpcore.kernels.subleq.run_batch`` is
tested equal to :func:`run_batch_reference`. Host-only code (NumPy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.looped.encodings import wrap
from tpcore.subleq.program import SubleqProgram, validate


@dataclass
class Trace:
    """``mems[t]``, ``pcs[t]``: memory and PC after ``t`` instructions (``t = 0`` is the start)."""

    mems: list[np.ndarray]
    pcs: list[int]

    @property
    def steps(self) -> int:
        return len(self.pcs) - 1


def step(program: SubleqProgram, mem: np.ndarray, pc: int) -> int:
    """Execute the instruction at column ``pc`` in place on ``mem: (m,)``; return the next PC."""
    s, m = program.s, len(program.memory)
    a, b, c = (int(v) for v in program.commands[pc - s - m])
    mem[b - s] = wrap(int(mem[b - s]) - int(mem[a - s]), program.N)
    return c if mem[b - s] <= 0 else pc + 1


def interpret(program: SubleqProgram, max_steps: int = 10_000) -> Trace:
    """Run to EOF; raise if ``max_steps`` instructions do not reach it."""
    layout = validate(program)
    mem = np.array(program.memory, dtype=np.int64)
    pc = layout.first_instruction
    trace = Trace([mem.copy()], [pc])
    while pc != layout.eof:
        if trace.steps >= max_steps:
            raise TpcoreError(f"step limit {max_steps} reached without EOF; last PC = {pc}")
        pc = step(program, mem, pc)
        trace.mems.append(mem.copy())
        trace.pcs.append(pc)
    return trace


def run_batch_reference(commands: np.ndarray, memory: np.ndarray, s: int, N: int,
                        max_steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Programs of one layout, each stepped until EOF or ``max_steps`` steps: the reference of
    ``tpcore.kernels.subleq.run_batch``.

    ``commands: (B, k, 3)`` absolute columns ``(a, b, c)`` (the last instruction is EOF),
    ``memory: (B, m)``; inputs are assumed validated. Returns the final ``memory: (B, m)`` (a
    new array), ``pc: (B,)`` (not EOF for a program stopped by the limit) and ``steps: (B,)``.
    """
    B, k, _ = commands.shape
    m = memory.shape[1]
    mem = np.array(memory, dtype=np.int64)
    pcs = np.full(B, s + m, dtype=np.int64)
    steps = np.zeros(B, dtype=np.int64)
    for i in range(B):
        program = SubleqProgram(commands[i], memory[i], s=s, N=N)
        pc = s + m
        while pc != s + m + k - 1 and steps[i] < max_steps:
            pc = step(program, mem[i], pc)
            steps[i] += 1
        pcs[i] = pc
    return mem, pcs, steps


def interpret_batch(programs: list[SubleqProgram], max_steps: int = 10_000,
                    kernel: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Run programs of one layout together (numba kernel, or :func:`run_batch_reference`).

    Returns final ``memory: (B, m)`` and ``steps: (B,)``; raises naming the first program that
    does not reach EOF within ``max_steps``.
    """
    layouts = {(p.s, len(p.memory), len(p.commands), p.N) for p in programs}
    if len(layouts) != 1:
        raise TpcoreError(f"batched programs need one layout (s, m, k, N); got {sorted(layouts)}")
    for p in programs:
        validate(p)
    p0 = programs[0]
    cmds = np.stack([p.commands for p in programs])
    mem = np.stack([p.memory for p in programs])
    if kernel:
        from tpcore.kernels.subleq import run_batch
    else:
        run_batch = run_batch_reference
    out, pcs, steps = run_batch(cmds, mem, p0.s, p0.N, max_steps)
    eof = p0.layout.eof
    bad = np.nonzero(pcs != eof)[0]
    if bad.size:
        raise TpcoreError(f"program {int(bad[0])}: step limit {max_steps} reached without EOF; "
                          f"last PC = {int(pcs[bad[0]])}")
    return out, steps

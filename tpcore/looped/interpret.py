"""Reference SUBLEQ interpreter with the looped transformer's exact semantics (plain Python).

One step at ``pc`` (an instruction column other than EOF): ``mem[b] = wrap_N(mem[b] - mem[a])``;
``pc = c if mem[b] <= 0 else pc + 1``. Execution stops when ``pc`` reaches the EOF column.
The batched numba version lives in ``tpcore.kernels.subleq``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.looped.encodings import wrap
from tpcore.looped.program import Program, validate


@dataclass
class Trace:
    """``mems[t]``, ``pcs[t]``: memory and PC after ``t`` instructions (``t = 0`` is the start)."""

    mems: list[np.ndarray]
    pcs: list[int]

    @property
    def steps(self) -> int:
        return len(self.pcs) - 1


def step(program: Program, mem: np.ndarray, pc: int) -> int:
    """Execute the instruction at column ``pc`` in place on ``mem``; return the next PC."""
    s, m = program.s, len(program.memory)
    a, b, c = (int(v) for v in program.commands[pc - s - m])
    mem[b - s] = wrap(int(mem[b - s]) - int(mem[a - s]), program.N)
    return c if mem[b - s] <= 0 else pc + 1


def interpret(program: Program, max_steps: int = 10_000) -> Trace:
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


def interpret_batch(programs: list[Program], max_steps: int = 10_000,
                    kernel: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Run programs of one layout together (numba kernel, or its NumPy reference).

    Returns final ``memory: (B, m)`` and ``steps: (B,)``; raises naming the first program that
    does not reach EOF within ``max_steps``.
    """
    from tpcore.kernels import subleq

    layouts = {(p.s, len(p.memory), len(p.commands), p.N) for p in programs}
    if len(layouts) != 1:
        raise TpcoreError(f"batched programs need one layout (s, m, k, N); got {sorted(layouts)}")
    for p in programs:
        validate(p)
    p0 = programs[0]
    cmds = np.stack([p.commands for p in programs])
    mem = np.stack([p.memory for p in programs])
    run = subleq.run_batch if kernel else subleq.run_batch_reference
    out, pcs, steps = run(cmds, mem, p0.s, p0.N, max_steps)
    eof = p0.layout.eof
    bad = np.nonzero(pcs != eof)[0]
    if bad.size:
        raise TpcoreError(f"program {int(bad[0])}: step limit {max_steps} reached without EOF; "
                          f"last PC = {int(pcs[bad[0]])}")
    return out, steps

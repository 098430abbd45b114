"""Run a SUBLEQ program on the looped transformer and on the reference interpreter side by side,
in one call: :func:`run` (what ``tpcore looped run`` prints). :func:`load` reads a program
from an example name, an assembler file or the authors' CSVs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpcore.backend import get_xp
from tpcore.errors import TpcoreError, unknown_name
from tpcore.io import read_text
from tpcore.limits import check_memory
from tpcore.subleq.asm import assemble
from tpcore.subleq.examples import EXAMPLES, example
from tpcore.subleq.interpret import Trace, interpret
from tpcore.subleq.machine import SubleqMachine, SubleqRun, build, decode_memory, execute, punchcard
from tpcore.subleq.program import SubleqProgram, load_csv

__all__ = ["DEFAULT_BITS", "LockstepRun", "load", "run"]

DEFAULT_BITS = 8
"""Bits per integer of an assembler or CSV program when none are given."""


def load(spec: str | Path, *, N: int | None = None, s: int = 1,
         mem: str | Path | None = None) -> SubleqProgram:
    """The program ``spec`` names: an example (:data:`tpcore.subleq.examples.EXAMPLES`; ``N``
    None keeps its own bits), an assembler file, or a commands CSV (header ``a,b,c``) with its
    memory CSV ``mem`` (header ``mem``); ``s`` scratchpad columns, ``N`` bits per integer."""
    spec = str(spec)
    csv = Path(spec).suffix.lower() == ".csv"
    if mem is not None and not csv:
        raise TpcoreError(f"memory CSV {str(mem)!r} goes with a commands CSV; {spec!r} is not "
                          "one")
    if spec in EXAMPLES:
        return example(spec, N, s)
    path = Path(spec)
    if not path.exists():
        raise TpcoreError(f"{unknown_name('example', spec, EXAMPLES)}, or an assembler or "
                          f"commands CSV file (there is no file {spec!r})")
    bits = DEFAULT_BITS if N is None else N
    if csv:
        if mem is None:
            raise TpcoreError(f"{spec} is a commands CSV; give its memory CSV too (--mem, or "
                              "mem= in Python)")
        return load_csv(path, mem, s=s, N=bits)
    return assemble(read_text(path, "assembly"), N=bits, s=s)


MAX_REPR_CELLS = 8
"""Named cells a :class:`LockstepRun`'s ``repr`` lists."""


@dataclass
class LockstepRun:
    """One program run both ways: the ``interpreter``'s trace (memory and PC after every
    instruction) and the ``transformer``'s run (its trace decoded the same way), the ``machine``
    that ran it and the transformer's wall time in ``seconds``."""

    program: SubleqProgram
    machine: SubleqMachine
    interpreter: Trace
    transformer: SubleqRun
    seconds: float

    @property
    def steps(self) -> int:
        """Instructions the interpreter executed before EOF."""
        return self.interpreter.steps

    def agrees_at(self, t: int) -> bool:
        """Whether the transformer's memory and PC equal the interpreter's after ``t``
        instructions."""
        run, trace = self.transformer, self.interpreter
        return bool((run.mems[t][0] == trace.mems[t]).all() and run.pcs[t][0] == trace.pcs[t])

    @property
    def agree(self) -> bool:
        """Both stop after the same number of instructions and agree after every one."""
        return (int(self.transformer.steps[0]) == self.steps
                and all(self.agrees_at(t) for t in range(self.steps + 1)))

    def __repr__(self) -> str:
        p, named = self.program, self.named_memory()
        verdict = "agrees with" if self.agree else "DISAGREES with"
        cells = ", ".join(f"{k}={v}" for k, v in list(named.items())[:MAX_REPR_CELLS])
        more = f", ... {len(named) - MAX_REPR_CELLS} more" if len(named) > MAX_REPR_CELLS else ""
        return (f"LockstepRun({len(p.commands)} instructions, {len(p.memory)} cells of {p.N} "
                f"bits: {self.steps} steps, the transformer {verdict} the interpreter, "
                f"{self.seconds:.2f} s; {cells}{more})")

    def named_memory(self, which: str = "transformer") -> dict[str, int]:
        """The final values of the named cells (labels given in the assembly)."""
        cells = self.memory(which)
        return {name: cells[name] for name in self.program.names if name in cells}

    def trace_table(self, limit: int | None = 50) -> str:
        """One line per executed instruction (the first ``limit``; None: all): the step, the
        instruction's label or column, ``subleq a b c`` with cells and targets by name, the cell
        it wrote and its new value, whether the transformer agreed after it, and the next PC."""
        p, trace = self.program, self.interpreter
        cell = {col: name for name, col in p.names.items()}
        label = {col: name for name, col in p.labels.items()}
        rows = [f"{'step':>5}  {'at':<12} {'instruction':<34} {'writes':<18} {'agrees':<6} next"]
        last = self.steps if limit is None else min(self.steps, limit)
        for t in range(1, last + 1):
            pc, nxt = trace.pcs[t - 1], trace.pcs[t]
            a, b, c = (int(v) for v in p.commands[pc - p.s - len(p.memory)])
            at = label.get(pc, str(pc))
            op = (f"subleq {cell.get(a, a)} {cell.get(b, b)} "
                  f"{label.get(c, 'EOF' if c == p.layout.eof else c)}")
            writes = f"{cell.get(b, b)} = {int(trace.mems[t][b - p.s])}"
            rows.append(f"{t:>5}  {at:<12} {op:<34} {writes:<18} "
                        f"{'yes' if self.agrees_at(t) else 'NO':<6} "
                        f"{label.get(nxt, 'EOF' if nxt == p.layout.eof else nxt)}")
        if last < self.steps:
            rows.append(f"... {self.steps - last} more steps (trace_table(limit=None): all)")
        return "\n".join(rows)

    def memory(self, which: str = "transformer") -> dict[str, int]:
        """The final data cells by name (by column where unnamed), of the ``"transformer"``
        (decoded from its state) or the ``"interpreter"``."""
        if which not in ("transformer", "interpreter"):
            raise TpcoreError(f"which={which!r}; expected 'transformer' or 'interpreter'")
        p = self.program
        mem = (decode_memory(p.layout, self.transformer.X) if which == "transformer"
               else self.interpreter.mems[-1])
        names = {col - p.s: name for name, col in p.names.items()}
        return {str(names.get(i, p.s + i)): int(v) for i, v in enumerate(mem)}


def run(program: SubleqProgram | str | Path, *, lam: float | None = None,
        schedule: str = "fused", snap: bool = True, sparse: bool | str = False,
        max_steps: int = 10_000, tol: float = 1e-9, N: int | None = None, s: int = 1,
        mem: str | Path | None = None) -> LockstepRun:
    """Run ``program`` (a :class:`SubleqProgram`, or what :func:`load` reads with ``N``, ``s``,
    ``mem``) on the interpreter and on the looped transformer built for it
    (:func:`tpcore.subleq.machine.build`: ``lam`` None is the exact hardmax machine, a number the
    softmax of Eq. 1; ``schedule`` ``"fused"`` or ``"paper"``; ``snap`` the error-correction
    layer), looped to the EOF fixed point (``sparse``: False, True or ``"kernel"``, see
    :meth:`SubleqMachine.forward`). The estimated memory is checked first."""
    if not isinstance(program, SubleqProgram):
        program = load(program, N=N, s=s, mem=mem)
    lo = program.layout
    check_memory(lo.memory_estimate(sparse=bool(sparse), trace_steps=max_steps),
                 f"looped run (s={lo.s}, m={lo.m}, {lo.k} instructions, N={lo.N}: X is "
                 f"{lo.d} x {lo.n}; trace of up to {max_steps} steps)")
    trace = interpret(program, max_steps=max_steps)
    xp = np if sparse == "kernel" else get_xp()       # the numba kernel runs on the host
    machine = build(lo, lam=lam, schedule=schedule, snap=snap, xp=xp)
    start = time.perf_counter()
    result = execute(machine, punchcard(program, xp), max_steps=max_steps, trace=True,
                     sparse=sparse, tol=tol)
    return LockstepRun(program, machine, trace, result, time.perf_counter() - start)

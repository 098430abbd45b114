"""Batched SUBLEQ interpreter: a numba kernel and its plain NumPy reference (same semantics).

Programs use absolute punchcard columns: ``commands: (B, k, 3)`` int64 ``(a, b, c)`` with memory
columns ``s..s+m-1`` and instruction columns ``s+m..s+m+k-1`` (the last is EOF); ``memory: (B, m)``
int64. One step at ``pc != EOF``: ``mem[b] = wrap_N(mem[b] - mem[a])``; ``pc = c if mem[b] <= 0
else pc + 1``. Each program runs until EOF or ``max_steps`` steps. Returns ``(memory, pc, steps)``
with ``memory`` a new array; a program that has not reached EOF has ``pc != s + m + k - 1``.
Inputs are assumed validated (``tpcore.looped.program.validate``).
"""

from __future__ import annotations

import numba
import numpy as np


def run_batch_reference(commands: np.ndarray, memory: np.ndarray, s: int, N: int,
                        max_steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plain NumPy/Python reference of :func:`run_batch`."""
    B, k, _ = commands.shape
    m = memory.shape[1]
    mem = memory.astype(np.int64).copy()
    pcs = np.full(B, s + m, dtype=np.int64)
    steps = np.zeros(B, dtype=np.int64)
    eof, half, size = s + m + k - 1, 1 << (N - 1), 1 << N
    for i in range(B):
        pc = s + m
        while pc != eof and steps[i] < max_steps:
            a, b, c = commands[i, pc - s - m]
            mem[i, b - s] = (mem[i, b - s] - mem[i, a - s] + half) % size - half
            pc = c if mem[i, b - s] <= 0 else pc + 1
            steps[i] += 1
        pcs[i] = pc
    return mem, pcs, steps


@numba.njit(cache=True, parallel=True)
def _run(commands, mem, pcs, steps, s, N, max_steps):
    B, k, _ = commands.shape
    m = mem.shape[1]
    eof = s + m + k - 1
    half = np.int64(1) << (N - 1)
    mask = (np.int64(1) << N) - 1
    for i in numba.prange(B):
        pc = s + m
        n = 0
        while pc != eof and n < max_steps:
            j = pc - s - m
            a = commands[i, j, 0] - s
            b = commands[i, j, 1] - s
            v = ((mem[i, b] - mem[i, a] + half) & mask) - half
            mem[i, b] = v
            pc = commands[i, j, 2] if v <= 0 else pc + 1
            n += 1
        pcs[i] = pc
        steps[i] = n


def run_batch(commands: np.ndarray, memory: np.ndarray, s: int, N: int,
              max_steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """numba kernel (parallel over programs); same contract as :func:`run_batch_reference`."""
    commands = np.ascontiguousarray(commands, dtype=np.int64)
    mem = np.array(memory, dtype=np.int64, order="C")
    B = commands.shape[0]
    pcs = np.zeros(B, dtype=np.int64)
    steps = np.zeros(B, dtype=np.int64)
    _run(commands, mem, pcs, steps, s, N, max_steps)
    return mem, pcs, steps

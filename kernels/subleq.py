"""The batched SUBLEQ interpreter as a numba kernel, parallel over programs. Its reference is
``tpcore.subleq.interpret.run_batch_reference`` (the same contract), which the tests compare it
with; the rule of one step is ``tpcore.subleq.interpret.step``.
"""

from __future__ import annotations

import numba
import numpy as np


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
    """Run every program until EOF or ``max_steps`` steps: ``commands: (B, k, 3)`` absolute
    columns ``(a, b, c)`` (memory ``s..s+m-1``, instructions ``s+m..s+m+k-1``, the last EOF),
    ``memory: (B, m)``, ``N`` bits per integer; inputs are assumed validated. Returns
    ``(memory, pc, steps)`` with ``memory`` a new array and ``pc != s + m + k - 1`` for a
    program that has not reached EOF."""
    commands = np.ascontiguousarray(commands, dtype=np.int64)
    mem = np.array(memory, dtype=np.int64, order="C")
    B = commands.shape[0]
    pcs = np.zeros(B, dtype=np.int64)
    steps = np.zeros(B, dtype=np.int64)
    _run(commands, mem, pcs, steps, s, N, max_steps)
    return mem, pcs, steps

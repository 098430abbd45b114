"""Shared generators for the looped-computer tests."""

import numpy as np
import pytest

from tpcore.looped.program import Program


def make_random_program(rng: np.random.Generator, m: int = 6, k: int = 8, N: int = 6,
                        s: int = 1, vmax: int = 5) -> Program:
    """Random SUBLEQ program: cells 0, 1 hold EOF's 0 and -1; other instructions write cells
    2.. and jump anywhere; the last instruction is EOF. It need not halt."""
    cells = np.arange(s, s + m)
    body = np.stack([rng.choice(cells, k - 1), rng.choice(cells[2:], k - 1),
                     rng.integers(s + m, s + m + k, k - 1)], axis=1)
    eof = np.array([[s, s + 1, s + m + k - 1]])
    mem = np.concatenate([[0, -1], rng.integers(-vmax, vmax + 1, m - 2)])
    return Program(np.concatenate([body, eof]).astype(np.int64), mem.astype(np.int64), s=s, N=N)


@pytest.fixture
def random_program():
    """``random_program(rng, m=6, k=8, N=6, s=1, vmax=5)`` -> a random :class:`Program`."""
    return make_random_program

"""Shared fixtures for the SUBLEQ tests."""

import pytest

from tpcore.subleq.examples import random_program as _random_program


@pytest.fixture
def random_program():
    """``random_program(rng, m=6, k=8, N=6, s=1, vmax=5)`` -> a random, possibly halting,
    :class:`~tpcore.subleq.program.SubleqProgram`."""

    def make(rng, m=6, k=8, N=6, s=1, vmax=5):
        return _random_program(rng, m, k, N, s=s, vmax=vmax)

    return make

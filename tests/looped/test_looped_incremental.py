"""The numba sparse-path kernel over many passes in one call: incremental (skips columns whose
output cannot change) == full, parallel == serial, both == the NumPy sparse path stepped."""

import numpy as np
import pytest
from tpcore.kernels.looped import run_sparse

from tpcore.looped.compiled import compile_layers, forward_compiled
from tpcore.looped.layer import layer_forward_sparse
from tpcore.subleq.examples import random_program
from tpcore.subleq.machine import build, decode_memory, decode_pc, punchcard
from tpcore.subleq.program import SubleqProgram

pytestmark = pytest.mark.host_only(
    "the numba sparse-path kernel and its NumPy reference on host arrays")

EPS_SOFT = 1e-9


def _batch(seed, s=1, count=10):
    rng = np.random.default_rng(seed)
    progs = [random_program(rng, 6, 9, 5, s=s) for _ in range(count)]
    return progs, np.stack([punchcard(p) for p in progs])


def _stepped(machine, X, T, g):
    """Reference: ``T`` passes of the NumPy sparse path; returns every pass's X."""
    out = []
    for _ in range(T):
        for layer in machine.layers:
            X = layer_forward_sparse(X, layer, g, hard=machine.hard)
        out.append(X)
    return out


@pytest.mark.parametrize("lam", [None, 5.0])
def test_incremental_equals_full_and_numpy(lam):
    progs, X = _batch(3)
    M = build(progs[0].layout, lam=lam)
    C = compile_layers(M.layers)
    T = 24
    ref = _stepped(M, X, T, 1)
    full = forward_compiled(X, C, 1, M.hard, T, incremental=False)
    inc = forward_compiled(X, C, 1, M.hard, T)
    np.testing.assert_array_equal(inc, full)                  # bitwise, hard and soft
    np.testing.assert_allclose(inc, ref[-1], rtol=0, atol=0 if M.hard else EPS_SOFT)
    np.testing.assert_array_equal(inc, forward_compiled(X, C, 1, M.hard, T, parallel=True))
    # the run did execute instructions: memory and PC moved for some programs
    assert (decode_pc(M.layout, inc) != M.layout.first_instruction).any()
    assert (decode_memory(M.layout, inc) != np.stack([p.memory for p in progs])).any()


def test_pass_change_is_reported_and_zero_at_the_fixed_point():
    """``run_sparse`` returns max |X_T - X_(T-1)| per program: > 0 while running, 0 at EOF."""
    halting = SubleqProgram(np.array([[2, 2, 7], [1, 1, 7], [4, 3, 7]]), np.array([0, 3, 0, 0]),
                            1, 5)
    looping = SubleqProgram(np.array([[1, 2, 5], [1, 1, 5], [4, 3, 7]]), np.array([1, 3, 0, 0]),
                            1, 5)
    X = np.stack([punchcard(halting), punchcard(looping)])
    M = build(halting.layout)
    C = compile_layers(M.layers)
    for T in (1, 2, 6):
        XT = np.ascontiguousarray(X.swapaxes(1, 2))
        delta = run_sparse(XT, T, 1, True, 1e-9, C.args)
        prev, last = _stepped(M, X, T, 1)[-2:] if T > 1 else (X, _stepped(M, X, 1, 1)[0])
        np.testing.assert_array_equal(XT.swapaxes(1, 2), last)
        np.testing.assert_array_equal(delta, np.abs(last - prev).reshape(2, -1).max(axis=1))
    assert delta[0] == 0.0 and delta[1] > 0.0


def test_two_scratchpad_columns():
    """``g = 2`` (column 1 attends globally too): same X as the NumPy path with n_global = 2."""
    progs, X = _batch(4, s=2, count=6)
    M = build(progs[0].layout)
    C = compile_layers(M.layers)
    ref = _stepped(M, X, 12, 2)[-1]
    for incremental in (False, True):
        np.testing.assert_array_equal(forward_compiled(X, C, 2, True, 12,
                                                       incremental=incremental), ref)

"""Lockstep: the looped transformer against the interpreter, after every loop iteration (on the
active backend; the numba kernel path on the host)."""

import numpy as np
import pytest

from tpcore.backend import asarray, get_xp, to_host
from tpcore.errors import TpcoreError
from tpcore.looped.encodings import encode_int, wrap
from tpcore.looped.layer import layer_forward
from tpcore.subleq import blocks
from tpcore.subleq.examples import EXAMPLES, example
from tpcore.subleq.interpret import interpret, step
from tpcore.subleq.machine import build, decode_memory, decode_pc, execute, punchcard
from tpcore.subleq.program import SubleqProgram

EPS_SOFT = 1e-9
"""With the snap layer a softmax run equals the hardmax run to this (it is exact in practice)."""


def _assert_lockstep(run, trace, b=0):
    assert int(run.steps[b]) == trace.steps
    for t in range(trace.steps + 1):
        np.testing.assert_array_equal(run.mems[t][b], trace.mems[t], err_msg=f"iteration {t}")
        assert int(run.pcs[t][b]) == trace.pcs[t], f"PC at iteration {t}"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_lockstep_hard_and_soft(name):
    p = example(name)
    trace = interpret(p)
    xp = get_xp()
    hard = execute(build(p.layout, xp=xp), punchcard(p, xp), trace=True, keep_X=True)
    _assert_lockstep(hard, trace)
    M = build(p.layout, xp=xp)
    np.testing.assert_array_equal(to_host(M.forward(hard.X)), to_host(hard.X))  # EOF: fixed
    soft = execute(build(p.layout, lam=6.0, xp=xp), punchcard(p, xp), trace=True, keep_X=True)
    _assert_lockstep(soft, trace)
    gap = max(np.abs(a - b).max() for a, b in zip(soft.Xs, hard.Xs))
    assert gap <= EPS_SOFT


@pytest.mark.parametrize("name", ["multiply", "minsky"])
def test_paper_schedule_and_no_snap_lockstep(name):
    p = example(name)
    trace = interpret(p)
    xp = get_xp()
    for M in (build(p.layout, schedule="paper", xp=xp),
              build(p.layout, lam=30.0, snap=False, xp=xp),
              build(p.layout, lam=30.0, schedule="paper", snap=False, xp=xp)):
        _assert_lockstep(execute(M, punchcard(p, xp), trace=True, tol=1e-6), trace)


def test_random_programs_lockstep_batched_and_sparse(random_program):
    """Random bounded programs (they need not halt): T iterations, batched; the dense path, the
    NumPy sparse path and the numba sparse kernel give the same X."""
    rng = np.random.default_rng(7)
    progs = [random_program(rng, m=6, k=9, N=5) for _ in range(12)]
    lo = progs[0].layout
    T = 20
    X = np.stack([punchcard(p) for p in progs])
    for M in (build(lo), build(lo, lam=5.0)):
        Xd, Xs, Xk = X.copy(), X.copy(), X.copy()
        mems = [p.memory.copy() for p in progs]
        pcs = [lo.first_instruction] * len(progs)
        for _ in range(T):
            Xd, Xs, Xk = M.forward(Xd), M.forward(Xs, sparse=True), M.forward(Xk, "kernel")
            for i, p in enumerate(progs):
                if pcs[i] != lo.eof:
                    pcs[i] = step(p, mems[i], pcs[i])
            np.testing.assert_allclose(Xs, Xd, rtol=0, atol=0 if M.hard else EPS_SOFT)
            np.testing.assert_allclose(Xk, Xs, rtol=0, atol=0 if M.hard else EPS_SOFT)
            np.testing.assert_array_equal(decode_memory(lo, Xd), np.stack(mems))
            np.testing.assert_array_equal(decode_pc(lo, Xd), pcs)
        single = punchcard(progs[3])
        for _ in range(T):
            single = M.forward(single)
        np.testing.assert_allclose(single, Xd[3], rtol=0, atol=0 if M.hard else EPS_SOFT)


def test_subtract_flag_branch_exhaustive_4_bits():
    """One instruction ``subleq A, B, EOF`` for every (A, B) in the 4-bit range, batched."""
    N = 4
    vals = np.arange(-8, 8)
    A, Bv = np.meshgrid(vals, vals, indexing="ij")
    cmds = np.array([[3, 4, 7], [1, 1, 7], [1, 2, 7]])            # columns 5, 6, 7 (EOF)
    progs = [SubleqProgram(cmds, np.array([0, -1, a, b]), s=1, N=N)
             for a, b in zip(A.ravel(), Bv.ravel())]
    lo = progs[0].layout
    X = build(lo, xp=get_xp()).forward(asarray(np.stack([punchcard(p) for p in progs])))
    mem = decode_memory(lo, X)
    expected = wrap(Bv.ravel() - A.ravel(), N)
    np.testing.assert_array_equal(mem[:, 3], expected)
    np.testing.assert_array_equal(mem[:, 2], A.ravel())
    np.testing.assert_array_equal(decode_pc(lo, X), np.where(expected <= 0, 7, 6))


def test_snap_restores_noisy_values_exactly():
    p = example("multiply")
    lo = p.layout
    layer = blocks.merge([blocks.snap(lo, lo.gate, eps=0.25)], get_xp())
    X = punchcard(p)
    noise = np.random.default_rng(0).uniform(-0.24, 0.24, X.shape)
    noisy = X.copy()
    for name in ("mem",):
        noisy[lo.rows[name]] += noise[lo.rows[name]]
    for name in blocks.SNAP_ROWS:
        noisy[lo.rows[name], 0] += noise[lo.rows[name], 0]
    np.testing.assert_allclose(to_host(layer_forward(asarray(noisy), layer)[0]), X, rtol=0,
                               atol=1e-12)


def test_size_against_paper():
    lo = example("search").layout
    fused, paper = build(lo).size(), build(lo, schedule="paper").size()
    assert (fused["layers"], fused["max_heads"]) == (5, 2)
    assert (paper["layers"], paper["max_heads"]) == (8, 2)
    assert fused["d"] == 12 * lo.L + 5 * lo.N + 2 and fused["d_paper"] == 8 * lo.L + 3 * lo.N + 1


def test_step_limit_names_last_pc():
    p = example("multiply")
    with pytest.raises(TpcoreError, match=r"step limit 4 reached .* last PC = \d+"):
        execute(build(p.layout), punchcard(p), max_steps=4)


def test_initial_memory_encoding_roundtrip():
    p = example("reverse")
    X = punchcard(p)
    np.testing.assert_array_equal(decode_memory(p.layout, X), p.memory)
    assert decode_pc(p.layout, X) == p.layout.first_instruction
    np.testing.assert_array_equal(encode_int(p.memory, p.N),
                                  X[p.layout.rows["mem"], 1:1 + len(p.memory)])

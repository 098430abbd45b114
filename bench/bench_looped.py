"""Throughput of the SUBLEQ looped transformer and of the interpreter kernel.

* ``test_batched_looped``: 1,000 random programs of n = 64 columns (16 memory cells, 47
  instructions, N = 8) advanced together, hardmax, 5-layer machine. Rows: the numba CSR kernel
  of the sparse path, incremental (from the second pass of a call on it recomputes only the
  columns whose layer output can change; bitwise the same X), serial and ``parallel`` (prange
  over programs), 50 passes per call, the cold first pass included; the same kernel with every
  column recomputed (``kernel-full``, 10 passes per call); the NumPy sparse path and dense Eq. 1
  (one pass). ``extra_info["instr_per_s"]`` counts one instruction per program per pass, by wall
  time; ``extra_info["cpu_instr_per_s"]`` by the process's CPU time (all threads), which the
  other processes on a shared machine disturb less.
* ``test_interpreter``: the numba batched interpreter vs its NumPy reference on random programs.
* ``test_sparse_vs_dense``: one program of n = 256 and 1024 columns, one loop iteration, dense
  O(n^2 d) attention vs the scratchpad-only path (NumPy and kernel).

Run: ``OPENBLAS_NUM_THREADS=1 pytest bench/bench_looped.py --benchmark-enable`` (BLAS threads
fight the other processes on a shared 2-core machine). Compare rows of one run: absolute
figures are noisy there.
"""

import time

import numpy as np
import pytest
from tpcore.kernels.subleq import run_batch

from tpcore.looped.compiled import compile_layers, forward_compiled
from tpcore.subleq.examples import random_program
from tpcore.subleq.interpret import run_batch_reference
from tpcore.subleq.machine import build, punchcard


def _random_programs(B, m, k, N=8, seed=0):
    """``B`` random programs that never halt (values in [-20, 20])."""
    rng = np.random.default_rng(seed)
    return [random_program(rng, m, k, N, vmax=20, halting=False) for _ in range(B)]


@pytest.fixture(scope="module")
def batch64():
    progs = _random_programs(1000, 16, 47)
    X = np.stack([punchcard(p) for p in progs])
    machine = build(progs[0].layout)
    assert progs[0].layout.n == 64
    return machine, X


KERNEL_PATHS = {"kernel-incremental": (50, dict()), "kernel-parallel": (50, dict(parallel=True)),
                "kernel-full": (10, dict(incremental=False))}
"""Kernel rows: passes per call and ``forward_compiled`` options."""


def _cpu_timed(fn, cpu):
    """``fn`` that appends the process CPU seconds of each call to ``cpu``."""
    def call(*args, **kwargs):
        start = time.process_time()
        out = fn(*args, **kwargs)
        cpu.append(time.process_time() - start)
        return out
    return call


@pytest.mark.parametrize("path", [*KERNEL_PATHS, "numpy-sparse", "numpy-dense"])
def test_batched_looped(benchmark, batch64, path):
    machine, X = batch64
    B = X.shape[0]
    cpu = []
    if path in KERNEL_PATHS:
        iters, options = KERNEL_PATHS[path]
        layers = compile_layers(machine.layers)
        forward_compiled(X[:2], layers, 1, True, 2, **options)     # compile
        out = benchmark.pedantic(_cpu_timed(forward_compiled, cpu),
                                 (X, layers, 1, True, iters), options, rounds=3)
    else:
        iters = 1
        out = benchmark.pedantic(_cpu_timed(machine.forward, cpu), (X, path == "numpy-sparse"),
                                 rounds=1)
    benchmark.extra_info["instr_per_s"] = B * iters / benchmark.stats.stats.mean
    benchmark.extra_info["cpu_instr_per_s"] = B * iters / min(cpu)
    assert out.shape == X.shape


@pytest.mark.parametrize("impl", ["kernel", "numpy"])
def test_interpreter(benchmark, impl):
    progs = _random_programs(1000 if impl == "kernel" else 20, 16, 47, N=16, seed=1)
    cmds = np.stack([p.commands for p in progs])
    mem = np.stack([p.memory for p in progs])
    steps = 20_000 if impl == "kernel" else 2_000
    fn = run_batch if impl == "kernel" else run_batch_reference
    fn(cmds[:2], mem[:2], 1, 16, 10)                                 # compile
    out = benchmark.pedantic(fn, (cmds, mem, 1, 16, steps), rounds=3)
    benchmark.extra_info["instr_per_s"] = float(out[2].sum()) / benchmark.stats.stats.mean
    assert (out[2] == steps).all()


@pytest.mark.parametrize("n", [256, 1024])
@pytest.mark.parametrize("path", ["dense", "sparse", "kernel"])
def test_sparse_vs_dense(benchmark, n, path):
    m = n // 4
    prog = _random_programs(1, m, n - m - 1, seed=2)[0]
    machine = build(prog.layout, lam=10.0)
    X = punchcard(prog)[None]
    if path == "kernel":
        layers = compile_layers(machine.layers)
        forward_compiled(X, layers, 1, False)
        out = benchmark.pedantic(forward_compiled, (X, layers, 1, False), rounds=3)
    else:
        out = benchmark.pedantic(machine.forward, (X, path == "sparse"), rounds=3)
    benchmark.extra_info["n"] = n
    benchmark.extra_info["d"] = prog.layout.d
    assert out.shape == X.shape

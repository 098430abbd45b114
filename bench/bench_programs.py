"""Interpreter throughput (tokens/s) on a sort-shaped program: 3 layers, 4 categorical + 4
numerical heads and 2 + 2 MLPs per layer, |V| = 8, N = 10 (8 content tokens, <s>, </s>), batches
of 10^5 sequences. Engines side by side in one run: the numba kernel (one thread, and all
cores), the NumPy reference, and the generated standalone Python program (timed on a subset,
one sequence at a time).

The program is a trained sort program when ``TPCORE_BENCH_PROGRAM`` names one (a run directory,
``.json`` or ``.py``), else a random program of the same shape (the kernel's cost does not depend
on the table contents). Run: ``pytest bench/bench_programs.py --benchmark-enable``. Each bench
stores ``extra_info["tokens_per_s"]``; ``test_ratio`` stores the kernel / generated-program ratio.
The machine is shared, so absolute timings are noisy.
"""

from __future__ import annotations

import importlib.util
import os
import time

import numpy as np
import pytest

from tpcore.pipelines.decompile import load_program
from tpcore.programs.examples import random_inputs, random_program
from tpcore.programs.interpret import compile_program, run_reference
from tpcore.programs.source import writer

B = 100_000
B_PYTHON = 300


@pytest.fixture(scope="module")
def program():
    path = os.environ.get("TPCORE_BENCH_PROGRAM")
    if path:
        return load_program(path)
    return random_program(7, layers=3, cat_heads=4, num_heads=4, cat_mlps=2, num_mlps=2,
                          vocab=8, max_len=10, rule="closest")


@pytest.fixture(scope="module")
def batch(program):
    return random_inputs(program, B, seed=0, min_len=program.max_len)


@pytest.fixture(scope="module")
def generated(program, tmp_path_factory):
    path, _ = writer.write(program, tmp_path_factory.mktemp("bench") / "sort.py")
    spec = importlib.util.spec_from_file_location("bench_sort_program", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _python_run(module, program, ids, lengths):
    vocab = program.tokens.values
    for row, n in zip(ids, lengths):
        module.run([vocab[i] for i in row[:n]])


@pytest.mark.parametrize("threads", [1, os.cpu_count() or 1])
def test_kernel(benchmark, program, batch, threads):
    from tpcore.kernels.programs import run_compiled

    ids, lengths = batch
    compiled = compile_program(program)
    run_compiled(compiled, ids[:100], lengths[:100], threads)  # compile / load the cache
    benchmark.pedantic(run_compiled, args=(compiled, ids, lengths, threads), rounds=3,
                       iterations=1)
    benchmark.extra_info["tokens_per_s"] = lengths.sum() / benchmark.stats.stats.mean


def test_numpy_reference(benchmark, program, batch):
    ids, lengths = batch
    benchmark.pedantic(run_reference, args=(program, ids, lengths), rounds=1, iterations=1)
    benchmark.extra_info["tokens_per_s"] = lengths.sum() / benchmark.stats.stats.mean


def test_generated_program(benchmark, program, batch, generated):
    ids, lengths = (a[:B_PYTHON] for a in batch)
    benchmark.pedantic(_python_run, args=(generated, program, ids, lengths), rounds=1,
                       iterations=1)
    benchmark.extra_info["tokens_per_s"] = lengths.sum() / benchmark.stats.stats.mean


def test_ratio(benchmark, program, batch, generated):
    """Kernel (one thread) and generated program timed back to back; their tokens/s ratio, by
    wall-clock time and by CPU time of this process (the latter does not count the time other
    processes on the shared cores take)."""
    from tpcore.kernels.programs import run_compiled

    ids, lengths = batch
    compiled = compile_program(program)
    run_compiled(compiled, ids[:10], lengths[:10])
    n_fast, n_slow = lengths.sum(), lengths[:B_PYTHON].sum()

    def both():
        w0, c0 = time.perf_counter(), time.process_time()
        fast = run_compiled(compiled, ids, lengths)
        w1, c1 = time.perf_counter(), time.process_time()
        _python_run(generated, program, ids[:B_PYTHON], lengths[:B_PYTHON])
        w2, c2 = time.perf_counter(), time.process_time()
        return fast, (n_fast / (w1 - w0), n_slow / (w2 - w1)), (n_fast / (c1 - c0),
                                                                 n_slow / (c2 - c1))

    fast, wall, cpu = benchmark.pedantic(both, rounds=1, iterations=1)
    benchmark.extra_info.update(kernel_tokens_per_s=float(wall[0]),
                                python_tokens_per_s=float(wall[1]), ratio=float(wall[0] / wall[1]),
                                kernel_tokens_per_cpu_s=float(cpu[0]),
                                python_tokens_per_cpu_s=float(cpu[1]),
                                ratio_cpu=float(cpu[0] / cpu[1]))
    print(f"\nwall: kernel {wall[0]:,.0f} tokens/s, generated program {wall[1]:,.0f} tokens/s, "
          f"ratio {wall[0] / wall[1]:,.0f}x\ncpu:  kernel {cpu[0]:,.0f} tokens/s, generated "
          f"program {cpu[1]:,.0f} tokens/s, ratio {cpu[0] / cpu[1]:,.0f}x")
    labels = program.output_labels()
    want = [labels[x] for x in fast[0, : lengths[0]]]
    vocab = program.tokens.values
    assert generated.run([vocab[i] for i in ids[0, : lengths[0]]]) == want
    assert np.all(fast[:, 0] >= 0)

"""Throughput of the FLEQ matrix-product block: 8 x 8 products ``A^T B`` through the Lemma 7
attention block (2 layers; one head, and the symmetric two-head variant), batched, next to
NumPy's batched ``A^T B`` on the same batch (the ratio is the cost of computing a product with
a softmax). ``extra_info["products_per_s"]`` counts one 8 x 8 product per batch element.

Run: ``OPENBLAS_NUM_THREADS=1 pytest bench/bench_fleq.py --benchmark-enable``. The machine is
shared by several jobs: compare rows of one run, absolute figures are noisy.
"""

import numpy as np
import pytest

from tpcore.fleq.blocks import block_layers, matmul_block, run_block

D, BATCH = 8, 1000


@pytest.fixture(scope="module")
def operands():
    rng = np.random.default_rng(0)
    return rng.uniform(-1, 1, (BATCH, D, D)), rng.uniform(-1, 1, (BATCH, D, D))


@pytest.mark.parametrize("variant", ["one-head", "symmetric", "numpy"])
def test_matmul_block_throughput(benchmark, operands, variant):
    A, B = operands
    if variant == "numpy":
        out = benchmark(lambda: np.swapaxes(A, 1, 2) @ B)
    else:
        sym = variant == "symmetric"
        blk = matmul_block(D, 3 * D, c=1e-5 if sym else 1e-7, symmetric=sym)
        layers = block_layers(blk)
        out = benchmark(run_block, blk, A, B, layers=layers)
    err = np.abs(np.asarray(out) - np.swapaxes(A, 1, 2) @ B).max()
    assert err < 1e-6
    benchmark.extra_info["products_per_s"] = BATCH / benchmark.stats.stats.mean
    benchmark.extra_info["max_abs_error"] = float(err)

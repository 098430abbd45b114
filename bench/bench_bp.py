"""Throughput of exact BP_k (root and every leaf marginal, log Z): numba kernel vs the NumPy
reference, l = 4, q = 4, the paper's grammar, one core.

Run: ``pytest bench/bench_bp.py --benchmark-enable``. Each bench stores
``extra_info["seq_per_s"]``; compare the kernel and reference rows of one run (the machine is
shared, absolute figures are noisy).
"""

import numpy as np
import pytest

from tpcore.bp import belief_propagation, evidence_from_leaves
from tpcore.tasks.trees import random_grammar, sample_trees

B = 20000


@pytest.fixture(scope="module")
def data():
    g = random_grammar(4, 1.0, seed=0, paper_grammar=True)
    leaves = sample_trees(g, B, 4, k=0, seed=0).leaves
    mask = np.zeros(leaves.shape, bool)
    mask[np.arange(B), np.random.default_rng(0).integers(0, 16, B)] = True
    return g, evidence_from_leaves(leaves, 4, mask)


@pytest.mark.parametrize("k", [0, 2, 4])
@pytest.mark.parametrize("impl", ["kernel", "numpy"])
def test_bp_throughput(benchmark, data, impl, k):
    g, e = data
    use_kernel = impl == "kernel"
    belief_propagation(g.M, g.p0, e[:8], k, use_kernel=use_kernel)  # compile / warm up
    res = benchmark(belief_propagation, g.M, g.p0, e, k, use_kernel=use_kernel)
    benchmark.extra_info["seq_per_s"] = B / benchmark.stats.stats.mean
    assert res.leaves.shape == (B, 16, 4)

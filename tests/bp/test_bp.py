import itertools

import numpy as np
import pytest

from tpcore.backend import asarray, to_host
from tpcore.bp import BPResult, belief_propagation, bp_forward, evidence_from_leaves
from tpcore.errors import TpcoreError
from tpcore.tasks.trees import parse_levels, path_matrices, random_grammar, sample_trees


def _brute(T, x, mask):
    """Root posterior, leaf cavities and log Z of one sequence from the joint table."""
    q, N = T.shape[0], T.ndim - 1
    masked = tuple(1 + i for i in range(N) if mask[i])
    root_joint = T.sum(axis=masked) if masked else T
    obs = tuple(int(x[i]) for i in range(N) if not mask[i])
    pr = root_joint[(slice(None),) + obs]
    cav = np.empty((N, q))
    for i in range(N):
        axes = tuple(1 + j for j in range(N) if mask[j] and j != i) + (0,)
        Ti = T.sum(axis=axes)  # remaining axes: leaves j not masked, or j == i
        keep = [j for j in range(N) if not mask[j] or j == i]
        index = tuple(slice(None) if j == i else int(x[j]) for j in keep)
        cav[i] = Ti[index]
        cav[i] /= cav[i].sum()
    return pr / pr.sum(), cav, np.log(pr.sum())


def _reference(M, p0, e, k):
    """``bp_forward`` on arrays of the active backend, its results back on the host."""
    res = bp_forward(asarray(M), asarray(p0), asarray(e), k)[0]
    return BPResult(*(to_host(a) for a in (res.root, res.leaves, res.cavity, res.log_z)))


def _grammars():
    g = random_grammar(3, 1.0, seed=2)
    dense = np.random.default_rng(0).random((3, 3, 3)) + 0.05
    return [(g.M, g.p0), (dense / dense.sum(axis=(1, 2), keepdims=True), np.array([.5, .3, .2]))]


@pytest.mark.parametrize("l,k", [(l, k) for l in (1, 2, 3) for k in range(l + 1)])
def test_bp_matches_brute_force_enumeration(l, k, joint_table):
    gen = np.random.default_rng(10 * l + k)
    for M, p0 in _grammars():
        T = joint_table(M, p0, l, k)
        N = 2**l
        x = gen.integers(0, 3, size=(6, N))
        mask = gen.random((6, N)) < 0.3
        mask[0] = False
        mask[1, :] = [True] + [False] * (N - 1)
        e = evidence_from_leaves(x, 3, mask)
        for res in (_reference(M, p0, e, k), belief_propagation(M, p0, e, k)):
            for n in range(6):
                root, cav, lz = _brute(T, x[n], mask[n])
                np.testing.assert_allclose(res.root[n], root, atol=1e-12)
                np.testing.assert_allclose(res.cavity[n], cav, atol=1e-12)
                np.testing.assert_allclose(res.log_z[n], lz, atol=1e-10)
                post = np.where(mask[n][:, None], cav, np.eye(3)[x[n]])
                np.testing.assert_allclose(res.leaves[n], post, atol=1e-12)


def test_k0_masked_leaf_closed_form():
    g = random_grammar(4, 1.0, seed=0, paper_grammar=True)
    t = sample_trees(g, 50, 3, k=0, seed=3)
    i = 5
    mask = np.zeros(t.leaves.shape, bool)
    mask[:, i] = True
    res = belief_propagation(g.M, g.p0, evidence_from_leaves(t.leaves, 4, mask), 0)
    for n in range(50):
        w = np.empty(4)
        for b in range(4):
            x = t.leaves[n:n + 1].copy()
            x[0, i] = b
            levels = parse_levels(g, x)
            p, pos = g.p0[levels[0][0, 0]], i
            for m in range(3, 0, -1):  # factors on the path from leaf i to the root
                s = pos - pos % 2
                p *= g.M[levels[m - 1][0, pos // 2], levels[m][0, s], levels[m][0, s + 1]]
                pos //= 2
            w[b] = p
        np.testing.assert_allclose(res.leaves[n, i], w / w.sum(), atol=1e-12)


def test_k_equals_l_is_naive_bayes():
    g = random_grammar(4, 1.0, seed=0, paper_grammar=True)
    l = 3
    Q = path_matrices(g.M, l)
    t = sample_trees(g, 40, l, k=l, seed=1)
    mask = np.zeros(t.leaves.shape, bool)
    mask[:, 2] = True
    res = belief_propagation(g.M, g.p0, evidence_from_leaves(t.leaves, 4, mask), l)
    for n in range(40):
        lik = np.prod([Q[j][:, t.leaves[n, j]] for j in range(8) if j != 2], axis=0)
        root = g.p0 * lik
        np.testing.assert_allclose(res.root[n], root / root.sum(), atol=1e-12)
        pred = (g.p0 * lik) @ Q[2]
        np.testing.assert_allclose(res.leaves[n, 2], pred / pred.sum(), atol=1e-12)


def test_matched_k0_root_is_exact_and_mismatch_is_handled():
    g = random_grammar(4, 1.0, seed=0, paper_grammar=True)
    for k in range(5):
        t = sample_trees(g, 300, 4, k=k, seed=k)
        e = evidence_from_leaves(t.leaves, 4)
        for kp in range(5):
            ref = _reference(g.M, g.p0, e, kp)
            ker = belief_propagation(g.M, g.p0, e, kp)
            for f in ("root", "leaves", "cavity"):
                np.testing.assert_allclose(getattr(ker, f), getattr(ref, f), atol=1e-12)
            np.testing.assert_array_equal(np.isinf(ker.log_z), np.isinf(ref.log_z))
            fin = np.isfinite(ref.log_z)
            np.testing.assert_allclose(ker.log_z[fin], ref.log_z[fin], atol=1e-10)
            assert np.isfinite(ker.root).all() and np.isfinite(ker.cavity).all()
            if k == kp == 0:
                assert (ker.root.argmax(1) == t.root).all()


def test_bad_input_is_rejected():
    g = random_grammar(4, 1.0, seed=0)
    with pytest.raises(TpcoreError, match="k=3"):
        belief_propagation(g.M, g.p0, np.ones((2, 4, 4)), 3)
    with pytest.raises(TpcoreError, match="2\\*\\*l"):
        belief_propagation(g.M, g.p0, np.ones((2, 6, 4)), 0)
    with pytest.raises(TpcoreError, match="0..3"):
        evidence_from_leaves(np.array([[0, 4]]), 4)


def test_all_sequences_of_a_small_tree_sum_to_one():
    g = random_grammar(3, 1.0, seed=4)
    for k in range(3):
        x = np.array(list(itertools.product(range(3), repeat=4)))
        res = belief_propagation(g.M, g.p0, evidence_from_leaves(x, 3), k)
        np.testing.assert_allclose(np.exp(res.log_z).sum(), 1.0, atol=1e-12)

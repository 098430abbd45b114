import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.tasks.trees import (
    parse_levels,
    path_matrices,
    random_grammar,
    sample_trees,
    uniform_sequences,
)

pytestmark = pytest.mark.host_only("tree grammars and samples are generated on the host")


def test_grammar_is_a_nonoverlapping_partition():
    g = random_grammar(5, 1.0, seed=3)
    np.testing.assert_allclose(g.M.sum(axis=(1, 2)), 1.0)
    support = g.M > 0
    assert (support.sum(axis=0) == 1).all()          # every pair has exactly one parent
    assert (support.sum(axis=(1, 2)) == 5).all()     # every parent has q pairs


def test_paper_grammar_follows_the_papers_procedure():
    q, sigma, seed = 4, 1.0, 0
    rs = np.random.RandomState(seed)
    pairs = np.array([(b, c) for b in range(q) for c in range(q)])
    rs.shuffle(pairs)
    g = random_grammar(q, sigma, seed, paper_grammar=True)
    for a in range(q):
        block = pairs[a * q:(a + 1) * q]
        xi = np.array([rs.randn() for _ in range(q)])
        w = np.exp(sigma * xi)
        np.testing.assert_allclose(g.M[a, block[:, 0], block[:, 1]], w / w.sum())
    # the notes' fingerprint of the paper's grammar: zeros of the level-1 path matrices
    assert (path_matrices(g.M, 1) == 0).sum() == 9
    assert (path_matrices(g.M, 2) == 0).sum() == 0


def test_path_matrices_are_level_marginals_of_the_full_tree():
    g = random_grammar(3, 1.0, seed=1)
    t = sample_trees(g, 40000, 3, k=0, seed=2, keep_levels=True)
    Q = path_matrices(g.M, 2)
    lvl2 = t.levels[2]
    for j in range(4):
        for a in range(3):
            sel = t.root == a
            emp = np.bincount(lvl2[sel, j], minlength=3) / sel.sum()
            np.testing.assert_allclose(emp, Q[j, a], atol=0.03)


def test_pair_frequencies_match_M():
    g = random_grammar(4, 1.0, seed=5)
    t = sample_trees(g, 20000, 2, k=0, seed=0, keep_levels=True)
    par, kids = t.levels[1].ravel(), t.levels[2].reshape(-1, 2)
    counts = np.zeros((4, 4, 4))
    np.add.at(counts, (par, kids[:, 0], kids[:, 1]), 1)
    emp = counts / counts.sum(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(emp, g.M, atol=0.02)


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_filtered_level_k_is_independent_given_root(k):
    g = random_grammar(4, 1.0, seed=0, paper_grammar=True)
    t = sample_trees(g, 30000, 3, k=k, seed=4, keep_levels=True)
    Q = path_matrices(g.M, k)
    x = t.levels[k]
    a = 0
    sel = t.root == a
    for j in range(2**k):
        emp = np.bincount(x[sel, j], minlength=4) / sel.sum()
        np.testing.assert_allclose(emp, Q[j, a], atol=0.03)
    if k >= 1:  # the two level-k nodes 0 and 1 are independent given the root
        pair = np.zeros((4, 4))
        np.add.at(pair, (x[sel, 0], x[sel, 1]), 1)
        np.testing.assert_allclose(pair / sel.sum(), np.outer(Q[0, a], Q[1, a]), atol=0.03)


def test_k0_leaves_parse_to_the_root_and_levels_are_consistent():
    g = random_grammar(4, 1.0, seed=0, paper_grammar=True)
    t = sample_trees(g, 500, 4, k=0, seed=1, keep_levels=True)
    parsed = parse_levels(g, t.leaves)
    assert (parsed[0][:, 0] == t.root).all()
    for a, b in zip(parsed, t.levels):
        assert (a == b).all()


def test_sampler_is_seeded_and_validates():
    g = random_grammar(4, 1.0, seed=0)
    a = sample_trees(g, 10, 3, 1, seed=7).leaves
    assert (a == sample_trees(g, 10, 3, 1, seed=7).leaves).all()
    assert a.shape == (10, 8) and a.dtype == np.int8
    with pytest.raises(TpcoreError, match="k=5"):
        sample_trees(g, 10, 4, 5)
    u = uniform_sequences(1000, 2, 4, seed=0)
    assert u.shape == (1000, 4) and set(np.unique(u)) == {0, 1, 2, 3}

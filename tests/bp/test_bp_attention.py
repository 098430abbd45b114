import numpy as np
import pytest

from tpcore.backend import asarray, get_xp, to_host
from tpcore.bp import belief_propagation, evidence_from_leaves
from tpcore.bp_attention import complementary_attention, forward_only_marginals
from tpcore.tasks.trees import random_grammar, sample_trees, uniform_sequences


@pytest.mark.parametrize("l", [1, 2, 4])
def test_forward_only_recursion_reproduces_bp_cavities(l):
    g = random_grammar(4, 1.0, seed=0, paper_grammar=True)
    x = np.concatenate([sample_trees(g, 200, l, 0, seed=1).leaves,
                        uniform_sequences(100, l, 4, seed=2)])
    mask = np.random.default_rng(3).random(x.shape) < 0.25
    e = evidence_from_leaves(x, 4, mask)
    ref = belief_propagation(g.M, g.p0, e, 0).cavity
    M, p0, e = asarray(g.M), asarray(g.p0), asarray(e)
    np.testing.assert_allclose(to_host(forward_only_marginals(M, p0, e)), ref, atol=1e-12)
    np.testing.assert_allclose(to_host(forward_only_marginals(M, p0, e, beta=30.0)), ref,
                               atol=1e-10)


def test_attention_selects_the_complementary_subtree():
    xp = get_xp()
    A = to_host(complementary_attention(3, 1, xp))
    assert np.allclose(A[0], [0, 0, .5, .5, 0, 0, 0, 0])
    assert np.allclose(A[6], [0, 0, 0, 0, .5, .5, 0, 0])
    soft = to_host(complementary_attention(3, 1, xp, beta=20.0))
    np.testing.assert_allclose(soft, A, atol=1e-12)
    np.testing.assert_allclose(to_host(complementary_attention(3, 2, xp)[1]), [0] * 4 + [.25] * 4)

import numpy as np
import pytest

from tpcore.backend import asarray
from tpcore.bp import (
    bp_backward,
    bp_forward,
    path_matrices_backward,
    transition_from_logits,
    transition_from_logits_backward,
)
from tpcore.nn.gradcheck import assert_gradients, random_like


@pytest.mark.parametrize("k", [0, 1, 2])
def test_bp_backward_matches_finite_differences(k):
    gen = np.random.default_rng(k)
    q, l, B = 3, 3, 3
    theta = asarray(gen.standard_normal((q, q, q)))
    e = gen.random((B, 2**l, q)) + 0.1
    e[0, 1] = 1.0  # a masked leaf
    e[1, 2] = np.eye(q)[1]  # an observed leaf
    e, p0 = asarray(e), asarray(np.array([0.2, 0.5, 0.3]))
    res, _ = bp_forward(transition_from_logits(theta), p0, e, k)
    g = [random_like(a, seed=i) for i, a in enumerate((res.log_z, res.root, res.leaves,
                                                       res.cavity))]

    def loss(theta, e):
        r = bp_forward(transition_from_logits(theta), p0, e, k)[0]
        return sum(float((gi * a).sum()) for gi, a in zip(g, (r.log_z, r.root, r.leaves,
                                                             r.cavity)))

    M = transition_from_logits(theta)
    _, cache = bp_forward(M, p0, e, k)
    dM, dQ, de = bp_backward(cache, *g)
    dM = dM + path_matrices_backward(M, k, dQ)
    dtheta = transition_from_logits_backward(M, dM)
    assert_gradients(loss, [theta, e], [dtheta, de], tol=1e-6, max_entries=60)

"""The fused kernels of the Transformer Program model (``tpcore.kernels.program_model``, which
gathers those of ``program_attention`` and ``program_mlp``) against their NumPy references
(``tpcore.models.program.ops``): outputs and caches equal in float64 (and close in float32),
either backward on either forward's cache, and a whole-model gradcheck with the kernels running
(spied on). Helpers: ``tests/kernels/conftest.py``."""

import numpy as np
import pytest
from tpcore.kernels import program_model as KP

from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.models.program import ops as P
from tpcore.nn.gradcheck import assert_parameter_gradients
from tpcore.nn.hookpoints import NO_HOOKS
from tpcore.nn.losses import cross_entropy_backward, cross_entropy_forward

pytestmark = pytest.mark.host_only("numba kernels run on host NumPy arrays")

DTYPES = [np.float64, np.float32]


def _program_inputs(dtype, causal, padded, rng):
    h, b, n, d = 3, 4, 6, 6
    q, k, v = (rng.dirichlet(np.ones(d), (h, b, n)).astype(dtype) for _ in range(3))
    p = rng.dirichlet(np.ones(d), (h, d)).astype(dtype)
    keys = rng.random((b, n)) > 0.3 if padded else np.ones((1, n), bool)
    mask = keys[:, None, :]
    if causal:
        mask = mask & np.tril(np.ones((n, n), bool))[None]
    bias = P.masked_bias(P.closest_bias(n, dtype, np), mask)
    return q, k, v, p, mask, bias


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("causal", "padded", "noise"),
                         [(False, False, True), (True, True, True), (True, False, False)])
def test_categorical_attention(dtype, causal, padded, noise, check_pair, rng):
    q, k, v, p, mask, bias = _program_inputs(dtype, causal, padded, rng)
    g = rng.gumbel(size=q.shape[:3] + (q.shape[2],)).astype(dtype) if noise else None
    check_pair(P.cat_attention_forward, P.cat_attention_backward, KP.cat_attention_forward,
               KP.cat_attention_backward, (q, k, v, p, mask, bias, g, 0.7, NO_HOOKS, ()),
               dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("i", [7, 2])
def test_program_mlp(dtype, i, check_pair, rng):
    """Both kernel paths: the first layer through BLAS (7 inputs) and in one pass each way
    (2)."""
    g, t, d, k = 2, 30, 9, 5
    args = [rng.standard_normal(s).astype(dtype) for s in
            ((g, t, i), (g, i, d), (g, 1, d), (g, d, k), (g, 1, k), (g, t, k))]
    check_pair(P.mlp_forward, P.mlp_backward, KP.mlp_forward, KP.mlp_backward,
               (*args, 0.5), dtype, rng)


@pytest.mark.parametrize("causal", [True, False])
def test_program_model_gradcheck_through_kernels(spies, causal):
    cfg = ProgramConfig(vocab_size=5, max_len=6, n_classes=4, n_layers=2, n_cat_heads=2,
                        n_num_heads=1, n_cat_mlps=1, n_num_mlps=1, d_mlp=7, causal=causal,
                        seed=3)
    model = ProgramModel(cfg).astype(np.float64)
    rng = np.random.default_rng(2)
    tokens, targets = rng.integers(0, 5, (3, 6)), rng.integers(0, 3, (3, 6))
    pad = np.zeros((3, 6), bool)
    pad[1, 4:] = True

    def loss_fn():
        logits = model.forward(tokens, pad, rng=np.random.default_rng(7), tau=1.5)
        return cross_entropy_forward(logits, targets, ~pad)

    model.zero_grad()
    model.backward(cross_entropy_backward(loss_fn()[1]))
    assert_parameter_gradients(model, lambda: loss_fn()[0])
    for name in ("cat_attention_forward", "cat_attention_backward", "mlp_forward",
                 "mlp_backward", "gumbel_softmax_forward", "softmax_backward",
                 "num_attention_forward", "num_attention_backward"):
        assert spies.get(name, 0) >= 2, name
    for name in ("log_softmax_forward", "log_softmax_backward"):
        assert spies.get(name, 0) >= 1, name


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("causal", "padded"), [(False, False), (False, True), (True, True)])
def test_numerical_attention(dtype, causal, padded, check_pair, rng):
    """Both kernel backwards: the factored one (masks on the keys alone) and the general."""
    q, k, _, p, mask, _ = _program_inputs(dtype, causal, padded, rng)
    v = rng.random(q.shape[:3]).astype(dtype) * 3
    check_pair(P.num_attention_forward, P.num_attention_backward, KP.num_attention_forward,
               KP.num_attention_backward, (q, k, v, p, mask, NO_HOOKS, ()), dtype, rng)

"""Hook points: what a hook's result means in the forward and in the backward, checked with float64
finite differences on attention (whose pattern and scores are hook points)."""

import numpy as np
import pytest

from tpcore.backend import rng as device_rng
from tpcore.errors import TpcoreError
from tpcore.nn import attention as A
from tpcore.nn.gradcheck import assert_gradients, random_like
from tpcore.nn.hookpoints import NO_HOOKS, Edit, Hooks, edit, replace, scale


def _attention_check(rng, fns):
    """Gradcheck of attention with ``fns`` hooked; returns the hooked and plain outputs."""
    q, k, v = (rng.standard_normal((2, 2, 5, 3)) for _ in range(3))
    mask = A.attention_mask(5, True, xp=np)
    hooks = Hooks(fns)
    out, cache = A.attention_forward(q, k, v, mask, hooks)
    g = random_like(out)
    grads = A.attention_backward(g, cache)
    assert_gradients(lambda q, k, v: float((A.attention_forward(q, k, v, mask, hooks)[0]
                                            * g).sum()), [q, k, v], grads)
    return out, A.attention_forward(q, k, v, mask)[0]


@pytest.mark.parametrize("fns", [
    {"hook_pattern": replace(0.0, (slice(None), 1))},                  # ablate head 1's pattern
    {"hook_pattern": scale(0.5, (0, slice(None), 2))},                 # scale some rows
    {"hook_attn_scores": lambda s, name: Edit(2.0, 0.25)},              # an affine edit
    {"hook_attn_scores": replace(np.full((2, 2, 5, 5), 0.3), (1,)),
     "hook_pattern": scale(-1.0, (slice(None), 0, 4))},
])
def test_edited_attention_has_exact_gradients(rng, fns):
    hooked, plain = _attention_check(rng, fns)
    assert not np.allclose(hooked, plain)


def test_constant_replacement_passes_no_gradient(rng):
    """A returned array is a constant: the scores (and so q and k) get no gradient."""
    q, k, v = (rng.standard_normal((1, 1, 4, 2)) for _ in range(3))
    p = np.full((1, 1, 4, 4), 0.25)
    out, cache = A.attention_forward(q, k, v, None, Hooks({"hook_pattern": lambda x, n: p}))
    assert np.array_equal(out, p @ v)
    dq, dk, dv = A.attention_backward(random_like(out), cache)
    assert not dq.any() and not dk.any() and dv.any()


def test_identity_hooks_change_nothing(rng):
    q, k, v = (rng.standard_normal((2, 2, 5, 3)) for _ in range(3))
    g = rng.standard_normal((2, 2, 5, 3))
    plain = A.attention_backward(g, A.attention_forward(q, k, v)[1])
    cache = {}
    hooks = Hooks({"hook_pattern": lambda x, n: x, "hook_attn_scores": lambda x, n: None},
                  cache=cache)
    out, c = A.attention_forward(q, k, v, None, hooks)
    assert np.array_equal(out, A.attention_forward(q, k, v)[0])
    assert all(np.array_equal(a, b) for a, b in zip(A.attention_backward(g, c), plain))
    assert set(cache) == {"hook_pattern", "hook_attn_scores"}
    assert np.array_equal(cache["hook_pattern"], c[0])


def test_stack_edits_a_copy_and_scopes_prefix_names():
    values = np.arange(12.0).reshape(3, 4)
    hooks = Hooks({"layer.b": replace(-1.0, 2)}).scope("layer.")
    assert hooks.stack(["a", "c"], values) is values
    out = hooks.stack(["a", "b", "c"], values)
    assert out is not values and values[1, 2] == 6.0
    assert out[1].tolist() == [4.0, 5.0, -1.0, 7.0] and np.array_equal(out[[0, 2]], values[[0, 2]])
    d = hooks.grad_stack(["a", "b", "c"], np.ones((3, 4)))
    assert d[1].tolist() == [1.0, 1.0, 0.0, 1.0] and d[0].all() and d[2].all()
    x = np.ones(3)
    assert NO_HOOKS("anything", x) is x and NO_HOOKS.grad("anything", x) is x


def test_bad_results_and_indices_are_refused():
    hooks = Hooks({"h": lambda x, n: np.zeros(5)})
    with pytest.raises(TpcoreError, match="'h'.*shape"):
        hooks("h", np.ones((2, 3)))
    with pytest.raises(TpcoreError, match="does not fit"):
        edit(np.ones((2, 3)), (0, 7))


def test_an_mlp_recording_hook_pre_trains_as_the_fused_one(rng):
    """The MLP runs ``gelu(x W1 + b1)`` as one call unless ``hook_pre`` is asked for; both
    ways give the same output and gradients, bit for bit."""
    from tpcore.backend import asarray, to_host
    from tpcore.nn.layers import MLP

    x, g = asarray(rng.standard_normal((2, 3, 4))), asarray(rng.standard_normal((2, 3, 4)))
    runs, cache = [], {}
    for hooks in (NO_HOOKS, Hooks({}, cache=cache)):
        mlp = MLP(4, 6, device_rng(0), np.float64)
        out = mlp.forward(x, hooks)
        dx = mlp.backward(g)
        runs.append([to_host(a) for a in (out, dx, *(p.grad for _, p in mlp.named_parameters()))])
    assert "hook_pre" in cache
    for fused, hooked in zip(*runs):
        np.testing.assert_array_equal(fused, hooked)

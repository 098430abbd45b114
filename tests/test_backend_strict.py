"""The device-strict backend (``numpy-strict``): CuPy's refusals on a CPU, and a model that
runs under it end to end."""

import copy
import pickle

import numpy as np
import pytest

from tpcore import backend, dispatch, strict
from tpcore.strict import StrictArray


@pytest.fixture
def xp():
    """The strict array module, active for the test; the previous backend restored after."""
    before = backend.backend_name()
    yield backend.set_backend("numpy-strict")
    backend.set_backend(before)


def test_selection_and_ownership(xp):
    assert backend.backend_name() == "numpy-strict"
    assert xp is strict.xp
    x = backend.asarray(np.arange(3.0))
    assert isinstance(x, StrictArray) and isinstance(x, xp.ndarray)
    assert backend.xp_of(np.ones(1), x) is xp
    assert backend.xp_of(np.ones(1)) is np


@pytest.mark.parametrize("convert", [np.asarray, np.array, np.ascontiguousarray,
                                     lambda a: np.zeros(3) + 0 * np.asarray(a),
                                     lambda a: list(memoryview(a))])
def test_implicit_conversion_to_host_raises(xp, convert):
    with pytest.raises(TypeError):
        convert(xp.ones(3))


@pytest.mark.parametrize("call", [lambda a: np.exp(a), lambda a: np.concatenate([a, a]),
                                  lambda a: np.zeros_like(a), lambda a: np.sum(a),
                                  lambda a: np.where(a > 0, a, 0), lambda a: np.add.at(a, [0], 1),
                                  lambda a: np.allclose(a, a)])
def test_numpy_functions_on_device_arrays_raise(xp, call):
    with pytest.raises(TypeError):
        call(xp.ones(3))


@pytest.mark.parametrize("mix", [lambda a, h: a + h, lambda a, h: h * a, lambda a, h: a @ h,
                                 lambda a, h: a.__setitem__(slice(None), h),
                                 lambda a, h: a.__iadd__(h), lambda a, h: a + list(h),
                                 lambda a, h: strict.xp.stack([a, h]),
                                 lambda a, h: strict.xp.where(a > 0, h, a)])
def test_host_arrays_never_mix_with_device_arrays(xp, mix):
    with pytest.raises(TypeError):
        mix(xp.ones(3), np.ones(3))


def test_the_array_module_computes_as_numpy(xp):
    h = np.arange(12.0).reshape(3, 4)
    a = xp.asarray(h)
    pairs = [(xp.exp(a), np.exp(h)), (xp.concatenate([a, a]), np.concatenate([h, h])),
             (a @ a.T, h @ h.T), (np.float32(2) * a - 1, 2 * h - 1),
             (a[np.array([2, 0])], h[[2, 0]]), (a[a > 5], h[h > 5]),
             (a.sum(axis=0), h.sum(axis=0)), (xp.linalg.norm(a), np.linalg.norm(h)),
             (xp.maximum.accumulate(a, axis=1), np.maximum.accumulate(h, axis=1))]
    for got, want in pairs:
        assert isinstance(got, StrictArray)
        np.testing.assert_allclose(backend.to_host(got), want)
    xp.add.at(a, xp.asarray([0, 0]), 1.0)
    a[1] = xp.zeros(4)
    a[2, 3] = np.float32(7)
    np.testing.assert_array_equal(backend.to_host(a)[:, 3], [5, 0, 7])


def test_scalars_are_zero_d_device_arrays_as_on_cupy(xp):
    a = xp.arange(4)
    total = a.sum()
    assert isinstance(total, StrictArray) and total.shape == ()
    assert isinstance(a[1], StrictArray) and isinstance(xp.argmax(a), StrictArray)
    assert float(total) == 6.0 and int(a[3]) == 3 and a.max().item() == 3 and bool(a[1])
    assert f"{total:.1f}" == "6.0" and a.tolist() == [0, 1, 2, 3]
    with pytest.raises(TypeError):
        ["a", "b", "c", "d"][a.argmax()]  # no __index__, as on CuPy
    with pytest.raises(TypeError):
        float(a)
    with pytest.raises(ValueError):
        bool(a > 0)


def test_to_host_is_the_way_back(xp):
    a = xp.arange(3.0)
    h = backend.to_host(a)
    assert type(h) is np.ndarray
    h[0] = 9.0  # a copy, as cupy's .get()
    assert float(a[0]) == 0.0
    assert not hasattr(a, "get")  # a CuPy-only method fails here, as it would on NumPy
    back = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(backend.to_host(back), [0, 1, 2])
    assert isinstance(copy.deepcopy(a), StrictArray)


def test_generator_has_cupy_methods_and_numpy_numbers(xp):
    rng = backend.rng(3)
    draw = rng.standard_normal((2, 3))
    assert isinstance(draw, StrictArray)
    np.testing.assert_array_equal(backend.to_host(draw),
                                  np.random.default_rng(3).standard_normal((2, 3)))
    for name in ("normal", "choice", "permutation", "shuffle"):
        with pytest.raises(AttributeError, match=name):
            getattr(rng, name)


def test_a_model_trains_under_it_as_under_numpy(xp, monkeypatch):
    """Transformer forward, loss, backward and an optimiser step on device arrays: the same
    numbers as on the NumPy backend (its NumPy path: the fused kernels round differently)."""
    from tpcore.models.transformer import Transformer, TransformerConfig
    from tpcore.nn.losses import cross_entropy_backward, cross_entropy_forward
    from tpcore.nn.optim import Adam

    host_pad = np.zeros((3, 4), bool)
    host_pad[0, 3] = True

    def step():
        tokens = backend.asarray(np.arange(12).reshape(3, 4) % 5)
        pad = backend.asarray(host_pad)
        model = Transformer(TransformerConfig(vocab_size=5, max_len=4, d_model=8, n_heads=2,
                                              d_mlp=16, causal=True, dropout=0.1))
        logits = model.forward(tokens, pad, rng=backend.rng(1))
        loss, cache = cross_entropy_forward(logits, tokens)
        model.backward(cross_entropy_backward(cache))
        Adam(model.parameters(), lr=1e-2).step()
        return logits, float(loss), model.parameters()

    logits, loss, params = step()
    assert isinstance(logits, StrictArray)
    assert all(isinstance(p.data, StrictArray) and isinstance(p.grad, StrictArray)
               for p in params)
    backend.set_backend("numpy")
    monkeypatch.setattr(dispatch, "_kernels", False)
    want_logits, want_loss, want_params = step()
    np.testing.assert_allclose(backend.to_host(logits), want_logits, rtol=1e-6)
    assert loss == pytest.approx(want_loss)
    for p, q in zip(params, want_params):
        np.testing.assert_allclose(backend.to_host(p.data), q.data, rtol=1e-6)


def test_the_cli_selects_it(xp, capsys):
    import json

    from tpcore.cli import main

    backend.set_backend("numpy")
    assert main(["--backend", "numpy-strict", "info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["backend"] == "numpy-strict"

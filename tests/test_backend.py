"""The array-module abstraction: selection, errors, and that compute code never hard-codes NumPy."""

import ast
import re
from pathlib import Path

import numpy as np
import pytest

import tpcore
from tpcore import backend
from tpcore.errors import BackendError

ROOT = Path(tpcore.__file__).parent
COMPUTE_FOLDERS = ("nn", "models", "looped", "subleq", "fleq")
NUMPY_NAMES = {"np", "numpy"}


def test_unknown_backend_is_named():
    with pytest.raises(BackendError, match="'jax'"):
        backend.set_backend("jax")


def test_cupy_unavailable_says_why(monkeypatch):
    import importlib.util

    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here")
    before = backend.get_xp()
    with pytest.raises(BackendError, match="CuPy is not importable"):
        backend.set_backend("cupy")
    assert backend.get_xp() is before  # a failed switch leaves the backend as it was


def test_xp_of_and_to_host():
    x = np.ones(3)
    assert backend.xp_of(x, 1.0) is np
    assert backend.to_host(x) is x
    a = backend.rng(5).random(4)
    b = backend.rng(5).random(4)
    assert np.array_equal(backend.to_host(a), backend.to_host(b))


def test_scatter_add_accumulates_repeats():
    t = backend.get_xp().zeros((3, 2))
    backend.scatter_add(t, backend.asarray([0, 2, 0]), backend.asarray(np.ones((3, 2))))
    assert np.array_equal(backend.to_host(t)[:, 0], [2, 0, 1])


@pytest.mark.parametrize("cells", [1 << 24, 7])
def test_the_gpus_one_hot_scatter_add_equals_numpys(rng, cells):
    """CuPy's deterministic ``scatter_add`` (one-hot products, in chunks of rows) computed on
    NumPy arrays against ``np.add.at``."""
    index = rng.integers(0, 5, 40)
    values = rng.standard_normal((40, 2, 3))
    start = rng.standard_normal((5, 2, 3))
    want = start.copy()
    np.add.at(want, index, values)
    got = start.copy()
    backend._one_hot_add(got, index, values, cells)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _compute_functions():
    """Every forward/backward function (or method) of the compute packages."""
    for folder in COMPUTE_FOLDERS:
        for path in sorted((ROOT / folder).glob("*.py")):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and any(
                        w in node.name for w in ("forward", "backward")):
                    yield f"{folder}/{path.name}:{node.name}", node


@pytest.mark.parametrize("where,node", [pytest.param(w, n, id=w) for w, n in _compute_functions()])
def test_compute_paths_never_call_numpy(where, node):
    """Forward and backward passes take their array module from the backend (``xp_of`` /
    ``get_xp``), never from NumPy, so the same code runs on CuPy. Host-only helpers (data, I/O,
    extraction) may use NumPy; so may a pass whose docstring declares it host-only (the word
    "host"), such as one that hands host arrays to a numba kernel."""
    if re.search(r"\bhost\b", ast.get_docstring(node) or "", re.IGNORECASE):
        pytest.skip(f"{where} declares itself host-only")
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in NUMPY_NAMES:
            raise AssertionError(f"{where} line {sub.lineno} uses {sub.id}; use tpcore.backend")


def test_the_static_check_sees_the_compute_paths():
    found = {w.split(":")[0] for w, _ in _compute_functions()}
    assert {"nn/functional.py", "nn/attention.py", "models/transformer.py"} <= found


def test_every_layer_runs_on_the_active_backend():
    """Each layer, fed arrays made through the backend API, returns arrays of that backend."""
    from tpcore.models.transformer import Transformer, TransformerConfig
    from tpcore.nn.losses import cross_entropy_backward, cross_entropy_forward

    xp = backend.get_xp()
    array_type = type(xp.zeros(1))
    for options in (dict(layer_norm="pre", causal=True), dict(layer_norm="post", readout="mean"),
                    dict(layer_norm="none", attn_only=True, positions="sinusoidal")):
        model = Transformer(TransformerConfig(vocab_size=6, max_len=5, d_model=8, n_heads=2,
                                              **options))
        tokens = backend.asarray(np.arange(10).reshape(2, 5) % 6)
        pad = backend.asarray(np.zeros((2, 5), bool))
        logits = model.forward(tokens, pad, rng=backend.rng(0))
        targets = xp.zeros(logits.shape[:-1], dtype="int64")
        _, cache = cross_entropy_forward(logits, targets)
        model.backward(cross_entropy_backward(cache))
        assert isinstance(logits, array_type)
        assert all(isinstance(p.grad, array_type) for p in model.parameters())


@pytest.mark.parametrize("case", ["weight_gradient", "bias_gradient", "broadcast", "plain"])
def test_a_long_sum_in_pieces_is_the_product(case):
    """:func:`tpcore.backend.split_matmul` on the shapes a GPU cuts into pieces: a transposed
    activation times a gradient over 2^15 tokens, a ones row (a bias gradient), a weight shared
    by a batch of groups, and plain matrices; each equals ``a @ b`` to float32 rounding."""
    rng = np.random.default_rng(0)
    t = 32 * backend.SPLIT_DEPTH

    def r(*shape):
        return backend.asarray(rng.standard_normal(shape).astype(np.float32))

    a, b = {
        "weight_gradient": lambda: (r(2, t, 40).swapaxes(-1, -2), r(2, t, 64)),
        "bias_gradient": lambda: (backend.asarray(np.ones((1, t), np.float32)), r(3, t, 8)),
        "broadcast": lambda: (r(16, t), r(2, t, 16)),
        "plain": lambda: (r(5, t), r(t, 7)),
    }[case]()
    assert backend._long_and_small(a, b)
    got = backend.split_matmul(a, b)
    want = a @ b
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(backend.to_host(got), backend.to_host(want), rtol=1e-4, atol=1e-3)


def test_only_long_sums_into_small_matrices_go_in_pieces():
    def z(*shape):
        return np.zeros(shape, np.float32)

    k = 16 * backend.SPLIT_DEPTH
    assert backend._long_and_small(z(128, k), z(k, 128))
    assert not backend._long_and_small(z(129, k), z(k, 128))  # enough output tiles already
    assert not backend._long_and_small(z(8, k - backend.SPLIT_DEPTH), z(k - backend.SPLIT_DEPTH, 8))
    assert not backend._long_and_small(z(8, k + 1), z(k + 1, 8))  # no whole pieces
    assert not backend._long_and_small(z(k), z(k, 8))  # 1-D operands as they are
    assert not backend._long_and_small(z(8, k), z(2 * k, 8))  # matmul's own error, not reshape's

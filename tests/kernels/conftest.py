"""Shared helpers of the fused-kernel tests, as fixtures (tests import no modules from here):
``reference`` runs a function with the kernels off, ``assert_same`` compares two results to a
dtype's tolerance, ``check_pair`` compares a kernel forward/backward pair with its reference
pair, and ``spies`` counts the kernel calls that the dispatcher (:mod:`tpcore.dispatch`) makes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tpcore import dispatch
from tpcore.dispatch import use_kernels

TOL = {np.float64: 1e-11, np.float32: 2e-4}
"""Relative tolerance (to the largest entry) of kernel against reference, per dtype."""

SPIED = ("mha_forward", "mha_backward", "layer_norm_forward", "layer_norm_backward",
         "gelu_forward", "cat_attention_forward", "cat_attention_backward", "mlp_forward",
         "mlp_backward", "gumbel_softmax_forward", "softmax_backward", "num_attention_forward",
         "num_attention_backward", "log_softmax_forward", "log_softmax_backward", "read_forward",
         "gated_read_backward")
"""The kernels whose calls :func:`spies` counts."""


def _reference(fn: Callable, *args: Any) -> Any:
    """``fn`` with the kernels switched off (its NumPy path, and that of everything it calls)."""
    before = use_kernels()
    use_kernels(False)
    try:
        return fn(*args)
    finally:
        use_kernels(before)


def _assert_same(a: Any, b: Any, dtype: type, what: str = "") -> None:
    """Equal trees of arrays (tuples, dicts) up to the dtype's tolerance; other leaves equal."""
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b), what
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, dtype, f"{what}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), what
        for k in a:
            _assert_same(a[k], b[k], dtype, f"{what}[{k}]")
    elif isinstance(a, np.ndarray):
        assert a.shape == b.shape and a.dtype == b.dtype, what
        scale = max(1.0, float(np.abs(a.astype(np.float64)).max(initial=0)))
        err = float(np.abs(a.astype(np.float64) - b).max(initial=0)) / scale
        assert err <= TOL[dtype], f"{what}: relative error {err:.2e}"
    elif isinstance(a, float):
        assert abs(a - b) <= TOL[dtype] * max(1.0, abs(a)), what
    else:
        assert a is b or a == b, what


def _check_pair(forward: Callable, backward: Callable, kernel_fwd: Callable,
                kernel_bwd: Callable, args: tuple, dtype: type, rng: np.random.Generator) -> None:
    """Forward outputs and caches equal; each backward equal on both caches."""
    out_r, cache_r = _reference(forward, *args)
    out_k, cache_k = kernel_fwd(*args)
    _assert_same(out_r, out_k, dtype, "forward")
    _assert_same(cache_r, cache_k, dtype, "cache")
    first = out_r[0] if isinstance(out_r, tuple) else out_r
    dy = rng.standard_normal(first.shape).astype(dtype)
    grads_r = _reference(backward, dy, cache_r)
    for cache in (cache_r, cache_k):
        _assert_same(grads_r, kernel_bwd(dy, cache), dtype, "backward")
        _assert_same(grads_r, _reference(backward, dy, cache), dtype, "reference backward")


@pytest.fixture
def reference() -> Callable:
    """``reference(fn, *args)``: ``fn(*args)`` with the kernels switched off."""
    return _reference


@pytest.fixture
def assert_same() -> Callable:
    """``assert_same(a, b, dtype, what="")``: equal results up to ``dtype``'s tolerance."""
    return _assert_same


@pytest.fixture
def check_pair() -> Callable:
    """``check_pair(forward, backward, kernel_fwd, kernel_bwd, args, dtype, rng)``: a kernel pair
    against its reference pair, either backward on either forward's cache."""
    return _check_pair


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count the kernel calls made through the dispatcher, with the kernels on.

    Every kernel module's own binding of a name is replaced, so that a kernel calling another by
    name (program_mlp's ``mlp_backward`` calls ``softmax_backward``) is counted too."""
    from tpcore.kernels import nn, program_attention, program_mlp, program_model, program_read

    counts: dict[str, int] = {}
    for module in (nn, program_model, program_attention, program_mlp, program_read):
        for name in SPIED:
            fn = getattr(module, name, None)
            if fn is None:
                continue

            def spy(*args: Any, _fn: Callable = fn, _name: str = name) -> Any:
                out = _fn(*args)
                if out is not NotImplemented:
                    counts[_name] = counts.get(_name, 0) + 1
                return out

            monkeypatch.setattr(module, name, spy)
    monkeypatch.setattr(dispatch, "_kernels", True)
    return counts

"""Central finite-difference gradient checking, for the tests and for your own functions.

Given a scalar loss ``L(x1, ..., xm)`` and claimed gradients ``dL/dxi``, compare each entry with

    (L(x + h e_j) - L(x - h e_j)) / (2 h)

in float64. Typical use with a forward/backward pair::

    def loss(x, w):
        y, _ = linear_forward(x, w, b)
        return float((y * g).sum())          # g: a fixed random upstream gradient
    y, cache = linear_forward(x, w, b)
    dx, dw, db = linear_backward(g, cache)
    assert_gradients(loss, [x, w], [dx, dw])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tpcore.backend import to_host, xp_of


def numerical_gradient(
    f: Callable[..., float], inputs: Sequence[Any], index: int, h: float = 1e-6,
    max_entries: int | None = None, seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Finite-difference gradient of scalar ``f(*inputs)`` with respect to ``inputs[index]``.

    Perturbs the array in place and restores it. With ``max_entries`` only a random subset of
    entries is probed. Returns ``(flat_indices, values)`` on the host.
    """
    x = inputs[index]
    if x.dtype != np.float64:
        raise TypeError(f"gradcheck needs float64 inputs; input {index} is {x.dtype}")
    n = x.size
    idx = np.arange(n)
    if max_entries is not None and n > max_entries:
        idx = np.sort(np.random.default_rng(seed).choice(n, max_entries, replace=False))
    flat = x.reshape(-1)
    values = np.empty(len(idx))
    for out, j in enumerate(idx):
        old = flat[j].item()
        flat[j] = old + h
        fp = float(f(*inputs))
        flat[j] = old - h
        fm = float(f(*inputs))
        flat[j] = old
        values[out] = (fp - fm) / (2 * h)
    return idx, values


def check_gradients(
    f: Callable[..., float], inputs: Sequence[Any], grads: Sequence[Any | None],
    h: float = 1e-6, max_entries: int | None = 200,
) -> list[float]:
    """Max relative error ``|a - n| / max(1, |a|, |n|)`` per input between the analytic
    ``grads`` and finite differences of ``f``. ``None`` in ``grads`` skips that input."""
    errors = []
    for i, g in enumerate(grads):
        if g is None:
            continue
        if tuple(g.shape) != tuple(inputs[i].shape):
            raise ValueError(
                f"gradient {i} has shape {tuple(g.shape)}, input has {tuple(inputs[i].shape)}"
            )
        idx, num = numerical_gradient(f, inputs, i, h=h, max_entries=max_entries)
        ana = np.asarray(to_host(g), dtype=np.float64).reshape(-1)[idx]
        scale = np.maximum(1.0, np.maximum(np.abs(ana), np.abs(num)))
        errors.append(float(np.max(np.abs(ana - num) / scale)) if len(idx) else 0.0)
    return errors


def assert_gradients(
    f: Callable[..., float], inputs: Sequence[Any], grads: Sequence[Any | None],
    tol: float = 1e-6, h: float = 1e-6, max_entries: int | None = 200,
) -> None:
    """Raise ``AssertionError`` naming the input whose gradient disagrees beyond ``tol``."""
    errors = check_gradients(f, inputs, grads, h=h, max_entries=max_entries)
    checked = [i for i, g in enumerate(grads) if g is not None]
    for i, err in zip(checked, errors):
        if not err <= tol:
            raise AssertionError(f"gradient of input {i} is off: max relative error {err:.3e}")


def assert_parameter_gradients(model: Any, loss: Callable[[], float], tol: float = 1e-5,
                               max_entries: int | None = 15) -> None:
    """Check every parameter's ``.grad`` (filled by the caller's backward of ``loss``) against
    finite differences of ``loss()``, one parameter at a time; the error names the parameter."""
    for name, p in model.named_parameters():
        try:
            assert_gradients(lambda *_: loss(), [p.data], [p.grad], tol=tol,
                             max_entries=max_entries)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


def random_like(x: Any, seed: int = 0) -> Any:
    """A fixed float64 random array shaped like ``x`` (an upstream gradient for checks)."""
    xp = xp_of(x)
    return xp.asarray(np.random.default_rng(seed).standard_normal(x.shape))

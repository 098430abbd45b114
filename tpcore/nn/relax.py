"""Relaxed categorical choices: Gumbel-softmax (soft and straight-through hard) and argmax.

The Gumbel noise is an argument, so a call is deterministic given its noise and can be
gradchecked; :func:`gumbel_noise` draws it from a generator.
"""

from __future__ import annotations

from typing import Any

from tpcore.backend import Array, get_xp, xp_of
from tpcore.dispatch import kernel
from tpcore.nn.functional import softmax, softmax_backward


def gumbel_noise(shape: tuple[int, ...], rng: Any, dtype: Any = "float32") -> Array:
    """``g = -log(-log(u))``, ``u ~ U(0, 1)`` clipped away from 0 and 1; ``rng`` a Generator
    of the active array module.

    Uniforms are drawn directly in ``dtype`` (the generator's stream) and turned into noise in
    place (:func:`gumbel_fill`).
    """
    return gumbel_fill(get_xp().empty(shape, dtype=dtype), rng)


@kernel("nn")
def gumbel_fill(out: Array, rng: Any) -> Array:
    """``out <- -log(-log(u))`` for the next ``out.size`` uniforms ``u`` of ``rng``, drawn in
    ``out``'s dtype (``rng.random``), clipped by :func:`gumbel_from_uniform`; returns ``out``."""
    out[...] = rng.random(out.shape, dtype=out.dtype)
    return gumbel_from_uniform(out)


@kernel("nn", gpu=True)
def gumbel_from_uniform(u: Array) -> Array:
    """``u <- -log(-log(clip(u, tiny, 1 - eps)))`` in place, returning ``u``."""
    xp = xp_of(u)
    info = xp.finfo(u.dtype)
    xp.clip(u, info.tiny, 1.0 - info.eps, out=u)
    xp.log(u, out=u)
    xp.negative(u, out=u)
    xp.log(u, out=u)
    xp.negative(u, out=u)
    return u


def argmax_onehot(x: Array, axis: int = -1) -> Array:
    """One-hot of ``argmax(x)`` along ``axis`` (first index on ties), same dtype as ``x``."""
    xp = xp_of(x)
    k = x.shape[axis]
    hot = x.argmax(axis=axis)[..., None] == xp.arange(k)
    return xp.moveaxis(hot, -1, axis).astype(x.dtype)


@kernel("nn", gpu=True)
def gumbel_softmax_forward(
    logits: Array, noise: Array | None, tau: float, hard: bool = False, axis: int = -1
) -> tuple[Array, tuple]:
    """``y = softmax((logits + g) / tau)`` along ``axis``; ``noise=None`` means ``g = 0``.

    ``hard=True`` returns ``argmax_onehot(y)`` in the forward pass with the gradient of the soft
    ``y`` (straight-through estimator).
    """
    z = logits if noise is None else logits + noise
    y = softmax(z / tau, axis=axis)
    out = argmax_onehot(y, axis=axis) if hard else y
    return out, (y, tau, axis)


def gumbel_softmax_backward(dy: Array, cache: tuple) -> Array:
    """``dlogits = y * (dy - sum(dy * y)) / tau`` (soft ``y``; the noise is a constant)."""
    return softmax_backward(dy, cache)

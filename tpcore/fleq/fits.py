"""Sums of sigmoids ``f(x) = sum_i c_i sigmoid(a_i . x + b_i)``: the functions a Lemma 5 block
computes exactly, and fits of scalar functions by them (least squares, and the constructions of
Lemmas 10 and 11 for ``1/x`` and ``sqrt x``). Host-only code (NumPy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tpcore.errors import TpcoreError


@dataclass(frozen=True)
class SigmoidFit:
    """``f(x) = sum_i c[i] sigmoid(a[i] . x + b[i])``; ``a: (m, d_x)``, ``b, c: (m,)``."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray

    @property
    def m(self) -> int:
        return len(self.c)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Evaluate on ``x: (..., d_x)`` (or ``(...)`` for scalar fits)."""
        x = np.asarray(x, dtype=np.float64)
        if self.a.shape[1] == 1 and (x.ndim == 0 or x.shape[-1] != 1):
            x = x[..., None]
        z = x @ self.a.T + self.b
        return (_sigmoid(z) * self.c).sum(-1)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def fit_sigmoids(f: Callable[[np.ndarray], np.ndarray], lo: float, hi: float, m: int,
                 slope: float | None = None, n_grid: int = 2000) -> SigmoidFit:
    """Least-squares fit of a scalar ``f`` on ``[lo, hi]`` by ``m`` sigmoids.

    One sigmoid is the constant ``sigma(0) = 1/2``; the others share a slope ``tau`` and have
    centres evenly spread over ``[lo, hi]``; the coefficients minimise the squared error on
    ``n_grid`` Chebyshev points. Without ``slope``, ``tau = k m / (hi - lo)`` with ``k`` the best
    of ``SLOPES`` on a finer check grid (wide, overlapping sigmoids fit smooth functions best).
    """
    if m < 2 or not hi > lo:
        raise TpcoreError(f"fit needs m >= 2 and hi > lo; got m = {m}, [{lo}, {hi}]")
    if slope is None:
        check = np.linspace(lo, hi, 3 * n_grid)
        fits = [fit_sigmoids(f, lo, hi, m, k * m / (hi - lo), n_grid) for k in SLOPES]
        return min(fits, key=lambda g: float(np.abs(g(check) - f(check)).max()))
    centres = np.linspace(lo, hi, m - 1)
    a = np.concatenate([[0.0], np.full(m - 1, slope)])[:, None]
    b = np.concatenate([[0.0], -slope * centres])
    t = np.cos(np.pi * (np.arange(n_grid) + 0.5) / n_grid)
    x = 0.5 * (lo + hi) + 0.5 * (hi - lo) * t
    Phi = _sigmoid(x[:, None] * a[:, 0] + b)
    c, *_ = np.linalg.lstsq(Phi, f(x), rcond=1e-15)
    return SigmoidFit(a, b, c)


SLOPES = (0.05, 0.1, 0.2, 0.4)
"""Slope factors ``k`` tried by :func:`fit_sigmoids` (``tau = k m / (hi - lo)``)."""


def inverse_fit(eps: float, delta: float, C: float, steep: float = 40.0) -> SigmoidFit:
    """Lemma 10 (proof of Lemma 21): ``1/x`` within about ``eps`` on ``[delta, C]``.

    Thresholds ``t_0 = delta``, ``t_{i+1} = t_i (1 + eps t_i)`` up to ``1/eps``, then doubling up
    to ``C``; the step function ``1/t_i`` on ``[t_i, t_{i+1})`` is a sum of steps of heights
    ``1/t_i - 1/t_{i-1}``, each a sigmoid centred half a step before ``t_i``.
    """
    if not (0 < eps <= 1 and 0 < delta <= 1 <= C):
        raise TpcoreError(f"inverse_fit needs 0 < eps, delta <= 1 <= C; got {eps}, {delta}, {C}")
    t = [delta]
    while t[-1] < min(1.0 / eps, C):
        t.append(t[-1] * (1.0 + eps * t[-1]))
    while t[-1] < C:
        t.append(2.0 * t[-1])
    t = np.asarray(t)
    values = 1.0 / t
    heights = np.diff(np.concatenate([[0.0], values]))
    return _midpoint_steps(t, heights, steep)


def sqrt_fit(eps: float, C: float, steep: float = 40.0) -> SigmoidFit:
    """Lemma 11 (proof of Lemma 22): ``sqrt(x)`` within about ``eps`` on ``[0, C]``.

    Thresholds ``t_i = i^2 eps^2`` (``i = 1..ceil(sqrt(C)/eps)``), steps of height ``eps``.
    """
    if not (0 < eps <= 1 <= C):
        raise TpcoreError(f"sqrt_fit needs 0 < eps <= 1 <= C; got eps = {eps}, C = {C}")
    k = int(np.ceil(np.sqrt(C) / eps))
    t = (np.arange(1, k + 1) * eps) ** 2
    return _midpoint_steps(t, np.full(k, eps), steep)


def _midpoint_steps(t: np.ndarray, heights: np.ndarray, steep: float) -> SigmoidFit:
    """Steps of ``heights`` at ``t``, each sigmoid centred between ``t_{i-1}`` and ``t_i`` with
    slope ``steep / (t_i - t_{i-1})`` (the first one at ``t_0`` itself)."""
    gaps = np.diff(np.concatenate([[t[0]], t]))
    gaps[0] = t[0] if t[0] > 0 else gaps[1] if len(gaps) > 1 else 1.0
    centres = t - 0.5 * gaps
    centres[0] = t[0] - 0.5 * gaps[0]
    tau = steep / gaps
    return SigmoidFit(tau[:, None], -tau * centres, heights)

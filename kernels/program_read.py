"""Kernels for the gated reads of the Transformer Program model (``tpcore.models.program.ops``
``read_forward``, ``gated_read_backward``), reached through :mod:`tpcore.kernels.program_model`.

A read mixes the stream's ``m`` variables with gate weights ``pi: (G, m)``,
``R[g] = sum_m pi[g, m] X[m]``, a product whose inner size ``m`` is at most a few dozen while its
outer size ``B N d`` is tens of thousands: BLAS runs it far below the speed of memory. Late in
training the gates are one-hot to float32's resolution: the Gumbel softmax at a low temperature
leaves one weight at 1 and every other at the smallest normal float, about 1.2e-38
(:func:`one_hot`). Then

- the read is a copy of one variable per gate: the other weights move ``R`` by under
  ``2^-64 m max|X|``, below float32's resolution wherever the chosen variable is not zero, so the
  copy is the BLAS product's result bit for bit there;
- back, ``dX`` adds each gate's ``dR`` to the variable it read, and the gate logits' gradient
  ``y (dR X^T - sum(dR X^T y)) / tau`` is zero to within ``2 m 2^-64 max|dR X^T| / tau`` (each
  term carries a weight under ``2^-64`` or the factor ``1 - y = 0``), so the product ``dR X^T``
  over every token is skipped and the gradient is returned as zeros.

Other gates, early in training, run the references' BLAS products.
"""

from __future__ import annotations

import numpy as np

NEGLIGIBLE = 2.0**-64
"""A gate weight below this moves a read by under ``2^-64 |X|``."""


def one_hot(pi: np.ndarray) -> bool:
    """Whether every gate (row) of ``pi: (G, m)`` has one weight of exactly 1 and all others
    below :data:`NEGLIGIBLE` (false for a layer without gates)."""
    return (pi.size > 0 and bool(((pi >= NEGLIGIBLE).sum(axis=1) == 1).all())
            and bool((pi.max(axis=1) == 1).all()))


def read_forward(x, pi, hard=False):
    """``ops.read_forward`` for :func:`one_hot` gates: ``R[g] = X[argmax pi[g]]``."""
    if hard or not one_hot(pi):
        return NotImplemented
    return x[pi.argmax(axis=1)]


def gated_read_backward(dr, x, pi, gates_cache):
    """``ops.gated_read_backward`` for :func:`one_hot` gates: ``dX[v]`` the sum of the ``dR[g]``
    of the gates that read ``v`` (zeros where none does), and zeros for the gate logits."""
    if gates_cache is None or not one_hot(pi):
        return NotImplemented
    dx = np.zeros(x.shape, dtype=np.result_type(dr, pi))
    for g, v in enumerate(pi.argmax(axis=1).tolist()):
        dx[v] += dr[g]
    return dx, np.zeros_like(pi)

"""Eq. 1 layers compiled to sparse (CSR) form for the numba sparse-path kernel.

The looped computer's weights are almost all zeros (selections, copies, gated units with one to a
dozen inputs), so the kernel ``tpcore.kernels.subleq.sparse_layer`` walks only the non-zeros, one
program at a time, with the scratchpad-only attention of
:func:`tpcore.looped.layer.layer_forward_sparse` (its NumPy reference; the tests compare them).
Host-only code (NumPy arrays; the kernel runs on the host).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tpcore.backend import to_host
from tpcore.looped.layer import SCOPE_GLOBAL, SCOPE_LOCAL, Layer


def _csr(M: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row pointers, column indices and values of the non-zeros of ``M``."""
    rows, cols = np.nonzero(M)
    ptr = np.zeros(M.shape[0] + 1, dtype=np.int64)
    np.add.at(ptr, rows + 1, 1)
    return np.cumsum(ptr), cols.astype(np.int64), M[rows, cols].astype(np.float64)


@dataclass(frozen=True)
class CompiledLayer:
    """The CSR arrays of one layer, in the kernel's argument order."""

    args: tuple[Any, ...]


def compile_layer(layer: Layer) -> CompiledLayer:
    """CSR form of ``layer``: stacked K/Q rows per head, V restricted to its non-zero output rows,
    W1 by unit, W2 by unit (transposed), and the unit lists of each column kind."""
    heads = layer.heads
    K = np.concatenate([to_host(h.K) for h in heads]) if heads else np.zeros((0, layer.width))
    Q = np.concatenate([to_host(h.Q) for h in heads]) if heads else np.zeros((0, layer.width))
    kq_off = np.cumsum([0] + [h.K.shape[0] for h in heads]).astype(np.int64)
    v_rows, v_blocks = [], []
    for h in heads:
        V = to_host(h.V)
        out = np.nonzero(np.abs(V).sum(axis=1))[0]
        v_rows.append(out)
        v_blocks.append(V[out])
    v_off = np.cumsum([0] + [len(r) for r in v_rows]).astype(np.int64)
    Vc = np.concatenate(v_blocks) if heads else np.zeros((0, layer.width))
    scope = (np.zeros(layer.hidden, dtype=np.int64) if layer.scope is None
             else np.asarray(to_host(layer.scope)))
    units_g = np.nonzero(scope != SCOPE_LOCAL)[0].astype(np.int64)
    units_l = np.nonzero(scope != SCOPE_GLOBAL)[0].astype(np.int64)
    lam = np.array([h.lam for h in heads], dtype=np.float64)
    return CompiledLayer((lam, kq_off, *_csr(K), *_csr(Q), v_off,
                          np.concatenate(v_rows).astype(np.int64) if heads
                          else np.zeros(0, dtype=np.int64), *_csr(Vc),
                          *_csr(to_host(layer.W1)), np.asarray(to_host(layer.b1), np.float64),
                          *_csr(np.ascontiguousarray(to_host(layer.W2).T)),
                          np.asarray(to_host(layer.b2), np.float64), units_g, units_l))


def forward_compiled(X: np.ndarray, layers: list[CompiledLayer], n_global: int, hard: bool,
                     iterations: int = 1, tol: float = 1e-9) -> np.ndarray:
    """``iterations`` passes of all ``layers`` on ``X: (B, d, n)`` (host float64) with the numba
    sparse kernel; returns a new array."""
    from tpcore.kernels.subleq import sparse_layer

    XT = np.ascontiguousarray(np.swapaxes(X, -1, -2), dtype=np.float64)   # (B, n, d) copy
    if XT is X:
        XT = XT.copy()
    for _ in range(iterations):
        for cl in layers:
            sparse_layer(XT, n_global, hard, tol, *cl.args)
    return np.ascontiguousarray(np.swapaxes(XT, -1, -2))

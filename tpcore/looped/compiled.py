"""A stack of Eq. 1 layers compiled to packed sparse (CSR) arrays for the numba sparse-path
kernel ``tpcore.kernels.looped.run_sparse``.

The looped computer's weights are almost all zeros (selections, copies, gated units with one to a
dozen inputs), so the kernel walks only the non-zeros, one program at a time through all layers
and iterations, with the scratchpad-only attention of
:func:`tpcore.looped.layer.layer_forward_sparse` (its NumPy reference; the tests compare them).
From the second pass of a call on it is incremental: one instruction changes the scratchpad and
one memory cell, and a non-scratchpad column sees the scratchpad only through its attention
weights and values, so only the columns whose layer output can change are recomputed (bitwise
the same X as recomputing all).
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


def _offsets(sizes: list[int]) -> np.ndarray:
    return np.cumsum([0] + sizes).astype(np.int64)


def _ints(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.asarray(p, dtype=np.int64) for p in parts] + [np.zeros(0, np.int64)])


def _forms(W1: np.ndarray, lists: list[np.ndarray],
           base: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per unit list: its distinct ``W1`` rows, and each unit's row among them (from ``base``)."""
    forms, index = [], []
    for units in lists:
        uniq, inv = np.unique(W1[units], axis=0, return_inverse=True)
        index.append(base + inv.reshape(-1))
        forms.append(uniq)
        base += len(uniq)
    return forms, index


@dataclass(frozen=True)
class CompiledLayers:
    """The packed CSR arrays of a layer stack, in the kernel's argument order."""

    args: tuple[Any, ...]


def compile_layers(layers: list[Layer]) -> CompiledLayers:
    """Pack ``layers``: every head's K and Q rows and V's non-zero output rows stacked in
    order, every FF unit stacked (``b1``, W2 transposed by unit), ``b2`` per layer, and each
    layer's unit lists for scratchpad and other columns (global unit indices). The ``W1`` rows of
    a unit list are stored once per distinct row ("forms": the adder and snap units share their
    input sums and differ in the bias), with each unit's form index beside the list."""
    d = layers[0].width
    heads = [h for ly in layers for h in ly.heads]
    empty = np.zeros((0, d))
    K = np.concatenate([to_host(h.K) for h in heads] + [empty])
    Q = np.concatenate([to_host(h.Q) for h in heads] + [empty])
    v_rows, v_blocks = [], []
    for h in heads:
        V = to_host(h.V)
        out = np.nonzero(np.abs(V).sum(axis=1))[0]
        v_rows.append(out)
        v_blocks.append(V[out])
    W1 = np.concatenate([to_host(ly.W1) for ly in layers])
    W2T = np.concatenate([to_host(ly.W2).T for ly in layers])
    b1 = np.concatenate([to_host(ly.b1) for ly in layers]).astype(np.float64)
    b2 = np.stack([to_host(ly.b2) for ly in layers]).astype(np.float64)
    ug, ul, start = [], [], 0
    for ly in layers:
        scope = (np.zeros(ly.hidden, dtype=np.int64) if ly.scope is None
                 else np.asarray(to_host(ly.scope)))
        ug.append(start + np.nonzero(scope != SCOPE_LOCAL)[0])
        ul.append(start + np.nonzero(scope != SCOPE_GLOBAL)[0])
        start += ly.hidden
    forms_g, fg = _forms(W1, ug, 0)
    n_g = sum(len(f) for f in forms_g)
    forms_l, fl = _forms(W1, ul, n_g)
    b2r = [np.nonzero(row)[0] for row in b2]
    return CompiledLayers((
        _offsets([len(ly.heads) for ly in layers]), np.array([h.lam for h in heads], float),
        _offsets([h.K.shape[0] for h in heads]), *_csr(K), *_csr(Q),
        _offsets([len(r) for r in v_rows]), _ints(v_rows),
        *_csr(np.concatenate(v_blocks + [empty])),
        *_csr(np.concatenate(forms_g + forms_l + [empty])), b1, *_csr(W2T), b2,
        _offsets([len(r) for r in b2r]), _ints(b2r),
        _offsets([len(u) for u in ug]), _ints(ug), _ints(fg), _offsets([len(f) for f in forms_g]),
        _offsets([len(u) for u in ul]), _ints(ul), _ints(fl),
        n_g + _offsets([len(f) for f in forms_l])))


def forward_compiled(X: np.ndarray, layers: CompiledLayers, n_global: int, hard: bool,
                     iterations: int = 1, tol: float = 1e-9, incremental: bool = True,
                     parallel: bool = False) -> np.ndarray:
    """``iterations`` passes of the compiled layers on ``X: (B, d, n)`` (host float64) with the
    numba sparse kernel; returns a new array.

    ``incremental`` (bitwise the same X) recomputes, from the second pass of a call on, only the
    columns whose layer output can have changed; ``parallel`` runs programs on numba's threads.
    """
    from tpcore.kernels.looped import run_sparse

    XT = np.array(np.swapaxes(X, -1, -2), dtype=np.float64, order="C")   # (B, n, d) copy
    run_sparse(XT, iterations, n_global, hard, tol, layers.args, incremental, parallel)
    return np.ascontiguousarray(np.swapaxes(XT, -1, -2))

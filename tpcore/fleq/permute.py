"""Transposing a matrix given vectorised, with one layer and one pointer head (Giannou et al.
2023, §8, the comparison with Charton 2021).

A ``d x d`` matrix is given *vectorised*: entry ``A[i, j]`` sits in row ``in`` of column
``p = i d + j`` (row-major, ``n = d^2`` columns, one entry per position as in Charton's encoding).
Its transpose is the same sequence under a fixed permutation: column ``q = j d + i`` of
``vec(A^T)`` reads column ``src(q) = i d + j`` of ``vec(A)``. One head does it (Lemma 3's pointer
read, :func:`tpcore.fleq.blocks.shift_head`) with two sets of ``L = ceil(log2 n)``-bit
+-1 address codes held as constant rows:

    kp  (L)  the column's own position p   (keys)
    qp  (L)  the position src(q) it reads  (queries)

Scores ``lam p_p . p_src(q)`` are ``lam L`` on the source and at most ``lam (L - 2)`` elsewhere, so
column ``q``'s output is ``x_src(q)`` up to ``sum_h C(L, h) e^{-2 lam h} ~ L e^{-2 lam}`` of the
other entries. Rows (``FunctionBlock.rows``): ``one``, ``scr`` (the head's scratchpad mask),
``in`` (1), ``out`` (1, written), ``kp`` (L), ``qp`` (L): width ``2L + 4`` (24 for ``d = 30``), of
which the head reads the paper's ``2L + 1`` (the value row and the two codes). No feed-forward
units: the source positions are constants, so no address arithmetic (Lemma 16) is needed.

A smaller ``h x w`` matrix (``h, w <= d``) goes through the same block zero-padded to ``d x d``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpcore.backend import get_xp, to_host
from tpcore.errors import TpcoreError
from tpcore.fleq.blocks import FunctionBlock, block_layers, codes, shift_head
from tpcore.looped.encodings import address_bits
from tpcore.looped.layer import layer_forward
from tpcore.looped.weights import LayerBuilder, RowBlocks


def transpose_sources(d: int) -> np.ndarray:
    """``src: (d^2,)``: column ``q = j d + i`` of ``vec(A^T)`` reads column ``src[q] = i d + j``
    of ``vec(A)`` (row-major vectorisation)."""
    j, i = np.divmod(np.arange(d * d), d)
    return i * d + j


def vec_transpose_block(d: int = 30, lam: float = 30.0,
                        name: str = "vec_transp") -> FunctionBlock:
    """``vec(A) -> vec(A^T)`` for ``A`` up to ``d x d`` over ``s = d^2`` columns: 1 layer, 1 head,
    no FF units, width ``2 ceil(log2 d^2) + 4`` (see the module docstring)."""
    if d < 1:
        raise TpcoreError(f"matrix size d = {d}; expected d >= 1")
    n = d * d
    L = address_bits(n)
    rows = RowBlocks()
    for nm, h in (("one", 1), ("scr", 1), ("in", 1), ("out", 1), ("kp", L), ("qp", L)):
        rows.add(nm, h)
    src = transpose_sources(d)
    const = {"kp": codes(n, L, {p: p for p in range(n)}),
             "qp": codes(n, L, {q: int(src[q]) for q in range(n)})}
    layer = LayerBuilder(rows.size)
    shift_head(layer, rows, rows["kp"], rows["qp"], rows["in"], rows["out"], lam)
    return FunctionBlock(name, d, n, rows, [layer], const,
                         {"lam": lam, "n": n, "L": L, "vectorised": True})


def run_vec_transpose(block: FunctionBlock, A: Any, hard: bool = False,
                      dtype: Any = np.float64) -> Any:
    """``A: (..., h, w)`` with ``h, w <= block.d`` (at most one batch axis), vectorised into row
    ``in``, through the block; returns the output row read back as a matrix, ``(..., w, h)``
    (backend array; ``A^T`` up to the softmax error)."""
    A = np.asarray(to_host(A), dtype=np.float64)
    d = block.d
    h, w = A.shape[-2:]
    if h > d or w > d or A.ndim > 3:
        raise TpcoreError(f"{block.name}: operand of shape {A.shape} exceeds the block's "
                          f"{d}x{d} (one batch axis at most)")
    batch = A.shape[:-2]
    padded = np.zeros(batch + (d, d))
    padded[..., :h, :w] = A
    X = np.array(np.broadcast_to(block.initial(), batch + (block.rows.size, block.s)))
    X[..., block.rows["in"][0], :] = padded.reshape(batch + (d * d,))
    xp = get_xp()
    X = xp.asarray(X, dtype=dtype)
    for lay in block_layers(block, xp, dtype):
        X, _ = layer_forward(X, lay, hard=hard)
    out = X[..., block.rows["out"][0], :].reshape(batch + (d, d))
    return out[..., :w, :h]

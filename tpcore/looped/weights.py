"""Writing Eq. 1 weights by hand: named row blocks, a layer builder, and the feed-forward idioms
that the SUBLEQ and FLEQ constructions share. Host-only code (NumPy); :meth:`LayerBuilder.layer`
moves the finished weights to the array module.

A layer is built by adding attention heads (``K, Q, V, lam``) and ReLU units, each unit a row
``w`` of ``W1``, an entry ``bias`` of ``b1`` and a column ``out`` of ``W2``, so it adds
``out ReLU(w . x + bias)`` to every column ``x``. Units keep the order they are added in.

Gating. A unit acts only where a gate ``g = gate . x + gconst`` is 1 and is silent where
``g <= 0``: its pre-activation gets ``C (g - 1)`` added, with ``C`` larger than any
``|w . x + bias|`` that occurs (the *gating constant*). The gated identity

    ReLU(y + C (g - 1)) - ReLU(-y + C (g - 1)) = y  where g = 1,   0  where g <= 0

copies a linear form ``y = M x`` into rows (:func:`gated_linear`, :func:`gated_copy`); with no
gate it is ``y = ReLU(y) - ReLU(-y)`` (:func:`linear_map`), and ``x - ReLU(x) + ReLU(-x) = 0``
sets rows to zero (:func:`clear`). Every unit carries a scope (``SCOPE_*`` of
:mod:`tpcore.looped.layer`) that only the sparse forward reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from tpcore.backend import get_xp
from tpcore.errors import TpcoreError
from tpcore.looped.layer import SCOPE_ALL, AttentionHead, Layer

Terms = Mapping[int, float] | Iterable[tuple[int, float]]
"""A linear form ``sum coef * x[row]``: ``{row: coef}`` or ``[(row, coef), ...]``."""


class RowBlocks:
    """Named blocks of rows allocated top to bottom: :meth:`add` returns a block's ``slice``,
    ``blocks[name]`` its row indices, ``size`` the number of rows allocated."""

    def __init__(self) -> None:
        self.slices: dict[str, slice] = {}
        self.size = 0

    def add(self, name: str, height: int) -> slice:
        if name in self.slices:
            raise TpcoreError(f"row block {name!r} allocated twice")
        self.slices[name] = slice(self.size, self.size + height)
        self.size += height
        return self.slices[name]

    def __getitem__(self, name: str) -> np.ndarray:
        sl = self.slices[name]
        return np.arange(sl.start, sl.stop)

    def __contains__(self, name: str) -> bool:
        return name in self.slices


def row_vec(d: int, terms: Terms | None = None) -> np.ndarray:
    """The ``(d,)`` vector of a linear form (repeated rows add up, in order)."""
    v = np.zeros(d)
    for r, c in (terms.items() if isinstance(terms, Mapping) else terms or ()):
        v[r] += c
    return v


def select(d: int, idx: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """A ``(len(idx), d)`` matrix whose row ``t`` reads ``scale * x[idx[t]]``."""
    M = np.zeros((len(idx), d))
    M[np.arange(len(idx)), idx] = scale
    return M


class LayerBuilder:
    """One Eq. 1 layer of width ``d`` under construction: heads, ReLU units (``W1: (u, d)``,
    ``b1: (u,)``, ``W2: (d, u)``, a scope each) and the output bias ``b2: (d,)``."""

    def __init__(self, d: int) -> None:
        self.d = d
        self.heads: list[AttentionHead] = []
        self.b2 = np.zeros(d)
        self._w1: list[np.ndarray] = []
        self._b1: list[np.ndarray] = []
        self._w2: list[np.ndarray] = []
        self._scope: list[np.ndarray] = []

    def head(self, K: np.ndarray, Q: np.ndarray, V: np.ndarray, lam: float = 1.0) -> None:
        """Add a head with scores ``(K x_j) . (Q x_k)``, values ``V x_j``: ``K, Q: (k, d)``,
        ``V: (d, d)``."""
        self.heads.append(AttentionHead(K, Q, V, float(lam)))

    def units(self, W1: np.ndarray, b1: np.ndarray, W2: np.ndarray,
              scope: int = SCOPE_ALL) -> None:
        """Add ReLU units ``x += W2 ReLU(W1 x + b1)``; ``W1: (u, d)``, ``b1: (u,)``,
        ``W2: (d, u)``."""
        self._w1.append(np.asarray(W1, dtype=np.float64))
        self._b1.append(np.asarray(b1, dtype=np.float64))
        self._w2.append(np.asarray(W2, dtype=np.float64))
        self._scope.append(np.full(len(self._b1[-1]), scope, dtype=np.int64))

    def unit(self, w: Terms | np.ndarray, bias: float, out: Terms | np.ndarray,
             scope: int = SCOPE_ALL) -> None:
        """Add one unit ``x += out ReLU(w . x + bias)`` (``w, out``: linear forms or vectors)."""
        w = w if isinstance(w, np.ndarray) else row_vec(self.d, w)
        out = out if isinstance(out, np.ndarray) else row_vec(self.d, out)
        self.units(w[None], np.array([float(bias)]), out[:, None], scope)

    @property
    def n_units(self) -> int:
        return sum(len(b) for b in self._b1)

    def extend(self, other: LayerBuilder, rowmap: np.ndarray | None = None) -> None:
        """Add ``other``'s heads, units and bias to this layer, its row ``r`` at
        ``rowmap[r]`` (the same rows when None)."""
        rowmap = np.arange(other.d) if rowmap is None else rowmap
        d = self.d
        for h in other.heads:
            K, Q, V = np.zeros((h.K.shape[0], d)), np.zeros((h.Q.shape[0], d)), np.zeros((d, d))
            K[:, rowmap], Q[:, rowmap] = h.K, h.Q
            V[np.ix_(rowmap, rowmap)] = h.V
            self.head(K, Q, V, h.lam)
        for W1, b1, W2, scope in zip(other._w1, other._b1, other._w2, other._scope):
            W1b, W2b = np.zeros((len(b1), d)), np.zeros((d, len(b1)))
            W1b[:, rowmap], W2b[rowmap] = W1, W2
            self._w1.append(W1b)
            self._b1.append(b1)
            self._w2.append(W2b)
            self._scope.append(scope)
        self.b2[rowmap] += other.b2

    def layer(self, xp: Any = None, dtype: Any = np.float64) -> Layer:
        """The finished :class:`Layer` on array module ``xp`` (the backend's when None); its
        ``scope`` stays a host array."""
        xp = get_xp() if xp is None else xp
        d = self.d
        W1 = np.concatenate(self._w1) if self._w1 else np.zeros((0, d))
        b1 = np.concatenate(self._b1) if self._b1 else np.zeros(0)
        W2 = np.concatenate(self._w2, axis=1) if self._w2 else np.zeros((d, 0))
        scope = np.concatenate(self._scope) if self._scope else np.zeros(0, dtype=np.int64)
        heads = tuple(AttentionHead(xp.asarray(h.K, dtype=dtype), xp.asarray(h.Q, dtype=dtype),
                                    xp.asarray(h.V, dtype=dtype), h.lam) for h in self.heads)
        return Layer(heads, *(xp.asarray(w, dtype=dtype) for w in (W1, b1, W2, self.b2)), scope)


def gated_unit(b: LayerBuilder, w: np.ndarray, bias: float, out: Terms | np.ndarray,
               gate: np.ndarray, gconst: float, C: float, scope: int = SCOPE_ALL) -> None:
    """Add ``out ReLU(w . x + bias + C (g - 1))``, ``g = gate . x + gconst``: the unit where
    ``g = 1``, silent where ``g <= 0`` (given ``|w . x + bias| < C``)."""
    b.unit(w + C * gate, bias + C * (gconst - 1.0), out, scope)


def gated_linear(b: LayerBuilder, M: np.ndarray, dst: np.ndarray, gate: np.ndarray,
                 gconst: float, C: float, scope: int = SCOPE_ALL) -> None:
    """``x[dst] += (M x) g`` for a gate ``g = gate . x + gconst`` in {.., -1, 0, 1}: the gated
    identity, ``M x`` where ``g = 1`` and 0 where ``g <= 0`` (given ``|M x| < C``).
    ``M: (len(dst), d)``; 2 units per row, all the ``+`` units first."""
    k = len(dst)
    W1 = np.concatenate([M, -M]) + C * gate[None, :]
    W2 = np.zeros((b.d, 2 * k))
    W2[dst, np.arange(k)] = 1.0
    W2[dst, k + np.arange(k)] = -1.0
    b.units(W1, np.full(2 * k, C * (gconst - 1.0)), W2, scope)


def gated_copy(b: LayerBuilder, src: np.ndarray, dst: np.ndarray, gate: np.ndarray,
               gconst: float, C: float, scale: float = 1.0) -> None:
    """``x[dst] += scale * x[src] * g`` (see :func:`gated_linear`)."""
    gated_linear(b, select(b.d, src, scale), dst, gate, gconst, C)


def linear_map(b: LayerBuilder, M: np.ndarray, dst: np.ndarray) -> None:
    """``x[dst] += M x`` (``M: (len(dst), d)``) as ``ReLU(Mx) - ReLU(-Mx)``: 2 units per row."""
    k = len(dst)
    W2 = np.zeros((b.d, 2 * k))
    W2[dst, np.arange(k)] = 1.0
    W2[dst, k + np.arange(k)] = -1.0
    b.units(np.concatenate([M, -M]), np.zeros(2 * k), W2)


def clear(b: LayerBuilder, rows: np.ndarray) -> None:
    """``x[rows] := 0`` (``x - ReLU(x) + ReLU(-x)``): 2 units per row."""
    linear_map(b, select(b.d, rows, -1.0), rows)

"""Weight generators for the SUBLEQ looped transformer, one function per block.

Each generator returns a :class:`~tpcore.looped.weights.LayerBuilder` holding its attention heads
(``K, Q, V``) and feed-forward units over the rows of a :class:`~tpcore.subleq.layout.Layout`.
:func:`merge` stacks blocks into one Eq. 1 layer (heads side by side, FF units concatenated), so
a schedule decides how many blocks share a layer.

Recurring FF idioms (``x`` a linear form of the attention output, ``ind`` the scratchpad bit,
``C = Layout.gate``, larger than any ``|x|`` that occurs):

* a unit's scope decides its gate (:mod:`tpcore.looped.weights`): ``g = ind`` on the scratchpad
  column only (scope ``GLOBAL``), ``g = 1 - ind`` on every other column (``LOCAL``), none
  (``ALL``); the gated identity overwrites a row: ``x = new - old``;
* step ``ReLU(s - t + 1) - ReLU(s - t)`` = ``1[s >= t]`` on integers (Lemma 16's adder);
* a gated constant ``v ind`` is ``v ReLU(ind)`` (``ind`` is 0 or 1).

Blocks (paper step in brackets): :func:`fetch` [1], :func:`read` [2], :func:`subtract` [3, Lemma 16
with carry-in: ``b - a = b + ~a + 1``], :func:`write` [4, Lemma 3], :func:`flag` [5, Eq. 4],
:func:`increment` [5, Lemma 16], :func:`select` [5, Sec. 4.3], :func:`snap` [6, error correction].
Host-only code (NumPy): weights are built here and moved to the array module by the machine.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpcore.looped.layer import SCOPE_ALL, SCOPE_GLOBAL, SCOPE_LOCAL, Layer
from tpcore.looped.weights import LayerBuilder, Terms, gated_linear, gated_unit, row_vec
from tpcore.subleq.layout import Layout


class _Gate:
    """The gate of each scope on a layout: ``g = ind`` (GLOBAL), ``1 - ind`` (LOCAL), 1 (ALL),
    with gating constant ``C``."""

    def __init__(self, layout: Layout, C: float) -> None:
        self.d, self.ind, self.C = layout.d, layout.r("ind"), C

    def of(self, scope: int) -> tuple[np.ndarray, float]:
        """``(gate, gconst)`` with ``g = gate . x + gconst``."""
        if scope == SCOPE_GLOBAL:
            return row_vec(self.d, [(self.ind, 1.0)]), 0.0
        if scope == SCOPE_LOCAL:
            return row_vec(self.d, [(self.ind, -1.0)]), 1.0
        return row_vec(self.d), 1.0

    def unit(self, p: LayerBuilder, terms: Terms, bias: float, out: Terms, scope: int) -> None:
        """``out ReLU(terms + bias)`` gated to ``scope``."""
        gated_unit(p, row_vec(self.d, terms), bias, out, *self.of(scope), self.C, scope)

    def pair(self, p: LayerBuilder, x: Terms, dst: int, scope: int) -> None:
        """Add ``x`` (gated to ``scope``) to row ``dst``: the gated identity
        ``ReLU(x + C (g - 1)) - ReLU(-x + C (g - 1))``."""
        gated_linear(p, row_vec(self.d, x)[None], np.array([dst]), *self.of(scope), self.C,
                     scope)


def _constant(p: LayerBuilder, gate: _Gate, value: float, dst: int, scope: int) -> None:
    """Add ``value`` to row ``dst`` on the columns of ``scope`` only."""
    if scope == SCOPE_ALL:
        p.b2[dst] += value
    elif scope == SCOPE_GLOBAL:
        p.unit([(gate.ind, 1.0)], 0.0, [(dst, value)], scope)
    else:
        p.unit([(gate.ind, -1.0)], 1.0, [(dst, value)], scope)


def overwrite(p: LayerBuilder, gate: _Gate, new: list[tuple[int, float]], dst: int,
              scope: int) -> None:
    """Row ``dst := new`` on ``scope`` columns (requires ``|new - dst| < C`` elsewhere)."""
    gate.pair(p, new + [(dst, -1.0)], dst, scope)


def zero_rows(p: LayerBuilder, gate: _Gate, rows: range) -> None:
    """Temporaries back to exactly 0 on every column: ``x - ReLU(x) + ReLU(-x) = 0``."""
    for r in rows:
        gate.pair(p, [(r, -1.0)], r, SCOPE_ALL)


def _selector(layout: Layout, *blocks: str) -> np.ndarray:
    """``(L, d)`` matrix summing the given L-row blocks (for K and Q)."""
    M = np.zeros((layout.L, layout.d))
    for name in blocks:
        sl = layout.rows[name]
        M[np.arange(layout.L), np.arange(sl.start, sl.stop)] = 1.0
    return M


def _copy(layout: Layout, src: tuple[range, ...], dst: str) -> np.ndarray:
    """``(d, d)`` value matrix adding each row range in ``src`` (row by row) into block ``dst``."""
    V = np.zeros((layout.d, layout.d))
    d0 = layout.rows[dst].start
    for rows in src:
        V[d0 + np.arange(len(rows)), np.array(rows)] = 1.0
    return V


def _span(layout: Layout, first: str, last: str) -> range:
    """Rows from block ``first`` through block ``last`` (contiguous in the layout)."""
    return range(layout.rows[first].start, layout.rows[last].stop)


def _rows(layout: Layout, name: str) -> range:
    sl = layout.rows[name]
    return range(sl.start, sl.stop)


def fetch(layout: Layout, lam: float, C: float) -> LayerBuilder:
    """Step 1: ``cur := cmd[:, PC]`` on column 0.

    Head: ``K = enc``, ``Q = pc``: column 0's query ``p_PC`` scores ``L`` against column PC and
    ``<= L - 2`` elsewhere (column 0's own key is 0); ``V`` copies ``cmd`` into ``tmp_cmd``.
    FF: overwrite ``cur`` with ``tmp_cmd`` on column 0, zero ``tmp_cmd`` everywhere.
    """
    p, gate = LayerBuilder(layout.d), _Gate(layout, C)
    V = _copy(layout, (_span(layout, "cmd_a", "cmd_c"),), "tmp_cmd")
    p.head(_selector(layout, "enc"), _selector(layout, "pc"), V, lam)
    t0 = layout.r("tmp_cmd")
    for i, r in enumerate(_span(layout, "cur_a", "cur_c")):
        overwrite(p, gate, [(t0 + i, 1.0)], r, SCOPE_GLOBAL)
    zero_rows(p, gate, _rows(layout, "tmp_cmd"))
    return p


def read(layout: Layout, lam: float, C: float, store: bool = True) -> LayerBuilder:
    """Step 2 (2 heads): ``tmp_a := mem[a] / 2``, ``tmp_b := mem[b] / 2`` on column 0.

    Head for pointer ``x`` in {a, b}: ``K = Q = cur_x + enc``. Column 0 (key ``p_x``, encoding 0)
    ties exactly with column ``x`` (key ``p_x``), so with weight 1/2 each and column 0's ``mem``
    rows being 0, ``tmp_x = mem[x] / 2`` (Lemma 2). With ``store`` the FF overwrites
    ``scr_a := 2 tmp_a``, ``scr_b := 2 tmp_b`` and zeroes the temporaries; without it the
    temporaries are left for a :func:`subtract` in the same layer.
    """
    p, gate = LayerBuilder(layout.d), _Gate(layout, C)
    for ptr, tmp in (("cur_a", "tmp_a"), ("cur_b", "tmp_b")):
        K = _selector(layout, ptr, "enc")
        p.head(K, K.copy(), _copy(layout, (_rows(layout, "mem"),), tmp), lam)
    if store:
        for tmp, scr in (("tmp_a", "scr_a"), ("tmp_b", "scr_b")):
            for i, r in enumerate(_rows(layout, scr)):
                overwrite(p, gate, [(layout.r(tmp, i), 2.0)], r, SCOPE_GLOBAL)
        zero_rows(p, gate, _rows(layout, "tmp_a"))
        zero_rows(p, gate, _rows(layout, "tmp_b"))
    return p


def _adder(p: LayerBuilder, gate: _Gate, u: list[tuple[list[tuple[int, float]], float]],
           v: list[tuple[list[tuple[int, float]], float]], carry: int, dst: range,
           scope: int) -> None:
    """Lemma 16 with carry-in: ``dst := bits of (u + v + carry) mod 2^len(dst)`` as +-1.

    ``u[k], v[k]`` are ``(terms, const)`` for 0/1 bit ``k``. With ``s_i`` the sum of the ``i`` low
    bits plus carry, output bit ``i-1`` is 1 iff ``s_i`` lies in ``[2^(i-1), 2^i - 1]`` or
    ``[3 2^(i-1), 2^(i+1) - 1]``, i.e. ``1[s >= 2^(i-1)] + 1[s <= 2^i - 1] + 1[s >= 3 2^(i-1)] - 1``
    (6 ReLUs); as +-1 it is ``2 (steps) - 3``. The old value of ``dst`` is removed by a pair.
    """
    s_terms: list[tuple[int, float]] = []
    s_const = float(carry)
    for i, r in enumerate(dst, start=1):
        k = i - 1
        for terms, const in (u[k], v[k]):
            s_terms = s_terms + [(row, c * 2.0 ** k) for row, c in terms]
            s_const += const * 2.0 ** k
        neg = [(row, -c) for row, c in s_terms]
        half, full = 2.0 ** (i - 1), 2.0 ** i
        for t in (half, 3 * half):                    # 1[s >= t], weight 2
            gate.unit(p, s_terms, s_const - t + 1, [(r, 2.0)], scope)
            gate.unit(p, s_terms, s_const - t, [(r, -2.0)], scope)
        gate.unit(p, neg, full - s_const, [(r, 2.0)], scope)   # 1[s <= 2^i - 1], weight 2
        gate.unit(p, neg, full - 1 - s_const, [(r, -2.0)], scope)
        _constant(p, gate, -3.0, r, scope)
        gate.pair(p, [(r, -1.0)], r, scope)


def subtract(layout: Layout, C: float, a_rows: str, b_rows: str, scale: float) -> LayerBuilder:
    """Step 3: ``scr_b := (B - A) mod 2^N`` on column 0, ``A = scale * X[a_rows]``, likewise B.

    Two's complement: ``B - A = B + ~A + 1``; 0/1 bits ``(B_k + 1) / 2`` and ``(1 - A_k) / 2``
    feed the carry-in adder. ``a_rows, b_rows`` are ``scr_a, scr_b`` (separate layer) or
    ``tmp_a, tmp_b`` with ``scale = 2`` (fused into the read layer, which then also stores
    ``scr_a`` and zeroes the temporaries).
    """
    p, gate = LayerBuilder(layout.d), _Gate(layout, C)
    N = layout.N
    u = [([(layout.r(b_rows, k), scale / 2)], 0.5) for k in range(N)]
    v = [([(layout.r(a_rows, k), -scale / 2)], 0.5) for k in range(N)]
    _adder(p, gate, u, v, 1, _rows(layout, "scr_b"), SCOPE_GLOBAL)
    if a_rows == "tmp_a":
        for i, r in enumerate(_rows(layout, "scr_a")):
            overwrite(p, gate, [(layout.r("tmp_a", i), scale)], r, SCOPE_GLOBAL)
        zero_rows(p, gate, _rows(layout, "tmp_a"))
        zero_rows(p, gate, _rows(layout, "tmp_b"))
    return p


def write(layout: Layout, lam: float, C: float) -> LayerBuilder:
    """Step 4 (Lemma 3): ``mem[:, b] := scr_b[:, 0]``.

    Head: ``K = Q = cur_b + enc``; ``V`` adds ``mem + scr_b`` into ``tmp_a``. Column ``b`` splits
    1/2-1/2 between itself and column 0, so ``tmp_a = (mem[b] + r) / 2`` and the gated FF adds
    ``2 tmp_a - 2 mem = r - mem[b]`` on non-scratchpad columns; every other memory column attends
    to itself only (``2 tmp - 2 mem = 0``). Then ``tmp_a`` is zeroed.
    """
    p, gate = LayerBuilder(layout.d), _Gate(layout, C)
    K = _selector(layout, "cur_b", "enc")
    V = _copy(layout, (_rows(layout, "mem"), _rows(layout, "scr_b")), "tmp_a")
    p.head(K, K.copy(), V, lam)
    for i, r in enumerate(_rows(layout, "mem")):
        gate.pair(p, [(layout.r("tmp_a", i), 2.0), (r, -2.0)], r, SCOPE_LOCAL)
    zero_rows(p, gate, _rows(layout, "tmp_a"))
    return p


def flag(layout: Layout, C: float) -> LayerBuilder:
    """Eq. 4: ``flag := ReLU(b_N) + ReLU(1 - N - sum_i b_i)`` from ``scr_b`` (1 iff <= 0)."""
    p, gate = LayerBuilder(layout.d), _Gate(layout, C)
    f = layout.r("flag")
    N = layout.N
    gate.unit(p, [(layout.r("scr_b", N - 1), 1.0)], 0.0, [(f, 1.0)], SCOPE_GLOBAL)
    gate.unit(p, [(r, -1.0) for r in _rows(layout, "scr_b")], 1.0 - N, [(f, 1.0)], SCOPE_GLOBAL)
    gate.pair(p, [(f, -1.0)], f, SCOPE_GLOBAL)
    return p


def increment(layout: Layout, C: float) -> LayerBuilder:
    """Lemma 16 with ``b = 0`` and carry 1: ``pc1 := p_(PC + 1 mod 2^L)``."""
    p, gate = LayerBuilder(layout.d), _Gate(layout, C)
    u = [([(layout.r("pc", k), 0.5)], 0.5) for k in range(layout.L)]
    v = [([], 0.0)] * layout.L
    _adder(p, gate, u, v, 1, _rows(layout, "pc1"), SCOPE_GLOBAL)
    return p


def select(layout: Layout, C: float) -> LayerBuilder:
    """Sec. 4.3: ``pc := 2 ReLU(pc1 - flag) + 2 ReLU(cur_c - (1 - flag)) - 1`` (on column 0)."""
    p, gate = LayerBuilder(layout.d), _Gate(layout, C)
    f = layout.r("flag")
    for k, r in enumerate(_rows(layout, "pc")):
        gate.unit(p, [(layout.r("pc1", k), 1.0), (f, -1.0)], 0.0, [(r, 2.0)], SCOPE_GLOBAL)
        gate.unit(p, [(layout.r("cur_c", k), 1.0), (f, 1.0)], -1.0, [(r, 2.0)], SCOPE_GLOBAL)
        _constant(p, gate, -1.0, r, SCOPE_GLOBAL)
        gate.pair(p, [(r, -1.0)], r, SCOPE_GLOBAL)
    return p


SNAP_ROWS = ("scr_a", "scr_b", "cur_a", "cur_b", "cur_c", "pc", "pc1", "flag")
"""Column-0 rows that attention or gated FFs can leave noisy (``mem`` is snapped everywhere)."""


STATIC_ROWS = ("cmd_a", "cmd_b", "cmd_c", "enc", "ind")
"""Rows no head or FF writes: exact with exact weights, but they drift when weights are noisy."""


def snap(layout: Layout, C: float, eps: float = 0.25, static: bool = False) -> LayerBuilder:
    """Step 6: snap values within ``eps`` of -1, 0, 1 back exactly (``eps < 1/2``).

    ``clean(x) = a (ReLU(x+1-eps) - ReLU(x+eps)) + a (ReLU(x-eps) - ReLU(x-1+eps)) - 1``,
    ``a = 1 / (1 - 2 eps)``; the FF adds ``clean(x) - x``. ``mem`` rows on every column, the
    other noisy rows on column 0. With ``static`` also :data:`STATIC_ROWS` on every column: with
    exact weights they never change, but with perturbed weights ``ind`` drifts and every gate
    multiplies its drift by ``C`` (the sensitivity study shows this).
    """
    if not 0 < eps < 0.5:
        raise ValueError(f"snap eps = {eps}; expected 0 < eps < 0.5")
    p, gate = LayerBuilder(layout.d), _Gate(layout, C)
    a = 1.0 / (1.0 - 2.0 * eps)
    targets = [(r, SCOPE_ALL) for r in _rows(layout, "mem")]
    targets += [(r, SCOPE_GLOBAL) for name in SNAP_ROWS for r in _rows(layout, name)]
    if static:
        targets += [(r, SCOPE_ALL) for name in STATIC_ROWS for r in _rows(layout, name)]
    for r, scope in targets:
        for bias, coef in ((1 - eps, a), (eps, -a), (-eps, a), (-1 + eps, -a)):
            gate.unit(p, [(r, 1.0)], bias, [(r, coef)], scope)
        _constant(p, gate, -1.0, r, scope)
        gate.pair(p, [(r, -1.0)], r, scope)
    return p


def merge(parts: list[LayerBuilder], xp: Any = np) -> Layer:
    """Stack blocks into one layer over array module ``xp`` (an FF-only layer has no heads)."""
    layer = LayerBuilder(parts[0].d)
    for part in parts:
        layer.extend(part)
    return layer.layer(xp)

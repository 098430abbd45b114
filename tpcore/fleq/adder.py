"""Noise-tolerant feed-forward idioms of FLEQ: the gated Lemma 16 adder with flat steps, and the
gated snap of +-1 bits (error correction). Host-only code (NumPy).
"""

from __future__ import annotations

import numpy as np

from tpcore.looped.weights import LayerBuilder, row_vec


def gated_adder(b: LayerBuilder, x: np.ndarray | None, y: np.ndarray | None, const: int,
                dst: np.ndarray, gate: np.ndarray, gconst: float, C: float) -> None:
    """Lemma 16 (+-1 bits, LSB first), gated: ``x[dst] += p_{(X + Y + const) mod 2^L}`` where
    ``g = gate . x + gconst`` is 1, and nothing where ``g <= 0``; ``C`` is the gating constant,
    raised by ``2^(L+3)`` above the adder's own sums.

    For output bit ``i`` (weight ``2^(i-1)``) let ``S`` be the sum of the ``i`` low bits of both
    operands (``(b+1)/2`` of each +-1 bit) and of ``const``; the bit is
    ``H(2^(i-1)) - H(2^i) + H(3 2^(i-1))`` (6 units per bit). The paper's step
    ``ReLU(S - t + 1) - ReLU(S - t)`` passes noise on ``S`` straight through at integers; here
    ``H(t) = ReLU(2(S - t) + 1.5) - ReLU(2(S - t) + 0.5)`` is flat within 1/4 of every integer,
    so slightly noisy input bits give exact output bits (the adder also snaps). ``+-1 = 2 bit - 1``
    with the ``-1`` from one gated unit.
    """
    D, L = b.d, len(dst)
    C = C + 2.0 ** (L + 3)
    rows_w1, b1, out = [], [], []
    lin, lin0 = np.zeros(D), 0.0
    for i in range(1, L + 1):
        k = i - 1
        for src in (x, y):
            if src is not None:
                lin[src[k]] += 2.0 ** k / 2
                lin0 += 2.0 ** k / 2
        lin0_i = lin0 + (const % (1 << i))
        for t, sign in ((2.0 ** k, 1.0), (2.0 ** i, -1.0), (3 * 2.0 ** k, 1.0)):
            for shift, sgn in ((1.5, 1.0), (0.5, -1.0)):
                rows_w1.append(2.0 * lin + C * gate)
                b1.append(2.0 * (lin0_i - t) + shift + C * (gconst - 1.0))
                o = np.zeros(D)
                o[dst[k]] = 2.0 * sign * sgn
                out.append(o)
    rows_w1.append(C * gate)
    b1.append(1.0 + C * (gconst - 1.0))
    o = np.zeros(D)
    o[dst] = -1.0
    out.append(o)
    b.units(np.array(rows_w1), np.array(b1), np.array(out).T)


def gated_snap(b: LayerBuilder, src: np.ndarray, dst: np.ndarray, gate: np.ndarray,
               gconst: float, C: float) -> None:
    """``x[dst] += sign(x[src])`` for +-1 bits within 1/4 of +-1, where the gate
    ``g = gate . x + gconst`` is 1 (error correction, §5.1): ``s(v) - s(-v)`` with the flat step
    ``s(v) = ReLU(2v - 0.5) - ReLU(2v - 1.5)``; ``C`` is the gating constant. 4 units per bit."""
    D, k = b.d, len(src)
    W1, b1, W2 = [], [], np.zeros((D, 4 * k))
    for t, (r, q) in enumerate(zip(src, dst)):
        for u, (sgn, shift, w) in enumerate(((1, -0.5, 1), (1, -1.5, -1), (-1, -0.5, -1),
                                             (-1, -1.5, 1))):
            W1.append(row_vec(D, {r: 2.0 * sgn}) + C * gate)
            b1.append(shift + C * (gconst - 1.0))
            W2[q, 4 * t + u] = w
    b.units(np.array(W1), np.array(b1), W2)

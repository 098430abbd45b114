"""FLEQ function blocks as explicit Eq. 1 weights (Giannou et al. 2023, §6-7, App. A.2-A.4, E).

A *function block* (Definition 1) is a short stack of Eq. 1 layers acting on ``s >= 3d`` scratchpad
columns. Its row space (``Block.rows``) is

    one   (1)     1 on every column (shared with the machine)
    scr   (1)     1 on scratchpad columns, 0 elsewhere (shared with the machine)
    in    (h_in)  inputs: A (d_h x d_w) in columns 0..d_w-1, B in columns d..d+d_w'-1
    out   (h_out) output C = f(A, B) in columns 2d..2d+d_w''-1
    ...           private constant rows (encodings, indicators; set on the scratchpad columns and
                  never written) and work rows (zero at the start, left dirty: the machine clears)

Every head carries a *mask feature*: scratchpad queries give keys outside the scratchpad the score
``-MASK`` and other queries attend among those columns, whose block rows are zero. A block therefore
computes the same thing alone (``run_block``) or embedded in the whole FLEQ machine, whatever the
number of other columns. Values outside the output columns are inconsequential.

Blocks (``f_mul(A, B) = A^T B`` as in the paper):

* ``combine_block``  ``alpha A + beta B`` (add, subtract, percentage; Lemmas 8-9, Corollary 3):
  FF splits A and B with signs, one head averages the two tied columns ``j`` and ``d+j`` into
  output column ``2d+j``. 2 layers, 1 head.
* ``matmul_block``   ``A^T B`` by the linearised softmax (Lemma 7): scores ``c <m_i, m_k>`` plus
  anchor columns of score ``C``; ``G e^{c z} / Z ~ 1 + c z``; the FF forms ``(P - 1)/c`` and a
  shift head moves column ``d+j`` to ``2d+j``. Error ~ ``c z^2/2 + sum z/(n_a e^C) + eps/c``.
  2 layers, 1 head.
* ``transpose_block`` ``A^T`` (Lemma 6, 2 layers instead of 4): a head copies column ``j`` of A
  into every vectorisation column ``(i, j)``, the FF keeps entry ``A[i, j]`` in row ``j``, a head
  averages the ``d`` columns of group ``i`` into output column ``2d+i``. Needs ``s >= 3d + d^2``.
* ``diag_block``     ``diag(a)`` of a row vector: element-wise products as ``mul(diag(u), v)``.
* ``sigmoid_block``  ``f_j(x) = sum_i c_ji sigma(a_ji^T x + b_ji)`` on every column ``x`` of A,
  ``j`` selected by the one-hot B (Lemma 5): head ``i`` sees score ``a_ji^T x + b_ji + log(s-1)`` on
  the selector column and 0 on the ``s-1`` others, so its weight is exactly the sigmoid.
  3 layers, m heads. ``sigmoid_width_block`` is Corollary 6 / Lemma 18: the same sum with one
  head per layer, the terms spread over ``m`` scratchpad columns.

Fits: ``fit_sigmoids`` (least squares for any scalar function), ``inverse_fit`` (Lemma 10 / 21) and
``sqrt_fit`` (Lemma 11 / 22).

Weights are built on the host with NumPy (host-only construction code); ``run_block`` and the
machine run them over the array module of the backend in float64 (or float32).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tpcore.backend import get_xp, to_host
from tpcore.errors import TpcoreError
from tpcore.looped.encodings import address_bits, encode_address
from tpcore.looped.layer import Head, Layer, layer_forward

MASK = 1e4
"""Score magnitude separating scratchpad from non-scratchpad columns (e^-MASK = 0)."""
GATE = 1e4
"""Default gating constant C of the gated identities: values gated must stay below it in
magnitude; its round-off (about C * machine epsilon) is the floor of every gated copy. Weights
built inside ``with gate_constant(C):`` use another C (e.g. a small one for float32)."""
_GATES = [GATE]


def current_gate() -> float:
    """The gating constant used by weights built now (see :func:`gate_constant`)."""
    return _GATES[-1]


@contextmanager
def gate_constant(C: float) -> Iterator[None]:
    """Build weights with gating constant ``C`` inside the ``with`` block."""
    if not C > 0:
        raise TpcoreError(f"gating constant {C}; expected C > 0")
    _GATES.append(float(C))
    try:
        yield
    finally:
        _GATES.pop()


class Rows:
    """Named row blocks allocated top to bottom."""

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


class Spec:
    """One Eq. 1 layer under construction (host NumPy): heads and feed-forward units."""

    def __init__(self, D: int) -> None:
        self.D = D
        self.heads: list[tuple[np.ndarray, np.ndarray, np.ndarray, float]] = []
        self._w1: list[np.ndarray] = []
        self._b1: list[np.ndarray] = []
        self._w2: list[np.ndarray] = []

    def head(self, K: np.ndarray, Q: np.ndarray, V: np.ndarray, lam: float = 1.0) -> None:
        self.heads.append((K, Q, V, float(lam)))

    def units(self, W1: np.ndarray, b1: np.ndarray, W2: np.ndarray) -> None:
        """Add ReLU units: ``x += W2 ReLU(W1 x + b1)``; ``W1: (u, D)``, ``W2: (D, u)``."""
        self._w1.append(W1)
        self._b1.append(b1)
        self._w2.append(W2)

    @property
    def n_units(self) -> int:
        return sum(w.shape[0] for w in self._w1)

    def layer(self, xp: Any = None, dtype: Any = np.float64) -> Layer:
        xp = get_xp() if xp is None else xp
        D = self.D
        W1 = np.concatenate(self._w1) if self._w1 else np.zeros((0, D))
        b1 = np.concatenate(self._b1) if self._b1 else np.zeros(0)
        W2 = np.concatenate(self._w2, axis=1) if self._w2 else np.zeros((D, 0))
        heads = tuple(Head(xp.asarray(K, dtype=dtype), xp.asarray(Q, dtype=dtype),
                           xp.asarray(V, dtype=dtype), lam) for K, Q, V, lam in self.heads)
        W1, b1, W2 = (xp.asarray(w, dtype=dtype) for w in (W1, b1, W2))
        return Layer(heads=heads, W1=W1, b1=b1, W2=W2, b2=xp.zeros(D, dtype=dtype))

    def embed(self, into: Spec, rowmap: np.ndarray) -> None:
        """Add this layer's heads and units to ``into``, local row ``r`` -> ``rowmap[r]``."""
        D = into.D
        for K, Q, V, lam in self.heads:
            K2, Q2, V2 = np.zeros((K.shape[0], D)), np.zeros((Q.shape[0], D)), np.zeros((D, D))
            K2[:, rowmap], Q2[:, rowmap] = K, Q
            V2[np.ix_(rowmap, rowmap)] = V
            into.head(K2, Q2, V2, lam)
        for W1, b1, W2 in zip(self._w1, self._b1, self._w2):
            W1b, W2b = np.zeros((W1.shape[0], D)), np.zeros((D, W1.shape[0]))
            W1b[:, rowmap], W2b[rowmap] = W1, W2
            into.units(W1b, b1, W2b)


def row_vec(D: int, coefs: dict[int, float] | None = None) -> np.ndarray:
    """A length-``D`` vector with the given entries (a linear functional of a column)."""
    v = np.zeros(D)
    for r, c in (coefs or {}).items():
        v[r] += c
    return v


def select(D: int, idx: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """A ``(len(idx), D)`` matrix whose row ``t`` reads ``scale * x[idx[t]]``."""
    M = np.zeros((len(idx), D))
    M[np.arange(len(idx)), idx] = scale
    return M


def gated_linear(spec: Spec, M: np.ndarray, dst: np.ndarray, gate: np.ndarray,
                 gconst: float = 0.0, C: float | None = None) -> None:
    """``x[dst] += (M x) g`` for a gate ``g = gate . x + gconst`` in {.., -1, 0, 1}.

    Gated identity ``ReLU(y + C(g-1)) - ReLU(-y + C(g-1))``: ``y`` if ``g = 1``, 0 if ``g <= 0``
    (given ``|y| < C``). ``M: (len(dst), D)``; 2 units per row.
    """
    k = len(dst)
    C = current_gate() if C is None else C
    W1 = np.concatenate([M, -M]) + C * gate[None, :]
    W2 = np.zeros((spec.D, 2 * k))
    W2[dst, np.arange(k)] = 1.0
    W2[dst, k + np.arange(k)] = -1.0
    spec.units(W1, np.full(2 * k, C * (gconst - 1.0)), W2)


def gated_copy(spec: Spec, src: np.ndarray, dst: np.ndarray, gate: np.ndarray,
               gconst: float = 0.0, scale: float = 1.0, C: float | None = None) -> None:
    """``x[dst] += scale * x[src] * g`` (see :func:`gated_linear`)."""
    gated_linear(spec, select(spec.D, src, scale), dst, gate, gconst, C)


def linear_map(spec: Spec, M: np.ndarray, dst: np.ndarray) -> None:
    """``x[dst] += M x`` (``M: (len(dst), D)``) as ``ReLU(Mx) - ReLU(-Mx)``: 2 units per row."""
    k = len(dst)
    W2 = np.zeros((spec.D, 2 * k))
    W2[dst, np.arange(k)] = 1.0
    W2[dst, k + np.arange(k)] = -1.0
    spec.units(np.concatenate([M, -M]), np.zeros(2 * k), W2)


def clear(spec: Spec, rows: np.ndarray) -> None:
    """``x[rows] := 0`` (``x - ReLU(x) + ReLU(-x)``): 2 units per row."""
    M = np.zeros((len(rows), spec.D))
    M[np.arange(len(rows)), rows] = -1.0
    linear_map(spec, M, rows)


def masked_head(spec: Spec, rows: Rows, K: np.ndarray, Q: np.ndarray, V: np.ndarray,
                lam: float = 1.0) -> None:
    """A head restricted to scratchpad keys for scratchpad queries (see module docstring)."""
    D = spec.D
    one, scr = rows["one"][0], rows["scr"][0]
    k = row_vec(D, {one: 1.0, scr: -1.0})
    q = row_vec(D, {one: MASK / lam, scr: -2.0 * MASK / lam})
    spec.head(np.vstack([K, k]), np.vstack([Q, q]), V, lam)


@dataclass
class Block:
    """A function block: weights of ``len(layers)`` Eq. 1 layers over ``rows`` and ``s`` columns.

    ``const`` maps private row-block names to their values on the scratchpad columns ``(h, s)``.
    """

    name: str
    d: int
    s: int
    rows: Rows
    layers: list[Spec]
    const: dict[str, np.ndarray] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def n_heads(self) -> int:
        """Heads of the block (all layers; Theorem 2 counts ``h_i`` per block)."""
        return max((len(sp.heads) for sp in self.layers), default=0)

    @property
    def width(self) -> int:
        return self.rows.size

    def constant_rows(self) -> np.ndarray:
        """Indices of the rows that are never written (including ``one`` and ``scr``)."""
        out = [self.rows["one"], self.rows["scr"]] + [self.rows[k] for k in self.const]
        return np.concatenate(out)

    def initial(self, n_extra: int = 0) -> np.ndarray:
        """Block rows at rest: ``(r, s + n_extra)`` host array (inputs zero)."""
        X = np.zeros((self.rows.size, self.s + n_extra))
        X[self.rows["one"]] = 1.0
        X[self.rows["scr"], : self.s] = 1.0
        for k, v in self.const.items():
            X[self.rows[k], : self.s] = v
        return X


def frame(d: int, s: int, h_in: int | None = None, h_out: int | None = None) -> Rows:
    if s < 3 * d:
        raise TpcoreError(f"scratchpad s = {s} columns; a block of size d = {d} needs s >= 3d")
    rows = Rows()
    rows.add("one", 1)
    rows.add("scr", 1)
    rows.add("in", d if h_in is None else h_in)
    rows.add("out", d if h_out is None else h_out)
    return rows


def indicator(s: int, cols: range | list[int]) -> np.ndarray:
    v = np.zeros((1, s))
    v[0, list(cols)] = 1.0
    return v


def codes(s: int, L: int, where: dict[int, int]) -> np.ndarray:
    """``(L, s)`` rows holding the code ``p_code`` in column ``col`` for ``where = {col: code}``."""
    E = np.zeros((L, s))
    cols = list(where)
    E[:, cols] = encode_address([where[c] for c in cols], L)
    return E


def _shift_rows(rows: Rows, const: dict[str, np.ndarray], d: int, s: int, src0: int,
                dst0: int, tag: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Constant key/query code rows matching column ``src0 + j`` to column ``dst0 + j``."""
    L = address_bits(d)
    rows.add("kp" + tag, L)
    rows.add("qp" + tag, L)
    const["kp" + tag] = codes(s, L, {src0 + j: j for j in range(d)})
    const["qp" + tag] = codes(s, L, {dst0 + j: j for j in range(d)})
    return rows["kp" + tag], rows["qp" + tag]


def _shift_head(spec: Spec, rows: Rows, kp: np.ndarray, qp: np.ndarray, src: np.ndarray,
                dst: np.ndarray, lam: float, scale: float = 1.0) -> None:
    """Head moving rows ``src`` of the key columns to rows ``dst`` of the matching queries."""
    D = spec.D
    K, Q = select(D, kp), select(D, qp)
    V = np.zeros((D, D))
    V[dst, src] = scale
    masked_head(spec, rows, K, Q, V, lam)


def combine_block(d: int, s: int, alpha: float, beta: float, lam: float = 30.0,
                  name: str = "combine") -> Block:
    """``C = alpha A + beta B`` (add: 1, 1; sub: 1, -1; percentage: 0.01, 0). 2 layers, 1 head.

    Layer 1 (FF): ``g = alpha in`` on A columns, ``beta in`` on B columns.
    Layer 2: output column ``2d+j`` ties columns ``j`` and ``d+j`` (same code), weight 1/2 each,
    value ``2 g``: ``alpha a_j + beta b_j``.
    """
    rows = frame(d, s)
    const = {"isA": indicator(s, range(d)), "isB": indicator(s, range(d, 2 * d))}
    rows.add("isA", 1)
    rows.add("isB", 1)
    rows.add("g", d)
    L = address_bits(d)
    rows.add("kp", L)
    rows.add("qp", L)
    const["kp"] = codes(s, L, {**{j: j for j in range(d)}, **{d + j: j for j in range(d)}})
    const["qp"] = codes(s, L, {2 * d + j: j for j in range(d)})
    D = rows.size
    l1 = Spec(D)
    gated_copy(l1, rows["in"], rows["g"], row_vec(D, {rows["isA"][0]: 1.0}), scale=alpha)
    gated_copy(l1, rows["in"], rows["g"], row_vec(D, {rows["isB"][0]: 1.0}), scale=beta)
    l2 = Spec(D)
    _shift_head(l2, rows, rows["kp"], rows["qp"], rows["g"], rows["out"], lam, scale=2.0)
    return Block(name, d, s, rows, [l1, l2], const,
                 {"alpha": alpha, "beta": beta, "lam": lam})


def matmul_block(d: int, s: int, c: float = 1e-8, C: float = 30.0, lam: float = 30.0,
                 name: str = "mul", symmetric: bool = False) -> Block:
    """``C = A^T B`` by the linearised softmax (Lemma 7). 2 layers, 1 head (2 if symmetric).

    Layer 1: head with ``lam = 1``, keys ``[in; anc]``, queries ``[c in; C one]``: score
    ``c <m_i, m_k>`` for ``i < 2d`` and ``C`` on the ``n_a = s - 2d`` anchor columns. Values
    ``G e_i`` (``G = 2d + n_a e^C``, ``e_i`` the one-hot of input column ``i < d``) into ``P``, so
    ``P[i, k] = G e^{c z_ik} / Z_k ~ 1 + c z_ik``. FF: ``R = (P - scr) / c``.
    ``symmetric`` adds a head with ``-c`` into ``P2`` and takes ``R = (P - P2) / (2c)``: the
    Taylor error drops from ``c z^2 / 2`` to ``c^2 z^3 / 6`` (not in the paper).
    Layer 2: shift head, column ``d+j`` -> output column ``2d+j``: ``C[:, j] = A^T b_j``.
    """
    if not (0 < c and 0 < C < 700):
        raise TpcoreError(f"matmul constants c = {c}, C = {C}; expected c > 0 and 0 < C < 700")
    rows = frame(d, s)
    const: dict[str, np.ndarray] = {}
    rows.add("id", d)
    const["id"] = np.hstack([np.eye(d), np.zeros((d, s - d))])
    rows.add("anc", 1)
    n_a = s - 2 * d
    const["anc"] = indicator(s, range(2 * d, s))
    rows.add("P", d)
    if symmetric:
        rows.add("P2", d)
    rows.add("R", d)
    kp, qp = _shift_rows(rows, const, d, s, d, 2 * d)
    D = rows.size
    G = 2 * d + n_a * np.exp(C)
    l1 = Spec(D)
    K = select(D, np.concatenate([rows["in"], rows["anc"]]))
    M = np.zeros((d, D))
    for sign, dst in ((1.0, "P"), (-1.0, "P2"))[: 2 if symmetric else 1]:
        Q = np.vstack([select(D, rows["in"], scale=sign * c), row_vec(D, {rows["one"][0]: C})])
        V = np.zeros((D, D))
        V[rows[dst], rows["id"]] = G
        masked_head(l1, rows, K, Q, V, 1.0)
        M[np.arange(d), rows[dst]] = sign / (c * (2.0 if symmetric else 1.0))
    if not symmetric:
        M[:, rows["scr"][0]] = -1.0 / c
    linear_map(l1, M, rows["R"])
    l2 = Spec(D)
    _shift_head(l2, rows, kp, qp, rows["R"], rows["out"], lam)
    return Block(name, d, s, rows, [l1, l2], const,
                 {"c": c, "C": C, "lam": lam, "symmetric": symmetric})


def transpose_block(d: int, s: int, lam: float = 30.0, name: str = "transp") -> Block:
    """``C = A^T`` (Lemma 6 in 2 layers, 1 head each). Needs ``s >= 3d + d^2``.

    Vectorisation columns ``(i, j) -> 3d + i d + j``. Layer 1: head copies A's column ``j`` into
    ``cp`` of every column ``(i, j)``; FF puts ``cp[i]`` into ``tv[j]`` there (gate
    ``bi_i + pj_j - 1``), so column ``(i, j)`` holds ``A[i, j]`` in row ``j``. Layer 2: output
    column ``2d+i`` averages the ``d`` tied columns ``(i, .)`` with value ``d tv``: row ``i`` of A.
    """
    if s < 3 * d + d * d:
        raise TpcoreError(f"transpose needs s >= 3d + d^2 = {3 * d + d * d}; got s = {s}")
    rows = frame(d, s)
    const: dict[str, np.ndarray] = {}
    Ls = address_bits(d)
    vec = {3 * d + i * d + j: (i, j) for i in range(d) for j in range(d)}
    for nm, h in (("le", Ls), ("src", Ls), ("bi", d), ("pj", d), ("gk", Ls), ("gq", Ls),
                  ("cp", d), ("tv", d)):
        rows.add(nm, h)
    const["le"] = codes(s, Ls, {j: j for j in range(d)})
    const["src"] = codes(s, Ls, {col: j for col, (_, j) in vec.items()})
    const["gk"] = codes(s, Ls, {col: i for col, (i, _) in vec.items()})
    const["gq"] = codes(s, Ls, {2 * d + i: i for i in range(d)})
    bi, pj = np.zeros((d, s)), np.zeros((d, s))
    for col, (i, j) in vec.items():
        bi[i, col] = pj[j, col] = 1.0
    const["bi"], const["pj"] = bi, pj
    D = rows.size
    l1 = Spec(D)
    _shift_head(l1, rows, rows["le"], rows["src"], rows["in"], rows["cp"], lam)
    for i in range(d):
        for j in range(d):
            gate = row_vec(D, {rows["bi"][i]: 1.0, rows["pj"][j]: 1.0})
            gated_copy(l1, rows["cp"][[i]], rows["tv"][[j]], gate, gconst=-1.0)
    l2 = Spec(D)
    _shift_head(l2, rows, rows["gk"], rows["gq"], rows["tv"], rows["out"], lam, scale=float(d))
    return Block(name, d, s, rows, [l1, l2], const, {"lam": lam})


def diag_block(d: int, s: int, lam: float = 30.0, name: str = "diag") -> Block:
    """``C = diag(a)`` for a row vector ``A = a^T`` (1 x w); with ``f_mul`` it gives the
    element-wise product ``u * v = mul(diag(u), v)`` (not in the paper). 1 layer, 1 head:
    the head moves ``a_i`` from column ``i`` to output column ``2d+i``, the FF keeps it in row
    ``i`` only (gate: a one-hot row constant)."""
    rows = frame(d, s)
    const: dict[str, np.ndarray] = {}
    kp, qp = _shift_rows(rows, const, d, s, 0, 2 * d)
    rows.add("pos", d)
    rows.add("v", 1)
    const["pos"] = np.zeros((d, s))
    const["pos"][np.arange(d), 2 * d + np.arange(d)] = 1.0
    D = rows.size
    l1 = Spec(D)
    _shift_head(l1, rows, kp, qp, rows["in"][:1], rows["v"], lam)
    for r in range(d):
        gated_copy(l1, rows["v"], rows["out"][[r]], row_vec(D, {rows["pos"][r]: 1.0}))
    return Block(name, d, s, rows, [l1], const, {"lam": lam})


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


def sigmoid_block(d: int, s: int, fits: list[SigmoidFit], lam: float = 30.0,
                  name: str = "sigmoids") -> Block:
    """``f_j`` applied to every column of A, ``j`` chosen by the one-hot B = ``e_j`` (Lemma 5).

    ``fits[j]`` has ``m_j`` terms over ``d_x <= d`` inputs; heads ``max m_j`` (shorter fits are
    padded with zero terms). Output row 0 of column ``2d+k`` is ``f_j(A[:, k])``. 3 layers:
    FF split of A and B; ``m`` sigmoid heads (``lam = 1``, exact); shift head.
    """
    N = len(fits)
    if not 1 <= N <= d:
        raise TpcoreError(f"sigmoid block encodes N = {N} functions; expected 1 <= N <= d = {d}")
    dx = fits[0].a.shape[1]
    if dx > d or any(f.a.shape[1] != dx for f in fits):
        raise TpcoreError(f"every fit must take the same d_x <= d = {d} inputs")
    m = max(f.m for f in fits)
    rows = frame(d, s)
    const = {"isA": indicator(s, range(d)), "isB": indicator(s, [d])}
    for nm, h in (("isA", 1), ("isB", 1), ("xa", d), ("eb", N), ("y", 1)):
        rows.add(nm, h)
    kp, qp = _shift_rows(rows, const, d, s, 0, 2 * d)
    D = rows.size
    l1 = Spec(D)
    gated_copy(l1, rows["in"], rows["xa"], row_vec(D, {rows["isA"][0]: 1.0}))
    gated_copy(l1, rows["in"][:N], rows["eb"], row_vec(D, {rows["isB"][0]: 1.0}))
    l2 = Spec(D)
    shift = np.log(s - 1.0)
    for i in range(m):
        K = np.zeros((dx + 1, D))
        V = np.zeros((D, D))
        for j, f in enumerate(fits):
            if i < f.m:
                K[:dx, rows["eb"][j]] = f.a[i]
                K[dx, rows["eb"][j]] = f.b[i] + shift
                V[rows["y"][0], rows["eb"][j]] = f.c[i]
        Q = np.vstack([select(D, rows["xa"][:dx]),
                       row_vec(D, {rows["isA"][0]: 1.0})])
        masked_head(l2, rows, K, Q, V, 1.0)
    l3 = Spec(D)
    _shift_head(l3, rows, kp, qp, rows["y"], rows["out"][:1], lam)
    return Block(name, d, s, rows, [l1, l2, l3], const, {"m": m, "N": N, "dx": dx, "lam": lam})


def sigmoid_width_block(d: int, s: int, fit: SigmoidFit, C: float = 60.0, lam: float = 30.0,
                        name: str = "sigmoids_w") -> Block:
    """``f(x) = sum_i c_i sigma(a_i^T x + b_i)`` for the column ``x`` = column 0 of A with one
    head per layer, the ``m`` terms spread over ``m`` scratchpad columns (Corollary 6 with
    Lemma 18). Needs ``s >= 3d + m``; output row 0 of column ``2d``. 3 layers, 1 head each.

    Layer 1: every sigmoid column ``3d + i`` copies ``x`` (a shift head).
    Layer 2 (Lemma 18): keys = one-hot ``e_i`` of the sigmoid column, query row ``i`` =
    ``a_i^T x + b_i + log(s - m) - C (1 - e_i)``: column ``3d+i`` scores ``a_i^T x + b_i +
    log(s-m)`` on itself, ``-C`` on the other sigmoid columns and 0 on the ``s - m`` others, so its
    weight is ``sigma(a_i^T x + b_i)`` up to ``e^-C``; values ``c_i e_i`` into ``y``.
    Layer 3: output column ``2d`` averages the ``m`` tied sigmoid columns with value ``m y``.
    """
    m, dx = fit.m, fit.a.shape[1]
    if s < 3 * d + m or dx > d:
        raise TpcoreError(f"{name}: m = {m} terms and d_x = {dx} need s >= 3d + m = "
                          f"{3 * d + m} and d_x <= d = {d}; got s = {s}")
    rows = frame(d, s)
    sig = list(range(3 * d, 3 * d + m))
    L, code = 4, 15                              # all-ones codes: score gap 4 lam vs 0
    const = {"src": codes(s, L, {0: code}), "dst": codes(s, L, dict.fromkeys(sig, code)),
             "e": np.zeros((m, s)), "sum_q": codes(s, L, {2 * d: code})}
    const["e"][np.arange(m), sig] = 1.0
    for nm, h in (("src", L), ("dst", L), ("e", m), ("sum_q", L), ("x", dx), ("y", 1)):
        rows.add(nm, h)
    D = rows.size
    l1 = Spec(D)
    _shift_head(l1, rows, rows["src"], rows["dst"], rows["in"][:dx], rows["x"], lam)
    l2 = Spec(D)
    K = select(D, rows["e"])
    Q = np.zeros((m, D))
    Q[:, rows["x"]] = fit.a
    Q[:, rows["one"][0]] = fit.b + np.log(s - m) - C
    Q[np.arange(m), rows["e"]] = C
    V = np.zeros((D, D))
    V[rows["y"][0], rows["e"]] = fit.c
    masked_head(l2, rows, K, Q, V, 1.0)
    l3 = Spec(D)
    _shift_head(l3, rows, rows["dst"], rows["sum_q"], rows["y"], rows["out"][:1], lam,
                scale=float(m))
    return Block(name, d, s, rows, [l1, l2, l3], const,
                 {"m": m, "N": 1, "dx": dx, "lam": lam, "C": C, "width": True})


def block_input(block: Block, A: Any, B: Any | None = None, n_extra: int = 0,
                dtype: Any = np.float64) -> Any:
    """Block rows with ``A: (..., d_h, d_w)`` and ``B`` placed per the template, plus
    ``n_extra`` non-scratchpad zero columns. Returns ``(..., r, s + n_extra)`` on the backend."""
    xp = get_xp()
    A = to_host(A)
    batch = A.shape[:-2]
    X = np.broadcast_to(block.initial(n_extra), batch + (block.rows.size, block.s + n_extra))
    X = np.array(X, dtype=np.float64)
    d, inr = block.d, block.rows["in"]
    for M, col0 in ((A, 0), (B, d)):
        if M is None:
            continue
        M = np.asarray(to_host(M), dtype=np.float64)
        h, w = M.shape[-2:]
        if h > len(inr) or w > d:
            raise TpcoreError(f"{block.name}: operand of shape {h}x{w} exceeds the block's "
                              f"{len(inr)}x{d}")
        X[..., inr[0]:inr[0] + h, col0:col0 + w] = M
    return xp.asarray(X, dtype=dtype)


def run_block(block: Block, A: Any, B: Any | None = None, n_extra: int = 0, hard: bool = False,
              dtype: Any = np.float64, layers: list[Layer] | None = None) -> Any:
    """Run a block alone; returns its output columns ``(..., h_out, d)`` (backend array)."""
    X = block_input(block, A, B, n_extra, dtype)
    xp = get_xp()
    for lay in layers if layers is not None else block_layers(block, xp, dtype):
        X, _ = layer_forward(X, lay, hard=hard)
    d = block.d
    return X[..., block.rows["out"], 2 * d:3 * d]


def block_layers(block: Block, xp: Any = None, dtype: Any = np.float64) -> list[Layer]:
    """The block's layers as :class:`Layer` objects on ``xp``."""
    return [sp.layer(xp, dtype) for sp in block.layers]

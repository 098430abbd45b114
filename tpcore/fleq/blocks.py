"""FLEQ function blocks as explicit Eq. 1 weights (Giannou et al. 2023, §6-7, App. A.2-A.4, E).

A *function block* (Definition 1) is a short stack of Eq. 1 layers acting on ``s >= 3d`` scratchpad
columns. Its row space (``FunctionBlock.rows``) is

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
* ``pointer_block``  pointer arithmetic on instruction words (Algorithm 9's ``f_incr_pointer``).

Blocks with gated units take the gating constant ``gate`` (:data:`DEFAULT_GATE`). Weights are built
on the host with NumPy (host-only construction code, :mod:`tpcore.looped.weights`); ``run_block``
and the machine run them over the array module of the backend in float64 (or float32).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tpcore.backend import get_xp, to_host
from tpcore.errors import TpcoreError
from tpcore.fleq.adder import gated_adder, gated_snap
from tpcore.fleq.fits import SigmoidFit
from tpcore.fleq.program import FIELDS, field_heights
from tpcore.looped.encodings import address_bits, encode_address
from tpcore.looped.layer import Layer, layer_forward
from tpcore.looped.weights import (
    LayerBuilder,
    RowBlocks,
    gated_copy,
    linear_map,
    row_vec,
    select,
)

MASK = 1e4
"""Score magnitude separating scratchpad from non-scratchpad columns (e^-MASK = 0)."""
DEFAULT_GATE = 1e4
"""Default gating constant ``C`` of the gated identities (:mod:`tpcore.looped.weights`): values
gated must stay below it in magnitude; its round-off (about C * machine epsilon) is the floor of
every gated copy, so float32 wants a smaller one (e.g. 100)."""


def check_gate(C: float) -> float:
    """``C`` if it is a valid gating constant (``C > 0``), else a :class:`TpcoreError`."""
    if not C > 0:
        raise TpcoreError(f"gating constant {C}; expected C > 0")
    return float(C)


def masked_head(b: LayerBuilder, rows: RowBlocks, K: np.ndarray, Q: np.ndarray, V: np.ndarray,
                lam: float = 1.0) -> None:
    """A head restricted to scratchpad keys for scratchpad queries (see module docstring)."""
    D = b.d
    one, scr = rows["one"][0], rows["scr"][0]
    k = row_vec(D, {one: 1.0, scr: -1.0})
    q = row_vec(D, {one: MASK / lam, scr: -2.0 * MASK / lam})
    b.head(np.vstack([K, k]), np.vstack([Q, q]), V, lam)


@dataclass
class FunctionBlock:
    """A function block: weights of ``len(layers)`` Eq. 1 layers over ``rows`` and ``s`` columns.

    ``const`` maps private row-block names to their values on the scratchpad columns ``(h, s)``.
    """

    name: str
    d: int
    s: int
    rows: RowBlocks
    layers: list[LayerBuilder]
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
        """The block's rows at rest: ``(r, s + n_extra)`` host array (inputs zero)."""
        X = np.zeros((self.rows.size, self.s + n_extra))
        X[self.rows["one"]] = 1.0
        X[self.rows["scr"], : self.s] = 1.0
        for k, v in self.const.items():
            X[self.rows[k], : self.s] = v
        return X


def frame(d: int, s: int, h_in: int | None = None, h_out: int | None = None) -> RowBlocks:
    if s < 3 * d:
        raise TpcoreError(f"scratchpad s = {s} columns; a block of size d = {d} needs s >= 3d")
    rows = RowBlocks()
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


def _shift_rows(rows: RowBlocks, const: dict[str, np.ndarray], d: int, s: int, src0: int,
                dst0: int, tag: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Constant key/query code rows matching column ``src0 + j`` to column ``dst0 + j``."""
    L = address_bits(d)
    rows.add("kp" + tag, L)
    rows.add("qp" + tag, L)
    const["kp" + tag] = codes(s, L, {src0 + j: j for j in range(d)})
    const["qp" + tag] = codes(s, L, {dst0 + j: j for j in range(d)})
    return rows["kp" + tag], rows["qp" + tag]


def shift_head(b: LayerBuilder, rows: RowBlocks, kp: np.ndarray, qp: np.ndarray, src: np.ndarray,
               dst: np.ndarray, lam: float, scale: float = 1.0) -> None:
    """Head moving rows ``src`` of the key columns to rows ``dst`` of the matching queries."""
    D = b.d
    K, Q = select(D, kp), select(D, qp)
    V = np.zeros((D, D))
    V[dst, src] = scale
    masked_head(b, rows, K, Q, V, lam)


def combine_block(d: int, s: int, alpha: float, beta: float, lam: float = 30.0,
                  name: str = "combine", gate: float = DEFAULT_GATE) -> FunctionBlock:
    """``C = alpha A + beta B`` (add: 1, 1; sub: 1, -1; percentage: 0.01, 0). 2 layers, 1 head.

    Layer 1 (FF): ``g = alpha in`` on A columns, ``beta in`` on B columns.
    Layer 2: output column ``2d+j`` ties columns ``j`` and ``d+j`` (same code), weight 1/2 each,
    value ``2 g``: ``alpha a_j + beta b_j``.
    """
    G = check_gate(gate)
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
    l1 = LayerBuilder(D)
    gated_copy(l1, rows["in"], rows["g"], row_vec(D, {rows["isA"][0]: 1.0}), 0.0, G, alpha)
    gated_copy(l1, rows["in"], rows["g"], row_vec(D, {rows["isB"][0]: 1.0}), 0.0, G, beta)
    l2 = LayerBuilder(D)
    shift_head(l2, rows, rows["kp"], rows["qp"], rows["g"], rows["out"], lam, scale=2.0)
    return FunctionBlock(name, d, s, rows, [l1, l2], const,
                         {"alpha": alpha, "beta": beta, "lam": lam})


def matmul_block(d: int, s: int, c: float = 1e-8, C: float = 30.0, lam: float = 30.0,
                 name: str = "mul", symmetric: bool = False) -> FunctionBlock:
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
    l1 = LayerBuilder(D)
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
    l2 = LayerBuilder(D)
    shift_head(l2, rows, kp, qp, rows["R"], rows["out"], lam)
    return FunctionBlock(name, d, s, rows, [l1, l2], const,
                         {"c": c, "C": C, "lam": lam, "symmetric": symmetric})


def transpose_block(d: int, s: int, lam: float = 30.0, name: str = "transp",
                    gate: float = DEFAULT_GATE) -> FunctionBlock:
    """``C = A^T`` (Lemma 6 in 2 layers, 1 head each). Needs ``s >= 3d + d^2``.

    Vectorisation columns ``(i, j) -> 3d + i d + j``. Layer 1: head copies A's column ``j`` into
    ``cp`` of every column ``(i, j)``; FF puts ``cp[i]`` into ``tv[j]`` there (gate
    ``bi_i + pj_j - 1``), so column ``(i, j)`` holds ``A[i, j]`` in row ``j``. Layer 2: output
    column ``2d+i`` averages the ``d`` tied columns ``(i, .)`` with value ``d tv``: row ``i`` of A.
    """
    if s < 3 * d + d * d:
        raise TpcoreError(f"transpose needs s >= 3d + d^2 = {3 * d + d * d}; got s = {s}")
    G = check_gate(gate)
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
    l1 = LayerBuilder(D)
    shift_head(l1, rows, rows["le"], rows["src"], rows["in"], rows["cp"], lam)
    for i in range(d):
        for j in range(d):
            both = row_vec(D, {rows["bi"][i]: 1.0, rows["pj"][j]: 1.0})
            gated_copy(l1, rows["cp"][[i]], rows["tv"][[j]], both, -1.0, G)
    l2 = LayerBuilder(D)
    shift_head(l2, rows, rows["gk"], rows["gq"], rows["tv"], rows["out"], lam, scale=float(d))
    return FunctionBlock(name, d, s, rows, [l1, l2], const, {"lam": lam})


def diag_block(d: int, s: int, lam: float = 30.0, name: str = "diag",
               gate: float = DEFAULT_GATE) -> FunctionBlock:
    """``C = diag(a)`` for a row vector ``A = a^T`` (1 x w); with ``f_mul`` it gives the
    element-wise product ``u * v = mul(diag(u), v)`` (not in the paper). 1 layer, 1 head:
    the head moves ``a_i`` from column ``i`` to output column ``2d+i``, the FF keeps it in row
    ``i`` only (gate: a one-hot row constant)."""
    G = check_gate(gate)
    rows = frame(d, s)
    const: dict[str, np.ndarray] = {}
    kp, qp = _shift_rows(rows, const, d, s, 0, 2 * d)
    rows.add("pos", d)
    rows.add("v", 1)
    const["pos"] = np.zeros((d, s))
    const["pos"][np.arange(d), 2 * d + np.arange(d)] = 1.0
    D = rows.size
    l1 = LayerBuilder(D)
    shift_head(l1, rows, kp, qp, rows["in"][:1], rows["v"], lam)
    for r in range(d):
        gated_copy(l1, rows["v"], rows["out"][[r]], row_vec(D, {rows["pos"][r]: 1.0}), 0.0, G)
    return FunctionBlock(name, d, s, rows, [l1], const, {"lam": lam})


def sigmoid_block(d: int, s: int, fits: list[SigmoidFit], lam: float = 30.0,
                  name: str = "sigmoids", gate: float = DEFAULT_GATE) -> FunctionBlock:
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
    G = check_gate(gate)
    rows = frame(d, s)
    const = {"isA": indicator(s, range(d)), "isB": indicator(s, [d])}
    for nm, h in (("isA", 1), ("isB", 1), ("xa", d), ("eb", N), ("y", 1)):
        rows.add(nm, h)
    kp, qp = _shift_rows(rows, const, d, s, 0, 2 * d)
    D = rows.size
    l1 = LayerBuilder(D)
    gated_copy(l1, rows["in"], rows["xa"], row_vec(D, {rows["isA"][0]: 1.0}), 0.0, G)
    gated_copy(l1, rows["in"][:N], rows["eb"], row_vec(D, {rows["isB"][0]: 1.0}), 0.0, G)
    l2 = LayerBuilder(D)
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
    l3 = LayerBuilder(D)
    shift_head(l3, rows, kp, qp, rows["y"], rows["out"][:1], lam)
    return FunctionBlock(name, d, s, rows, [l1, l2, l3], const,
                         {"m": m, "N": N, "dx": dx, "lam": lam})


def sigmoid_width_block(d: int, s: int, fit: SigmoidFit, C: float = 60.0, lam: float = 30.0,
                        name: str = "sigmoids_w") -> FunctionBlock:
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
    l1 = LayerBuilder(D)
    shift_head(l1, rows, rows["src"], rows["dst"], rows["in"][:dx], rows["x"], lam)
    l2 = LayerBuilder(D)
    K = select(D, rows["e"])
    Q = np.zeros((m, D))
    Q[:, rows["x"]] = fit.a
    Q[:, rows["one"][0]] = fit.b + np.log(s - m) - C
    Q[np.arange(m), rows["e"]] = C
    V = np.zeros((D, D))
    V[rows["y"][0], rows["e"]] = fit.c
    masked_head(l2, rows, K, Q, V, 1.0)
    l3 = LayerBuilder(D)
    shift_head(l3, rows, rows["dst"], rows["sum_q"], rows["y"], rows["out"][:1], lam,
               scale=float(m))
    return FunctionBlock(name, d, s, rows, [l1, l2, l3], const,
                         {"m": m, "N": 1, "dx": dx, "lam": lam, "C": C, "width": True})


def block_input(block: FunctionBlock, A: Any, B: Any | None = None, n_extra: int = 0,
                dtype: Any = np.float64) -> Any:
    """The block's rows with ``A: (..., d_h, d_w)`` and ``B`` placed per the template, plus
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


def run_block(block: FunctionBlock, A: Any, B: Any | None = None, n_extra: int = 0,
              hard: bool = False, dtype: Any = np.float64,
              layers: list[Layer] | None = None) -> Any:
    """Run a block alone; returns its output columns ``(..., h_out, d)`` (backend array)."""
    X = block_input(block, A, B, n_extra, dtype)
    xp = get_xp()
    for lay in layers if layers is not None else block_layers(block, xp, dtype):
        X, _ = layer_forward(X, lay, hard=hard)
    d = block.d
    return X[..., block.rows["out"], 2 * d:3 * d]


def block_layers(block: FunctionBlock, xp: Any = None, dtype: Any = np.float64) -> list[Layer]:
    """The block's layers as :class:`Layer` objects on ``xp``."""
    return [sp.layer(xp, dtype) for sp in block.layers]


def pointer_block(d: int, s: int, L: int, Lm: int, lam: float = 30.0, name: str = "ptr",
                  gate: float = DEFAULT_GATE) -> FunctionBlock:
    """Pointer arithmetic on code cells: C = A with fields ``a b c`` advanced by those of B
    (``mod 2^L``): ``f_incr_pointer`` / ``f_reset_pointer`` of Algorithm 9. 2 layers, 1 head.

    Works on the ``instr`` part of cells (``h_in`` = instruction height for address width ``L``
    and ``Lm`` function bits; ``tpcore.fleq.machine.build_machine`` rebuilds it for the
    machine's ``L, Lm``).
    Layer 1 (FF) splits A (column 0) and B (column d); layer 2's head ties columns 0 and d at
    output column 2d (values doubled), its FF adds the fields with Lemma 16 and copies the rest
    (bits snapped to +-1, so rewritten instructions stay exact).
    """
    G = check_gate(gate)
    hs = field_heights(L, Lm)
    H = sum(hs.values())
    rows = frame(d, s, h_in=H, h_out=H)
    const = {"isA": indicator(s, [0]), "isB": indicator(s, [d]), "isC": indicator(s, [2 * d])}
    for nm, h in (("isA", 1), ("isB", 1), ("isC", 1), ("ra", H), ("rb", H), ("ga", H),
                  ("gb", H), ("kp", 1), ("qp", 1)):
        rows.add(nm, h)
    const["kp"] = codes(s, 1, {0: 1, d: 1})
    const["qp"] = codes(s, 1, {2 * d: 1})
    D = rows.size
    l1 = LayerBuilder(D)
    gated_copy(l1, rows["in"], rows["ra"], row_vec(D, {rows["isA"][0]: 1.0}), 0.0, G)
    gated_copy(l1, rows["in"], rows["rb"], row_vec(D, {rows["isB"][0]: 1.0}), 0.0, G)
    l2 = LayerBuilder(D)
    V = np.zeros((D, D))
    V[rows["ga"], rows["ra"]] = 2.0
    V[rows["gb"], rows["rb"]] = 2.0
    masked_head(l2, rows, select(D, rows["kp"]), select(D, rows["qp"]), V, lam)
    off = np.cumsum([0] + list(hs.values()))
    part = {f: np.arange(off[i], off[i + 1]) for i, f in enumerate(FIELDS)}
    at_c = row_vec(D, {rows["isC"][0]: 1.0})
    for f in FIELDS:
        ga, out = rows["ga"][part[f]], rows["out"][part[f]]
        if f in ("a", "b", "c"):
            gated_adder(l2, ga, rows["gb"][part[f]], 0, out, at_c, 0.0, G)
        elif f in ("m", "flag", "p"):
            gated_snap(l2, ga, out, at_c, 0.0, G)
        else:
            gated_copy(l2, ga, out, at_c, 0.0, G)
    return FunctionBlock(name, d, s, rows, [l1, l2], const, {"cell": "code", "lam": lam})

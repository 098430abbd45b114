"""Hierarchical filtering: a random tree grammar and its k-filtered sequence sampler.

Host-only data generation (NumPy directly, like every data generator).

Generative model (binary tree of depth ``l``, one vocabulary of ``q`` symbols at every node):

* root ``x_0 ~ p0`` (uniform);
* every node ``a`` emits its ordered children pair ``(b, c)`` with probability ``M[a, b, c]``;
  the supports do not overlap (each pair has exactly one parent), so a full tree is recovered
  deterministically from its ``2**l`` leaves;
* ``k``-filtering (``0 <= k <= l``): the ``2**k`` nodes of level ``k`` are drawn independently
  given the root, node ``j`` from its path matrix ``Q_j = M^{s_0} ... M^{s_{k-1}}`` (``s_m`` the
  turn L/R at level ``m``: the bits of ``j``, most significant first), where
  ``M^L[a, b] = sum_c M[a, b, c]`` and ``M^R[a, c] = sum_b M[a, b, c]``; below level ``k`` the
  tree grows with ``M``. ``k = 0`` is the full model and ``k = l`` draws every leaf i.i.d.
  given the root.

Trees are stored level by level: level ``m`` holds ``2**m`` nodes, node ``j`` has children
``2j`` and ``2j + 1`` at level ``m + 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tpcore.backend import xp_of
from tpcore.errors import TpcoreError
from tpcore.limits import check_memory


@dataclass(frozen=True)
class Grammar:
    """A binary tree grammar: ``M: (q, q, q)`` with ``M[a].sum() == 1``, root prior ``p0: (q,)``."""

    M: np.ndarray
    p0: np.ndarray

    @property
    def q(self) -> int:
        return int(self.M.shape[0])

    @property
    def left(self) -> np.ndarray:
        """``M^L[a, b] = sum_c M[a, b, c]``: (q, q)."""
        return self.M.sum(axis=2)

    @property
    def right(self) -> np.ndarray:
        """``M^R[a, c] = sum_b M[a, b, c]``: (q, q)."""
        return self.M.sum(axis=1)

    def parents(self) -> np.ndarray:
        """``parent[b, c]``: the unique parent of the pair (b, c), or -1 when none or several."""
        support = self.M > 0
        count = support.sum(axis=0)
        return np.where(count == 1, support.argmax(axis=0), -1)


def _check_int(name: str, value: int, low: int, high: int | None = None) -> int:
    if int(value) != value or value < low or (high is not None and value > high):
        bound = f"in {low}..{high}" if high is not None else f">= {low}"
        raise TpcoreError(f"{name}={value!r} is invalid; expected an integer {bound}")
    return int(value)


def memory_estimate(q: int, l: int = 1, n: int = 0, k: int = 0) -> int:
    """Bytes of the largest arrays of drawing a grammar over ``q`` symbols and sampling ``n``
    trees of depth ``l`` filtered at ``k`` (float64; a bound): three ``(q, q, q)`` arrays; the
    path matrices and their CDFs ``(2**k, q, q)``; the children draws of the last level, a
    ``(n, 2**(l-1), q*q)`` CDF gather and its comparison (9 bytes an entry); the levels and
    uniforms, 24 bytes a node; the level-k draws ``(n, 2**k, q)``."""
    return (24 * q**3 + 16 * 2**k * q * q + 9 * n * 2 ** (l - 1) * q * q
            + 24 * n * 2 ** (l + 1) + 9 * n * 2**k * q)


def random_grammar(q: int = 4, sigma: float = 1.0, seed: int = 0,
                   paper_grammar: bool = False) -> Grammar:
    """Draw a grammar from the random ensemble (the paper's Appendix A).

    The q^2 ordered pairs are partitioned into q sets ``O_a`` of q pairs each (shuffled), and
    ``M[a, b, c] = softmax over (b, c) in O_a of sigma * xi_abc``, ``xi ~ N(0, 1)``; zero off the
    support. ``paper_grammar=True`` follows the paper's code operation by operation with
    NumPy's legacy ``RandomState(seed)`` stream: shuffle the rows of the lexicographic pair
    list, give parent ``a`` the rows ``a*q .. (a+1)*q - 1``, draw one normal per allowed entry
    in that order. The paper's grammar is ``random_grammar(4, 1.0, seed=0,
    paper_grammar=True)``. Otherwise a ``numpy.random.default_rng(seed)`` stream is used.
    """
    q = _check_int("q", q, 2)
    if not (math.isfinite(sigma) and sigma >= 0):
        raise TpcoreError(f"sigma={sigma!r} is invalid; expected a finite number >= 0")
    seed = _check_int("seed", seed, 0, 2**32 - 1 if paper_grammar else None)
    check_memory(memory_estimate(q), f"a grammar with q={q} symbols")
    pairs = np.array([(b, c) for b in range(q) for c in range(q)])
    if paper_grammar:
        rs = np.random.RandomState(seed)  # noqa: NPY002 - the paper's code uses this stream
        rs.shuffle(pairs)
        xi = np.array([rs.randn() for _ in range(q * q)])
    else:
        gen = np.random.default_rng(seed)
        pairs = pairs[gen.permutation(q * q)]
        xi = gen.standard_normal(q * q)
    logits = np.full((q, q, q), -np.inf)
    parent = np.repeat(np.arange(q), q)
    logits[parent, pairs[:, 0], pairs[:, 1]] = sigma * xi
    w = np.exp(logits - logits.max(axis=(1, 2), keepdims=True))
    return Grammar(M=w / w.sum(axis=(1, 2), keepdims=True), p0=np.full(q, 1.0 / q))


def path_bits(k: int) -> np.ndarray:
    """``bits[j, m]``: the turn (0 = L, 1 = R) at level ``m`` on the path to level-k node j:
    (2**k, k)."""
    j = np.arange(2**k)
    return (j[:, None] >> (k - 1 - np.arange(k))[None, :]) & 1


def path_matrices(M: np.ndarray, k: int) -> np.ndarray:
    """``Q[j] = M^{s_0} @ ... @ M^{s_{k-1}}``, ``Q[j][a, b] = P(x_j = b | x_0 = a)``:
    (2**k, q, q). ``k = 0`` gives the identity (the root is its own level-0 node).

    Works on any array module (``M`` may be a CuPy array).
    """
    xp = xp_of(M)
    q = M.shape[0]
    Q = xp.broadcast_to(xp.eye(q, dtype=M.dtype), (1, q, q))
    turns = xp.stack([M.sum(axis=2), M.sum(axis=1)])
    for _ in range(k):
        Q = xp.einsum("jab,tbc->jtac", Q, turns).reshape(-1, q, q)
    return Q


def _draw(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw: ``cdf: (..., K)`` rows, ``u: (...)`` uniforms -> indices (...)."""
    return np.minimum((u[..., None] >= cdf).sum(axis=-1), cdf.shape[-1] - 1)


@dataclass(frozen=True)
class Trees:
    """Samples of the filtered model: ``root: (n,)``, ``leaves: (n, 2**l)`` and, when kept,
    ``levels[m]: (n, 2**m)`` for m = 0..l (``levels[0]`` is the root, ``levels[l]`` the leaves;
    above level k the nodes are the deterministic parse of level k, the probing labels)."""

    root: np.ndarray
    leaves: np.ndarray
    levels: tuple[np.ndarray, ...] | None = None


def parse_levels(grammar: Grammar, leaves: np.ndarray) -> tuple[np.ndarray, ...]:
    """Parse leaves ``(n, 2**l)`` bottom-up with the unique parent of every pair; returns
    ``levels[m]: (n, 2**m)``, m = 0..l. Needs non-overlapping supports."""
    parent = grammar.parents()
    if (parent < 0).any():
        raise TpcoreError("grammar has pairs without a unique parent; cannot parse leaves")
    levels = [np.asarray(leaves)]
    while levels[0].shape[1] > 1:
        x = levels[0]
        levels.insert(0, parent[x[:, 0::2], x[:, 1::2]].astype(x.dtype))
    return tuple(levels)


def sample_trees(grammar: Grammar, n: int, l: int, k: int = 0, seed: int = 0,
                 keep_levels: bool = False) -> Trees:
    """Draw ``n`` sequences of the k-filtered model of depth ``l`` (vectorised over samples).

    Levels above ``k`` in ``levels`` (when ``keep_levels``) are the parse of level k, i.e. the
    ancestors a parser would assign; with ``k = 0`` they are the generated nodes themselves.
    """
    n = _check_int("n", n, 1)
    l = _check_int("l", l, 1)
    k = _check_int("k", k, 0, l)
    q = grammar.q
    check_memory(memory_estimate(q, l, n, k), f"{n} trees of depth l={l} (2**l leaves) over "
                 f"q={q} symbols, filtered at k={k}")
    gen = np.random.default_rng(seed)
    root = _draw(np.cumsum(grammar.p0), gen.random(n))
    Q = path_matrices(grammar.M, k)
    cdf_q = np.cumsum(Q, axis=2)  # (2**k, q, q)
    x = _draw(cdf_q[np.arange(2**k)[None, :], root[:, None]], gen.random((n, 2**k)))
    levels = [x]
    cdf_m = np.cumsum(grammar.M.reshape(q, q * q), axis=1)
    for _ in range(k, l):
        pair = _draw(cdf_m[x], gen.random(x.shape))
        x = np.stack([pair // q, pair % q], axis=2).reshape(n, -1)
        levels.append(x)
    dtype = np.int8 if q <= 127 else np.int64
    leaves = x.astype(dtype)
    if not keep_levels:
        return Trees(root=root.astype(dtype), leaves=leaves)
    below = tuple(v.astype(dtype) for v in levels)
    above = parse_levels(grammar, below[0])[:-1] if k > 0 else ()
    if k > 0:
        above = (root.astype(dtype)[:, None],) + above[1:]
    return Trees(root=root.astype(dtype), leaves=leaves, levels=above + below)


def uniform_sequences(n: int, l: int, q: int, seed: int = 0) -> np.ndarray:
    """``n`` uniformly random sequences of ``2**l`` symbols, the out-of-sample inputs:
    (n, 2**l)."""
    n, l = _check_int("n", n, 1), _check_int("l", l, 1)
    check_memory(9 * n * 2**l, f"{n} uniform sequences of 2**{l} symbols")
    gen = np.random.default_rng(seed)
    return gen.integers(0, q, size=(n, 2**l)).astype(np.int8)

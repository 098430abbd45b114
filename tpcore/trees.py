"""The filtered tree grammar of "hierarchical filtering" and exact belief propagation on it, one
call each: :func:`grammar` draws a grammar (the paper's by default), :func:`sample` draws
k-filtered sequences, :func:`bp` gives the exact BP_k marginals of one sequence whose masked
leaves are written ``?``, :func:`bp_batch` those of many. ``tpcore trees sample|bp`` print what
these return.

The machinery is :mod:`tpcore.tasks.trees` (grammar, sampling) and :mod:`tpcore.bp` (BP and its
backward); this module only puts it together. Host-only code (NumPy).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import numpy as np

from tpcore.bp import BPResult, belief_propagation, evidence_from_leaves
from tpcore.errors import TpcoreError
from tpcore.tasks.trees import Grammar, Trees, random_grammar, sample_trees

__all__ = ["MASK_SYMBOLS", "BPResult", "Grammar", "Trees", "bp", "bp_batch", "grammar",
           "parse_leaves", "sample"]

MASK_SYMBOLS = ("?", "_", "m")
"""How a masked leaf may be written in a text sequence."""


def grammar(q: int = 4, sigma: float = 1.0, seed: int = 0, paper: bool = True) -> Grammar:
    """A random grammar over ``q`` symbols with log-normal spread ``sigma``; ``paper``: drawn as
    the paper's code draws it (seed 0 gives the paper's grammar), else from NumPy's
    ``default_rng(seed)``."""
    return random_grammar(q, sigma, seed, paper_grammar=paper)


def _paper() -> Grammar:
    """The paper's grammar (q = 4, sigma = 1, seed 0)."""
    return random_grammar(4, 1.0, 0, paper_grammar=True)


def sample(n: int = 10, l: int = 4, k: int = 0, *, grammar: Grammar | None = None,
           seed: int = 0, levels: bool = False) -> Trees:
    """``n`` sequences of ``2**l`` leaves filtered at level ``k`` (``root: (n,)``,
    ``leaves: (n, 2**l)``; ``levels``: also every level, the probing labels), from ``grammar``
    (default: the paper's, :func:`grammar`)."""
    g = _paper() if grammar is None else grammar
    return sample_trees(g, n, l, k, seed=seed, keep_levels=levels)


def parse_leaves(leaves: str | Sequence[int | str | None], q: int) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    """One sequence as ``(symbols (1, N), masked (1, N))``: ``leaves`` is text such as
    ``"0 1 ? 3"`` (spaces or commas) or a list of symbols with ``None`` (or ``"?"``) for a
    masked leaf. Raises naming a symbol outside ``0..q-1``."""
    items = leaves.replace(",", " ").split() if isinstance(leaves, str) else list(leaves)
    out: list[int | None] = []
    for x in items:
        if x is None or x in MASK_SYMBOLS:
            out.append(None)
        elif isinstance(x, (int, np.integer)) and 0 <= x < q:
            out.append(int(x))
        elif isinstance(x, str) and x.isdigit() and int(x) < q:
            out.append(int(x))
        else:
            raise TpcoreError(f"leaf {x!r} is invalid; expected a symbol 0..{q - 1} or '?' for "
                              "a masked leaf")
    mask = np.array([[x is None for x in out]])
    return np.array([[0 if x is None else x for x in out]], dtype=np.int64), mask


def _check_size(n: int, k: int) -> None:
    """``n`` leaves make a binary tree (``2**l``, ``l >= 1``) that can be filtered at ``k``."""
    if n < 2 or n & (n - 1):
        raise TpcoreError(f"got {n} leaves; expected 2**l of them for a depth l >= 1")
    if not 0 <= k < n.bit_length():
        raise TpcoreError(f"k={k}; expected a filtering level 0..{n.bit_length() - 1} for "
                          f"{n} leaves")


def _run(g: Grammar, symbols: np.ndarray, masked: np.ndarray, k: int) -> BPResult:
    return belief_propagation(g.M, g.p0, evidence_from_leaves(symbols, g.q, masked), k,
                              use_kernel=importlib.util.find_spec("numba") is not None)


def bp(leaves: str | Sequence[int | str | None], k: int = 0, *,
       grammar: Grammar | None = None) -> BPResult:
    """Exact BP_k on one sequence of ``2**l`` leaves (:func:`parse_leaves`; ``?`` masks a leaf)
    under ``grammar`` (default: the paper's), assuming filtering at level ``k``: ``root: (q,)``
    and ``leaves: (N, q)`` posterior marginals, ``cavity: (N, q)`` each leaf predicted from all
    the others, ``log_z``: the log-likelihood of the observed leaves. Runs on the numba kernel
    where numba is installed, else on the NumPy reference (same results to rounding). Many
    sequences at once: :func:`bp_batch`."""
    g = _paper() if grammar is None else grammar
    symbols, mask = parse_leaves(leaves, g.q)
    _check_size(symbols.shape[1], k)
    res = _run(g, symbols, mask, k)
    return BPResult(root=res.root[0], leaves=res.leaves[0], cavity=res.cavity[0],
                    log_z=float(res.log_z[0]))


def bp_batch(leaves: np.ndarray | Sequence[str | Sequence[int | str | None]],
             masked: np.ndarray | None = None, k: int = 0, *,
             grammar: Grammar | None = None) -> BPResult:
    """Exact BP_k on ``B`` sequences of ``2**l`` leaves at once, as :func:`bp` on each:
    ``leaves`` an integer array ``(B, N)`` of symbols (``sample(...).leaves``) with ``masked
    (B, N)`` True at masked leaves (default none), or a list of sequences as :func:`bp` takes
    one. Returns ``root: (B, q)``, ``leaves, cavity: (B, N, q)``, ``log_z: (B,)``."""
    g = _paper() if grammar is None else grammar
    if isinstance(leaves, np.ndarray):
        symbols = leaves
        if symbols.ndim != 2 or symbols.dtype.kind not in "iu" or symbols.size == 0:
            raise TpcoreError(f"leaves of shape {symbols.shape} and dtype {symbols.dtype}; "
                              "expected integer symbols (B, N)")
        if symbols.min() < 0 or symbols.max() >= g.q:
            row, col = np.argwhere((symbols < 0) | (symbols >= g.q))[0]
            raise TpcoreError(f"leaf {int(symbols[row, col])} (sequence {row}, position {col}) "
                              f"is invalid; expected a symbol 0..{g.q - 1}")
        mask = np.zeros(symbols.shape, bool) if masked is None else np.asarray(masked)
        if mask.shape != symbols.shape or mask.dtype != bool:
            raise TpcoreError(f"masked has shape {mask.shape} and dtype {mask.dtype}; expected "
                              f"booleans {symbols.shape}")
    else:
        if masked is not None:
            raise TpcoreError("masked goes with an array of symbols; in a list of sequences "
                              "write a masked leaf '?'")
        parsed = [parse_leaves(x, g.q) for x in leaves]
        if not parsed:
            raise TpcoreError("bp_batch got no sequences")
        sizes = sorted({s.shape[1] for s, _ in parsed})
        if len(sizes) > 1:
            raise TpcoreError(f"sequences of {sizes} leaves; expected one length")
        symbols = np.concatenate([s for s, _ in parsed])
        mask = np.concatenate([m for _, m in parsed])
    _check_size(symbols.shape[1], k)
    return _run(g, symbols.astype(np.int64), mask, k)

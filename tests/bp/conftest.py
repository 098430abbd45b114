"""Shared helpers for the BP tests (as fixtures: tests import no modules from here): an exact
joint table of (root, leaves) built from the generative definition, independent of message
passing."""

from __future__ import annotations

import numpy as np
import pytest


def _joint_table(M: np.ndarray, p0: np.ndarray, l: int, k: int) -> np.ndarray:
    """``P(root, leaves)`` as an array ``(q,) + (q,) * 2**l`` by enumeration.

    Subtrees of height h give ``S_h[a, leaves...]`` (S_0 = identity,
    ``S_{h+1}[a, x, y] = sum_bc M[a,b,c] S_h[b, x] S_h[c, y]``); the level-k nodes are then
    drawn from the marginal of node j at level k of the *full* tree (computed from the full
    joint of that level, not from path matrices) independently given the root.
    """
    q = M.shape[0]
    S = np.eye(q)
    for _ in range(l - k):
        S = np.einsum("abc,bx,cy->axy", M, S.reshape(q, -1), S.reshape(q, -1)).reshape(q, -1)
    # joint of the 2**k level-k nodes given the root in the full tree, then its marginals
    F = np.eye(q)
    for _ in range(k):
        F = np.einsum("abc,bx,cy->axy", M, F.reshape(q, -1), F.reshape(q, -1)).reshape(q, -1)
    J = 2**k
    F = F.reshape((q,) + (q,) * J)
    marg = [F.sum(axis=tuple(1 + i for i in range(J) if i != j)) for j in range(J)]
    T = p0.copy()
    for j in range(J):
        blk = np.einsum("ab,bx->ax", marg[j], S)  # (q, q**(2**(l-k)))
        T = (T[..., None] * blk.reshape((q,) + (1,) * (T.ndim - 1) + (-1,)))
    return T.reshape((q,) + (q,) * 2**l)


@pytest.fixture
def joint_table():
    """The enumeration ``joint_table(M, p0, l, k)`` above."""
    return _joint_table

"""The classifier of a Transformer Program, which reads every variable of the final stream:
:class:`StreamClassifier`."""

from __future__ import annotations

from types import ModuleType

import numpy as np

from tpcore.backend import Array, get_xp, matmul, xp_of
from tpcore.models.program import ops
from tpcore.models.program.discrete import host
from tpcore.models.program.stream import VarSpec
from tpcore.nn.module import Parameter


class StreamClassifier:
    """A linear classifier over the final streams ``x: (m, B, N, d)`` and ``xn: (p, B, N)``.

    ``w: (m d + p, C)``: rows ``W_m: (d, C)`` reading categorical variable ``m``, then one row
    ``w_q: (C,)`` per numerical variable ``q``; ``b: (C,)``; ``masked`` classes are never
    predicted.

    Forward -> ``logits: (B, N, C)``: ``b + sum_m X[m] W_m + sum_q Xn[q] w_q`` (one product per
    variable, so the stream is read in its own layout), ``-1e30`` at masked classes.
    Backward, ``dlogits`` (0 at masked classes) -> ``(dX, dXn)`` shaped like ``x`` and ``xn``:
    ``dX[m] = dlogits W_m^T``, ``dXn[q] = dlogits w_q``; ``dW_m = X[m]^T dlogits``,
    ``dw_q = Xn[q] dlogits``, ``db`` summed over tokens.
    """

    def __init__(self, w: Parameter, b: Parameter, masked: tuple[int, ...]):
        self.w, self.b, self.masked = w, b, list(masked)
        self._columns = xp_of(w.data).asarray(self.masked, dtype=np.int64)
        self.cache: tuple = ()

    def _masked_columns(self, xp: ModuleType) -> Array:
        """The masked classes as an index array of ``xp``, made with the model (a list would be
        copied from the host at every step, which a step captured as a CUDA graph cannot do, as
        would a number assigned through it: the values assigned are 0-d device arrays)."""
        if xp_of(self._columns) is not xp:
            self._columns = xp.asarray(self.masked, dtype=np.int64)
        return self._columns

    def forward(self, x: Array, xn: Array) -> Array:
        m, b, n, d = x.shape
        w = self.w.data
        logits = matmul(x.reshape(m, b * n, d), w[: m * d].reshape(m, d, -1)).sum(axis=0)
        logits += matmul(xn.reshape(xn.shape[0], -1).T, w[m * d:])
        logits += self.b.data
        logits = logits.reshape(b, n, -1)
        if self.masked:
            xp = xp_of(logits)
            logits[..., self._masked_columns(xp)] = xp.full((), ops.MASKED_LOGIT, logits.dtype)
        self.cache = (x, xn)
        return logits

    def backward(self, dlogits: Array) -> tuple[Array, Array]:
        x, xn = self.cache
        if self.masked:
            dlogits = dlogits.copy()
            xp = xp_of(dlogits)
            dlogits[..., self._masked_columns(xp)] = xp.zeros((), dlogits.dtype)
        m, b, n, d = x.shape
        w = self.w.data
        d2 = dlogits.reshape(b * n, -1)
        dw_cat = matmul(x.reshape(m, b * n, d).swapaxes(-1, -2), d2).reshape(m * d, -1)
        self.w.accumulate(get_xp().concatenate([dw_cat, matmul(xn.reshape(xn.shape[0], -1), d2)]))
        self.b.accumulate(d2.sum(axis=0))
        dx = matmul(d2, w[: m * d].reshape(m, d, -1).swapaxes(-1, -2)).reshape(x.shape)
        dxn = matmul(w[m * d:], d2.T).reshape(xn.shape)
        return dx, dxn

    def discrete(self, variables: list[VarSpec], width: int) -> dict[str, np.ndarray]:
        """Host float64 weights per variable: ``W_f[: width_f]`` for a categorical ``f``,
        ``w_f[None]: (1, C)`` for a numerical one (``width``: the stream's ``d``)."""
        w = host(self.w)
        m = sum(v.kind == "categorical" for v in variables)
        wc = w[: width * m].reshape(m, width, -1)
        return {v.name: (wc[v.slot, : v.width] if v.kind == "categorical"
                         else w[width * m + v.slot][None]) for v in variables}

"""The learned factored token embedding of a Transformer Program: :class:`FactoredEmbedding`
(for vocabularies too large for a one-hot ``tokens`` variable, ``n_embed_vars > 0``)."""

from __future__ import annotations

from tpcore.backend import Array, get_xp, scatter_add
from tpcore.models.program import ops
from tpcore.nn.module import Parameter


class FactoredEmbedding:
    """``E`` categorical variables ``embed_0 .. embed_{E-1}`` of ``k`` values each, looked up
    by token.

    ``table: (V, E, k)`` logits: one categorical distribution per token and variable.
    Forward, ``tokens: (B, N)`` -> ``(E, B, N, k)``: ``T = GumbelSoftmax(table + g; tau)``
    (one-hots of the argmax when ``tau`` is None), variable ``i`` at a token ``t`` is
    ``T[t, i]``. Backward, ``dout: (E, B, N, k)``: ``dT[v]`` sums ``dout`` over the positions
    holding token ``v``; ``dtable = GumbelSoftmax'(dT)``.
    """

    def __init__(self, table: Parameter):
        self.table = table
        self.cache: tuple = ()

    def forward(self, tokens: Array, noise: ops.Noise, tau: float | None) -> Array:
        t, table_cache = ops.sample(self.table.data, noise(self.table.shape), tau)
        self.cache = (tokens, table_cache)
        return t[tokens].transpose(2, 0, 1, 3)

    def backward(self, dout: Array) -> None:
        tokens, table_cache = self.cache
        e, b, n, k = dout.shape
        dt = dout.transpose(1, 2, 0, 3).reshape(b * n, e * k)
        table = get_xp().zeros((self.table.shape[0], e * k), dtype=dt.dtype)
        table = scatter_add(table, tokens.reshape(-1), dt)
        self.table.accumulate(ops.sample_backward(table.reshape(self.table.shape), table_cache))

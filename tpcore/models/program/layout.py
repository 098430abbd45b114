"""The packed layout of a layer's head read gates: :class:`AttnGateLayout`.

Every head reads its query and key, and a categorical head also its value, from the categorical
stream through a read gate (a relaxed one-hot over the variables). A layer keeps the gates of all
its heads as the rows of one parameter, ``attn_gates: (3 Hc + 2 Hn, m)``, which
:class:`~tpcore.models.program.heads.HeadReads` samples and applies as one product. The packing
is more than a speed trick, so it stays: it is what saved models store (``layers.{l}.attn_gates``),
the Gumbel noise of all those gates is one draw, and the gradient of the stream ``dX = pi^T dR``
is one sum over every head's rows (split by head kind, its additions would round differently
and a training run would not repeat to the bit). This module says which rows are which.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AttnGateLayout:
    """The rows of a layer's ``attn_gates``: the query, key and value gates of the ``cat_heads``
    categorical heads, then the query and key gates of the ``num_heads`` numerical heads (their
    value gates read the numerical stream: ``value_gates``)."""

    cat_heads: int
    num_heads: int

    @property
    def rows(self) -> int:
        return 3 * self.cat_heads + 2 * self.num_heads

    @property
    def cat_query(self) -> slice:
        return slice(0, self.cat_heads)

    @property
    def cat_key(self) -> slice:
        return slice(self.cat_heads, 2 * self.cat_heads)

    @property
    def cat_value(self) -> slice:
        return slice(2 * self.cat_heads, 3 * self.cat_heads)

    @property
    def num_query(self) -> slice:
        return slice(3 * self.cat_heads, 3 * self.cat_heads + self.num_heads)

    @property
    def num_key(self) -> slice:
        return slice(3 * self.cat_heads + self.num_heads, self.rows)

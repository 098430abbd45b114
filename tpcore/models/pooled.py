"""Sequence classification by mean pooling, wrapped around any per-token model.

``MeanPooled(inner)`` turns a model whose ``forward(tokens, pad, **kw)`` returns per-token logits
``z: (B, N, C)`` into a sequence classifier

    ``logits_b = sum_n w_bn z_bn``,  ``w_bn = keep_bn / sum_n keep_bn``  (``keep``: not padding).

Both the Transformer Program and the standard transformer end in a linear classifier
``z_bn = W h_bn + c`` over the final stream ``h``, so this is exactly the paper's readout (C.4):
average the final stream over the tokens, then apply the linear classifier,
``W (sum_n w_bn h_bn) + c``. Backward: ``dz_bn = w_bn dlogits_b``.
"""

from __future__ import annotations

from typing import Any

from tpcore.backend import Array, xp_of
from tpcore.nn.module import Module


def pool_weights(pad: Array | None, shape: tuple[int, int], xp: Any, dtype: Any) -> Array:
    """``w: (B, N)``: 1 / (number of non-pad tokens) at non-pad positions, 0 at padding."""
    keep = xp.ones(shape, dtype=dtype) if pad is None else (~pad).astype(dtype)
    return keep / xp.maximum(keep.sum(axis=1, keepdims=True), 1.0)


class MeanPooled(Module):
    """See the module docstring; ``inner`` keeps its parameters (names prefixed ``inner.``)."""

    def __init__(self, inner: Module):
        self.inner = inner
        self.config = inner.config
        self._w: Array = None

    def forward(self, tokens: Array, pad: Array | None = None, **kwargs: Any) -> Array:
        """``(B, C)`` logits for ``tokens: (B, N)``; ``kwargs`` go to the inner forward."""
        z = self.inner.forward(tokens, pad, **kwargs)
        xp = xp_of(z)
        pad = None if pad is None else xp.asarray(pad)
        self._w = pool_weights(pad, tokens.shape, xp, z.dtype)
        return (z * self._w[..., None]).sum(axis=1)

    def backward(self, dlogits: Array) -> None:
        """Accumulate the inner model's gradients from ``dlogits: (B, C)``."""
        self.inner.backward(dlogits[:, None, :] * self._w[..., None])

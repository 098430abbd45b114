"""Stateful layers over the functional pairs: each ``forward`` keeps its cache, each ``backward``
accumulates parameter gradients and returns the input gradient. One forward, then one backward."""

from __future__ import annotations

import math
from typing import Any

from tpcore.backend import Array, get_xp, xp_of
from tpcore.nn import attention as A
from tpcore.nn import functional as F
from tpcore.nn.hookpoints import NO_HOOKS, Hooks
from tpcore.nn.module import Module, Parameter


def init_normal(rng: Any, shape: tuple[int, ...], std: float, dtype: Any) -> Parameter:
    """A parameter drawn from ``N(0, std^2)`` with ``rng`` (a Generator of the active backend)."""
    return Parameter((rng.standard_normal(shape) * std).astype(dtype))


def zeros(shape: tuple[int, ...], dtype: Any) -> Parameter:
    return Parameter(get_xp().zeros(shape, dtype=dtype))


class Linear(Module):
    """``y = x W + b`` with ``W ~ N(0, 1/Din)``."""

    def __init__(self, d_in: int, d_out: int, rng: Any, dtype: Any, bias: bool = True):
        self.w = init_normal(rng, (d_in, d_out), 1 / math.sqrt(d_in), dtype)
        self.b = zeros((d_out,), dtype) if bias else None

    def forward(self, x: Array) -> Array:
        y, self._cache = F.linear_forward(x, self.w.data, None if self.b is None else self.b.data)
        return y

    def forward_gelu(self, x: Array) -> tuple[Array, Array]:
        """``gelu(x W + b)`` in one call (:func:`~tpcore.nn.functional.linear_gelu_forward`):
        the activation and the GELU's derivative (its cache); this layer keeps its own cache,
        so :meth:`backward` follows as after :meth:`forward`."""
        y, (self._cache, deriv) = F.linear_gelu_forward(
            x, self.w.data, None if self.b is None else self.b.data)
        return y, deriv

    def backward(self, dy: Array) -> Array:
        dx, dw, db = F.linear_backward(dy, self._cache)
        self.w.accumulate(dw)
        if self.b is not None:
            self.b.accumulate(db)
        return dx


class LayerNorm(Module):
    """Layer normalisation over the last axis with gain ``gamma`` (ones) and bias ``beta``."""

    def __init__(self, d: int, dtype: Any):
        self.gamma = Parameter(get_xp().ones((d,), dtype=dtype))
        self.beta = zeros((d,), dtype)

    def forward(self, x: Array) -> Array:
        y, self._cache = F.layer_norm_forward(x, self.gamma.data, self.beta.data)
        return y

    def backward(self, dy: Array) -> Array:
        dx, dg, db = F.layer_norm_backward(dy, self._cache)
        self.gamma.accumulate(dg)
        self.beta.accumulate(db)
        return dx


QUERIES = ("stream", "constant")
"""What an attention layer's queries are computed from (:class:`MultiHeadAttention`)."""


class MultiHeadAttention(Module):
    """Self-attention with ``n_heads`` heads; ``self.pattern`` holds the last ``(B, H, N, N)``.

    ``query``: ``"stream"`` (the standard ``q = x W_q + b_q``) or ``"constant"``, where every
    position's query is the learned bias alone, ``q = b_q`` (``(D,)``, the same at every position
    whatever its token): the layer has no ``wq`` parameter and runs with ``W_q = 0``, so the
    scores ``s_ij = b_q,h . k_j,h / sqrt(Dh)`` depend on the key only (and the mask). The
    initial draws of the other weights are those of the ``"stream"`` layer of the same ``rng``.
    """

    def __init__(self, d: int, n_heads: int, rng: Any, dtype: Any, bias: bool = True,
                 query: str = "stream"):
        if d % n_heads:
            raise ValueError(f"d_model {d} is not divisible by n_heads {n_heads}")
        if query not in QUERIES:
            raise ValueError(f"query {query!r} unknown; expected one of {QUERIES}")
        if query == "constant" and not bias:
            raise ValueError("a constant query is the query bias: it needs bias=True")
        self.n_heads = n_heads
        self.query = query
        std = 1 / math.sqrt(d)
        for c in "qkvo":
            setattr(self, f"w{c}", init_normal(rng, (d, d), std, dtype))
        for c in "qkvo":
            setattr(self, f"b{c}", zeros((d,), dtype) if bias else None)
        if query == "constant":
            del self.wq

    def arrays(self) -> dict[str, Array]:
        """The weights the layer computes with, by name (``wq``, ``bq``, ..., ``bo``): its
        parameters' arrays, and ``wq = 0`` for a constant query."""
        arrays = {n: p.data for n, p in vars(self).items() if isinstance(p, Parameter)}
        if self.query == "constant":
            arrays["wq"] = xp_of(arrays["wk"]).zeros_like(arrays["wk"])
        return arrays

    def forward(self, x: Array, mask: Array | None, hooks: Hooks = NO_HOOKS) -> Array:
        y, self._cache = A.mha_forward(x, self.arrays(), self.n_heads, mask, hooks)
        self.pattern = self._cache[0]
        return y

    def backward(self, dy: Array) -> Array:
        dx, grads = A.mha_backward(dy, self._cache)
        for name, g in grads.items():
            if name != "wq" or self.query == "stream":  # a constant query's W_q = 0 is fixed
                getattr(self, name).accumulate(g)
        return dx


class MLP(Module):
    """``y = act(x W1 + b1) W2 + b2`` with ``act`` GELU or ReLU; hook points ``hook_pre``
    (``x W1 + b1``) and ``hook_post`` (after ``act``)."""

    def __init__(self, d: int, d_hidden: int, rng: Any, dtype: Any, activation: str = "gelu"):
        if activation not in ("gelu", "relu"):
            raise ValueError(f"activation {activation!r} unknown; expected 'gelu' or 'relu'")
        self.fc1 = Linear(d, d_hidden, rng, dtype)
        self.fc2 = Linear(d_hidden, d, rng, dtype)
        self.activation = activation

    def forward(self, x: Array, hooks: Hooks = NO_HOOKS) -> Array:
        if self.activation == "gelu" and not hooks.wants("hook_pre"):
            h, self._act_cache = self.fc1.forward_gelu(x)
        else:
            act = F.gelu_forward if self.activation == "gelu" else F.relu_forward
            h, self._act_cache = act(hooks("hook_pre", self.fc1.forward(x)))
        self._hooks = hooks
        return self.fc2.forward(hooks("hook_post", h))

    def backward(self, dy: Array) -> Array:
        act_back = F.gelu_backward if self.activation == "gelu" else F.relu_backward
        dh = self._hooks.grad("hook_post", self.fc2.backward(dy))
        return self.fc1.backward(self._hooks.grad("hook_pre", act_back(dh, self._act_cache)))

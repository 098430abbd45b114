"""The attention heads of a Transformer Program layer, as components.

A layer's heads read the categorical stream ``X: (m, B, N, d)`` as it stands at the start of the
layer, every head's query and key (and a categorical head's value) through one packed gate
parameter (:class:`HeadReads`; :mod:`~tpcore.models.program.layout` says why it is packed), then

- :class:`CategoricalHeads` ``attn_{l}_{h}``: closest-match hard attention with a default to BOS,
  copying the categorical value of the attended key: a new categorical variable;
- :class:`NumericalHeads` ``num_attn_{l}_{h}``: ``sum_j S_ij value_j`` over the matching keys of
  a numerical value: a new numerical variable.

Each component holds the parameters it computes with; ``forward`` keeps what its ``backward``
needs in ``self.cache``; ``backward`` accumulates its parameters' gradients and returns the
gradients of its inputs. The steps themselves are the forward/backward pairs of
:mod:`~tpcore.models.program.ops` (where the formulas are), which fused kernels stand in for.
"""

from __future__ import annotations

import numpy as np

from tpcore.backend import Array
from tpcore.models.program import ops
from tpcore.models.program.discrete import DiscreteHead, host
from tpcore.models.program.layout import AttnGateLayout
from tpcore.models.program.stream import output_name, pattern_name
from tpcore.nn.hookpoints import Hooks
from tpcore.nn.module import Parameter


class HeadReads:
    """The read gates of every head of a layer: which variable each head's query, key and value
    read.

    ``gates: (3 Hc + 2 Hn, m)`` logits over the ``m`` categorical variables before the layer, rows
    as ``layout`` (:class:`AttnGateLayout`) orders them.

    Forward, ``x: (m, B, N, d)`` -> ``R: (3 Hc + 2 Hn, B, N, d)``:
    ``pi = GumbelSoftmax(gates + g; gate_tau)`` (one-hots of the argmax when ``gate_tau`` is
    None), ``R[r] = sum_m pi[r, m] X[m]``.
    Backward, ``dR`` -> ``dX = pi^T dR: (m, B, N, d)``; ``dgates = GumbelSoftmax'(dR X^T)``
    (``dR X^T`` summed over ``B, N, d``).
    """

    def __init__(self, gates: Parameter, layout: AttnGateLayout):
        self.gates, self.layout = gates, layout
        self.cache: tuple = ()

    def forward(self, x: Array, noise: ops.Noise, gate_tau: float | None) -> Array:
        pi, gates_cache = ops.sample(self.gates.data, noise(self.gates.shape), gate_tau)
        self.cache = (x, pi, gates_cache)
        return ops.read_forward(x, pi, hard=gate_tau is None)

    def backward(self, dr: Array) -> Array:
        x, pi, gates_cache = self.cache
        dx, dgates = ops.gated_read_backward(dr, x, pi, gates_cache)
        self.gates.accumulate(dgates)
        return dx

    def discrete(self) -> np.ndarray:
        """The variable each row reads after argmax: ``(3 Hc + 2 Hn,)`` slots."""
        return host(self.gates).argmax(axis=1)


class CategoricalHeads:
    """``Hc`` categorical heads ``names[h]`` (``attn_{l}_{h}``): each query attends the closest
    key whose value its predicate matches and copies that key's value.

    ``pred: (Hc, d, d)`` predicate logits, one categorical distribution per row: query value
    ``a`` matches key value ``b``.

    Forward, the reads ``q, k, v: (Hc, B, N, d)`` -> ``out: (Hc, B, N, d)``:
    ``P = GumbelSoftmax(pred + g; tau)``; ``S = (Q P) K^T``; a default score at key 0 (BOS)
    for rows where nothing matches; ``L = log(S' + 1e-20) + bias`` (``bias``: closest match
    preferred, ``-1e30`` at masked keys); the pattern ``A = GumbelSoftmax(L / sqrt(d); tau)`` over
    the keys (hook point ``attn_{l}_{h}.pattern``, ``(B, N, N)`` per head);
    ``out = A V`` (:func:`~tpcore.models.program.ops.cat_attention_forward`).
    Backward, ``dout: (Hc, B, N, d)`` -> ``(dq, dk, dv)`` shaped like the reads;
    ``dpred = GumbelSoftmax'(dP)``.
    """

    def __init__(self, pred: Parameter, names: list[str]):
        self.pred, self.names = pred, names
        self.patterns = [pattern_name(name) for name in names]
        self.cache: tuple = ()

    def forward(self, q: Array, k: Array, v: Array, mask: Array, bias: Array, noise: ops.Noise,
                tau: float | None, hooks: Hooks) -> Array:
        h, b, n, _ = q.shape
        p, pred_cache = ops.sample(self.pred.data, noise(self.pred.shape), tau)
        out, attn_cache = ops.cat_attention_forward(q, k, v, p, mask, bias, noise((h, b, n, n)),
                                                    tau, hooks, self.patterns)
        self.cache = (pred_cache, attn_cache)
        return out

    def backward(self, dout: Array) -> tuple[Array, Array, Array]:
        pred_cache, attn_cache = self.cache
        dq, dk, dv, dp = ops.cat_attention_backward(dout, attn_cache)
        self.pred.accumulate(ops.sample_backward(dp, pred_cache))
        return dq, dk, dv

    def discrete(self, layer: int, query: np.ndarray, key: np.ndarray, value: np.ndarray,
                 cat: list[str]) -> list[DiscreteHead]:
        """The heads after argmax, reading the categorical variables of slots ``query[h]``,
        ``key[h]``, ``value[h]`` (named by ``cat``)."""
        pred = host(self.pred).argmax(-1)
        return [DiscreteHead(name, "categorical", layer, cat[query[h]], cat[key[h]],
                             cat[value[h]], output_name(name), pred[h])
                for h, name in enumerate(self.names)]


class NumericalHeads:
    """``Hn`` numerical heads ``names[h]`` (``num_attn_{l}_{h}``): each query sums a numerical
    value over the keys its predicate matches.

    ``value_gates: (Hn, p)`` logits over the ``p`` numerical variables before the layer (which
    one each head sums); ``pred: (Hn, d, d)`` predicate logits as for :class:`CategoricalHeads`.

    Forward, the reads ``q, k: (Hn, B, N, d)`` and the numerical stream ``xn: (p, B, N)`` ->
    ``out: (Hn, B, N)``: ``pi = GumbelSoftmax(value_gates + g; gate_tau)``, ``v = pi Xn``;
    ``P = GumbelSoftmax(pred + g; tau)``; the pattern ``Sm = mask * (Q P) K^T`` (hook point
    ``num_attn_{l}_{h}.pattern``); ``out_i = sum_j Sm_ij v_j``
    (:func:`~tpcore.models.program.ops.num_attention_forward`).
    Backward, ``dout: (Hn, B, N)`` -> ``(dq, dk, dxn)``: the reads' gradients and
    ``dXn = pi^T dv: (p, B, N)``; ``dpred`` and ``dvalue_gates`` through the Gumbel-softmax.
    """

    def __init__(self, value_gates: Parameter, pred: Parameter, names: list[str]):
        self.value_gates, self.pred, self.names = value_gates, pred, names
        self.patterns = [pattern_name(name) for name in names]
        self.cache: tuple = ()

    def forward(self, q: Array, k: Array, xn: Array, mask: Array, noise: ops.Noise,
                tau: float | None, gate_tau: float | None, hooks: Hooks) -> Array:
        pi, gates_cache = ops.sample(self.value_gates.data, noise(self.value_gates.shape),
                                     gate_tau)
        v = ops.read_forward(xn, pi, hard=gate_tau is None)
        p, pred_cache = ops.sample(self.pred.data, noise(self.pred.shape), tau)
        out, attn_cache = ops.num_attention_forward(q, k, v, p, mask, hooks, self.patterns)
        self.cache = (xn, pi, gates_cache, pred_cache, attn_cache)
        return out

    def backward(self, dout: Array) -> tuple[Array, Array, Array]:
        xn, pi, gates_cache, pred_cache, attn_cache = self.cache
        dq, dk, dv, dp = ops.num_attention_backward(dout, attn_cache)
        self.pred.accumulate(ops.sample_backward(dp, pred_cache))
        dxn, dgates = ops.gated_read_backward(dv, xn, pi, gates_cache)
        self.value_gates.accumulate(dgates)
        return dq, dk, dxn

    def discrete(self, layer: int, query: np.ndarray, key: np.ndarray, cat: list[str],
                 num: list[str]) -> list[DiscreteHead]:
        """The heads after argmax, reading the categorical variables of slots ``query[h]``,
        ``key[h]`` (named by ``cat``) and the numerical variable their value gates pick (named
        by ``num``)."""
        value, pred = host(self.value_gates).argmax(axis=1), host(self.pred).argmax(-1)
        return [DiscreteHead(name, "numerical", layer, cat[query[h]], cat[key[h]],
                             num[value[h]], output_name(name), pred[h])
                for h, name in enumerate(self.names)]

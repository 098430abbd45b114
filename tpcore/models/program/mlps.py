"""The MLPs of a Transformer Program layer, as components.

A layer's MLPs read the stream after its heads. Each has two inputs, picked by read gates, one
ReLU layer of width ``D`` and a relaxed categorical output of ``k`` values (a new categorical
variable):

- :class:`CategoricalMlps` ``mlp_{l}_{i}``: two categorical inputs (one-hots of width ``d``);
- :class:`NumericalMlps` ``num_mlp_{l}_{i}``: two numerical inputs (scalars).

Both run ``M`` MLPs side by side on the ``T = B N`` tokens (:class:`Mlps`: the read, and
:func:`~tpcore.models.program.ops.mlp_forward` and its backward); they differ in how their two
reads make an input. As for the heads, ``forward`` keeps its cache in ``self.cache``, and
``backward`` accumulates the parameters' gradients and returns the gradient of the stream it
read.
"""

from __future__ import annotations

from tpcore.backend import Array
from tpcore.models.program import ops
from tpcore.models.program.discrete import DiscreteMlp, host
from tpcore.models.program.stream import output_name
from tpcore.nn.module import Parameter


class Mlps:
    """``M`` MLPs ``names[i]`` reading a stream ``s: (q, B, N, ...)`` of ``q`` variables.

    ``gates: (2 M, q)`` read-gate logits (the first inputs of all the MLPs, then the second
    ones); ``w1: (M, I, D)``, ``b1: (M, 1, D)``, ``w2: (M, D, k)``, ``b2: (M, 1, k)``.

    Forward, ``s`` -> ``y: (M, B, N, k)``: ``pi = GumbelSoftmax(gates + g; gate_tau)``,
    ``R = pi S``, laid out by the subclass as the inputs ``x: (M, T, I)`` (:meth:`inputs`);
    ``h = relu(x W1 + b1)``, ``y = GumbelSoftmax(h W2 + b2; tau)`` (argmax one-hots when ``tau``
    is None). Backward, ``dy`` -> ``dS`` shaped like ``s``: ``dz = GumbelSoftmax'(dy)``,
    ``dW2 = h^T dz``, ``dh = relu'(dz W2^T)``, ``dW1 = x^T dh``, ``dx = dh W1^T`` (biases: sums
    over tokens); ``dR`` from ``dx`` (:meth:`input_grads`); ``dS = pi^T dR`` and
    ``dgates = GumbelSoftmax'(dR S^T)``.
    """

    kind = ""

    def __init__(self, gates: Parameter, w1: Parameter, b1: Parameter, w2: Parameter,
                 b2: Parameter, names: list[str]):
        self.gates, self.w1, self.b1, self.w2, self.b2 = gates, w1, b1, w2, b2
        self.names = names
        self.cache: tuple = ()

    def inputs(self, r: Array) -> Array:
        """The reads ``R: (2 M, B, N, ...)`` as the MLPs' inputs ``x: (M, T, I)``."""
        raise NotImplementedError

    def input_grads(self, dx: Array, shape: tuple[int, ...]) -> Array:
        """:meth:`inputs` backward: ``dR`` of ``shape`` from ``dx: (M, T, I)``."""
        raise NotImplementedError

    def forward(self, s: Array, noise: ops.Noise, tau: float | None,
                gate_tau: float | None) -> Array:
        pi, gates_cache = ops.sample(self.gates.data, noise(self.gates.shape), gate_tau)
        x = self.inputs(ops.read_forward(s, pi, hard=gate_tau is None))
        m, t, _ = x.shape
        y, mlp_cache = ops.mlp_forward(x, self.w1.data, self.b1.data, self.w2.data,
                                       self.b2.data, noise((m, t, self.w2.shape[-1])), tau)
        self.cache = (s, pi, gates_cache, mlp_cache)
        return y.reshape(m, *s.shape[1:3], -1)

    def backward(self, dy: Array) -> Array:
        s, pi, gates_cache, mlp_cache = self.cache
        m, b, n, k = dy.shape
        dx, dw1, db1, dw2, db2 = ops.mlp_backward(dy.reshape(m, b * n, k), mlp_cache)
        for prm, g in ((self.w1, dw1), (self.b1, db1), (self.w2, dw2), (self.b2, db2)):
            prm.accumulate(g)
        ds, dgates = ops.gated_read_backward(self.input_grads(dx, (2 * m, *s.shape[1:])), s, pi,
                                             gates_cache)
        self.gates.accumulate(dgates)
        return ds

    def discrete(self, layer: int, names: list[str]) -> list[DiscreteMlp]:
        """The MLPs after argmax of their read gates, their inputs named by ``names`` (the
        stream's variables by slot); host float64 weights."""
        g, m = host(self.gates).argmax(axis=1), len(self.names)
        w1, b1, w2, b2 = (host(p) for p in (self.w1, self.b1, self.w2, self.b2))
        return [DiscreteMlp(name, self.kind, layer, (names[g[i]], names[g[m + i]]),
                            output_name(name), w1[i], b1[i, 0], w2[i], b2[i, 0])
                for i, name in enumerate(self.names)]


class CategoricalMlps(Mlps):
    """``Mc`` categorical MLPs (:class:`Mlps`) reading the categorical stream after the heads,
    ``s: (m, B, N, d)``: each MLP's input is the concatenation ``[a; b]`` of its two reads,
    ``I = 2 d``."""

    kind = "categorical"

    def inputs(self, r: Array) -> Array:
        """``(2 M, B, N, d)`` -> ``(M, B N, 2 d)``."""
        _, b, n, d = r.shape
        m = len(self.names)
        return r.reshape(2, m, b * n, d).transpose(1, 2, 0, 3).reshape(m, b * n, 2 * d)

    def input_grads(self, dx: Array, shape: tuple[int, ...]) -> Array:
        """``(M, B N, 2 d)`` -> ``(2 M, B, N, d)``."""
        m, t, d = len(self.names), dx.shape[1], shape[-1]
        return dx.reshape(m, t, 2, d).transpose(2, 0, 1, 3).reshape(shape)


class NumericalMlps(Mlps):
    """``Mn`` numerical MLPs (:class:`Mlps`) reading the numerical stream after the heads,
    ``s: (p, B, N)``: each MLP's input is its two reads ``[a, b]``, ``I = 2``."""

    kind = "numerical"

    def inputs(self, r: Array) -> Array:
        """``(2 M, B, N)`` -> ``(M, B N, 2)``."""
        _, b, n = r.shape
        return r.reshape(2, len(self.names), b * n).transpose(1, 2, 0).copy()

    def input_grads(self, dx: Array, shape: tuple[int, ...]) -> Array:
        """``(M, B N, 2)`` -> ``(2 M, B, N)``."""
        return dx.transpose(2, 0, 1).reshape(shape)

"""One layer of a Transformer Program: :class:`ProgramLayer`, its parameters and the loop over
its components (:mod:`~tpcore.models.program.heads`, :mod:`~tpcore.models.program.mlps`)."""

from __future__ import annotations

import math

import numpy as np

from tpcore.backend import Array, get_xp
from tpcore.models.program import ops
from tpcore.models.program.config import ProgramConfig
from tpcore.models.program.discrete import DiscreteHead, DiscreteMlp
from tpcore.models.program.heads import CategoricalHeads, HeadReads, NumericalHeads
from tpcore.models.program.mlps import CategoricalMlps, NumericalMlps
from tpcore.models.program.stream import HookPass, LayerVariables, module_names, through
from tpcore.nn.hookpoints import Hooks
from tpcore.nn.module import Module, Parameter


class ProgramLayer(Module):
    """Layer ``l`` (``index``): its heads read the stream as it stands at the start of the layer,
    its MLPs read it after the heads; each writes a new variable into the next free slot.

    The layer's attributes are its parameters under the names saved models use
    (``layers.{l}.attn_gates``, ...), in the order they are drawn; each component computes with
    the ones it is given (``m``, ``p``: the categorical and numerical variables before the
    layer; ``d`` the stream's width, ``k`` the MLPs' outputs, ``D = d_mlp``):

    - :class:`HeadReads` ``reads``: ``attn_gates: (3 Hc + 2 Hn, m)``;
    - :class:`NumericalHeads` ``num_heads``: ``value_gates: (Hn, p)``, ``num_pred: (Hn, d, d)``;
    - :class:`CategoricalHeads` ``cat_heads``: ``cat_pred: (Hc, d, d)``;
    - :class:`CategoricalMlps` ``cat_mlps``: ``mlp_gates: (2 Mc, m + Hc)``,
      ``mlp_w1: (Mc, 2 d, D)``, ``mlp_b1: (Mc, 1, D)``, ``mlp_w2: (Mc, D, k)``,
      ``mlp_b2: (Mc, 1, k)``;
    - :class:`NumericalMlps` ``num_mlps``: ``num_mlp_gates: (2 Mn, p + Hn)``,
      ``num_w1: (Mn, 2, D)``, ``num_b1: (Mn, 1, D)``, ``num_w2: (Mn, D, k)``,
      ``num_b2: (Mn, 1, k)``.
    """

    def __init__(self, cfg: ProgramConfig, index: int, m: int, p: int, gen: np.random.Generator,
                 hook_points: LayerVariables):
        xp, dt = get_xp(), cfg.dtype
        d, k, hc, hn, mc, mn = (cfg.width, cfg.out_k, cfg.n_cat_heads, cfg.n_num_heads,
                                cfg.n_cat_mlps, cfg.n_num_mlps)
        self.m, self.p = m, p

        def normal(*shape: int) -> Parameter:
            return Parameter(xp.asarray(gen.normal(0.0, cfg.init_std, shape), dtype=dt))

        def uniform(fan_in: int, *shape: int) -> Parameter:
            bound = 1.0 / math.sqrt(fan_in)
            return Parameter(xp.asarray(gen.uniform(-bound, bound, shape), dtype=dt))

        self.attn_gates = normal(cfg.attn_layout.rows, m)
        self.value_gates = normal(hn, p)
        self.cat_pred = normal(hc, d, d)
        self.num_pred = normal(hn, d, d)
        self.mlp_gates = normal(2 * mc, m + hc)
        self.num_mlp_gates = normal(2 * mn, p + hn)
        self.mlp_w1, self.mlp_b1 = uniform(2 * d, mc, 2 * d, cfg.d_mlp), uniform(2 * d, mc, 1,
                                                                                  cfg.d_mlp)
        self.mlp_w2, self.mlp_b2 = uniform(cfg.d_mlp, mc, cfg.d_mlp, k), uniform(cfg.d_mlp, mc,
                                                                                 1, k)
        self.num_w1, self.num_b1 = uniform(2, mn, 2, cfg.d_mlp), uniform(2, mn, 1, cfg.d_mlp)
        self.num_w2, self.num_b2 = uniform(cfg.d_mlp, mn, cfg.d_mlp, k), uniform(cfg.d_mlp, mn,
                                                                                 1, k)
        self.index, self.counts, self.k, self.rows = index, (hc, hn, mc, mn), k, cfg.attn_layout
        self.hook_points = hook_points
        self.reads = HeadReads(self.attn_gates, self.rows)
        self.cat_heads = CategoricalHeads(self.cat_pred, module_names("attn", index, hc))
        self.num_heads = NumericalHeads(self.value_gates, self.num_pred,
                                        module_names("num_attn", index, hn))
        self.cat_mlps = CategoricalMlps(self.mlp_gates, self.mlp_w1, self.mlp_b1, self.mlp_w2,
                                        self.mlp_b2, module_names("mlp", index, mc))
        self.num_mlps = NumericalMlps(self.num_mlp_gates, self.num_w1, self.num_b1, self.num_w2,
                                      self.num_b2, module_names("num_mlp", index, mn))

    def forward(self, x: Array, xn: Array, mask: Array, bias: Array, noise: ops.Noise,
                tau: float | None, gate_tau: float | None, hooks: Hooks) -> None:
        """Read ``x[:m]``, ``xn[:p]`` and write the layer's variables into the next slots of the
        streams ``x: (m_all, B, N, d)``, ``xn: (p_all, B, N)`` in place, each through its hook
        point. ``mask: (1 or B, N, N)`` True where a query may attend a key; ``bias`` the
        closest-match bias with ``-1e30`` at masked keys; ``tau``, ``gate_tau`` the
        temperatures of choices and of read gates (None: the discrete mode)."""
        (hc, hn, mc, mn), k, rows = self.counts, self.k, self.rows
        m, p = self.m, self.p
        r = self.reads.forward(x[:m], noise, gate_tau)
        if hc:
            x[m:m + hc] = self.cat_heads.forward(r[rows.cat_query], r[rows.cat_key],
                                                 r[rows.cat_value], mask, bias, noise, tau,
                                                 hooks)
        if hn:
            xn[p:p + hn] = self.num_heads.forward(r[rows.num_query], r[rows.num_key], xn[:p],
                                                  mask, noise, tau, gate_tau, hooks)
        through(hooks, x, xn, self.hook_points.heads)
        m, p = m + hc, p + hn
        if mc:
            x[m:m + mc, ..., :k] = self.cat_mlps.forward(x[:m], noise, tau, gate_tau)
        if mn:
            x[m + mc:m + mc + mn, ..., :k] = self.num_mlps.forward(xn[:p], noise, tau, gate_tau)
        through(hooks, x, xn, self.hook_points.mlps)
        through(hooks, x, xn, self.hook_points.entering)

    def backward(self, dx: Array, dxn: Array, grad: HookPass) -> None:
        """Reverse :meth:`forward`: read the gradients of the layer's outputs from the streams'
        gradients ``dx``, ``dxn`` and add the gradients of its inputs into them, in place
        (``grad``: the hooks' backward, ``hooks.grad``)."""
        (hc, hn, mc, mn), k, rows = self.counts, self.k, self.rows
        m, p = self.m, self.p
        ma, pa = m + hc, p + hn
        through(grad, dx, dxn, self.hook_points.entering)
        through(grad, dx, dxn, self.hook_points.mlps)
        if mn:
            dxn[:pa] += self.num_mlps.backward(dx[ma + mc:ma + mc + mn, ..., :k])
        if mc:
            dx[:ma] += self.cat_mlps.backward(dx[ma:ma + mc, ..., :k])
        through(grad, dx, dxn, self.hook_points.heads)
        dr = get_xp().empty((rows.rows, *dx.shape[1:]), dtype=dx.dtype)  # every row set below
        if hn:
            dr[rows.num_query], dr[rows.num_key], dxv = self.num_heads.backward(dxn[p:pa])
            dxn[:p] += dxv
        if hc:
            dr[rows.cat_query], dr[rows.cat_key], dr[rows.cat_value] = self.cat_heads.backward(
                dx[m:ma])
        dx[:m] += self.reads.backward(dr)

    def discrete(self, cat: list[str], num: list[str]) -> list[DiscreteHead | DiscreteMlp]:
        """The layer's modules after argmax, in execution order (categorical heads, numerical
        heads, categorical MLPs, numerical MLPs), reading the variables named by ``cat`` and
        ``num`` (the stream's, by slot)."""
        g, rows, li = self.reads.discrete(), self.rows, self.index
        return [*self.cat_heads.discrete(li, g[rows.cat_query], g[rows.cat_key],
                                         g[rows.cat_value], cat),
                *self.num_heads.discrete(li, g[rows.num_query], g[rows.num_key], cat, num),
                *self.cat_mlps.discrete(li, cat), *self.num_mlps.discrete(li, num)]

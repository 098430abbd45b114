"""Program IR in the model's names -> the weights of a :class:`ProgramModel` computing it exactly.

Every choice the discrete model makes by argmax gets a logit of ``margin`` (default
:data:`MARGIN`) where the program makes it and 0 elsewhere: each head's and MLP's read gates (the
variable's slot), each head's
predicate row (the key index its query value matches; an index no key value takes when it
matches nothing). Modules the program does not use (a layer has fewer modules of a kind than the
widest one) read slot 0 and reach nothing: the classifier reads the program's output only, with
weight ``margin`` from each of its values to that value's class, every other weight and bias 0.

MLPs compute their tables exactly, with ``margin`` between the chosen output's logit and any
other. A categorical MLP outputs its ``default`` (the table's most frequent entry) when no hidden
unit fires (its bias is ``margin``, a firing unit adds ``2 margin`` to its entry):

- categorical, one input ``a`` (read twice): a unit ``relu(x_a[u])`` for each value ``u`` whose
  entry is not the default;
- categorical, two inputs: per value ``u`` of the first input whose row is one output ``c``
  throughout, a unit ``relu(x_a[u])`` voting ``c`` (when ``c`` is not the default); per other
  entry ``(u, v)`` not the default, a unit ``relu(x_a[u] + x_b[v] - 1)``, which is 1 exactly when
  both hold;
- numerical: the table as a staircase along ``z = w . (a, b)``, for the first direction ``w``
  of ``(1, -1)``, ``(1, 1)``, ``(1, max a - min a + 1)`` (``(1, 0)`` with one input) along which
  the table is a function of ``z`` with the fewest steps (the last direction gives every pair of
  integers its own ``z``): over the sorted values ``z_1 < z_2 < ...``, the bias holds the
  output at ``z_1`` and each step ``z_t -> z_{t+1}`` where the output changes adds the pair
  ``(relu(z - z_t) - relu(z - z_{t+1})) / (z_{t+1} - z_t)``, which is 0 up to ``z_t`` and 1
  from ``z_{t+1}`` on, times ``margin (e_new - e_old)``.

``d_mlp`` is the most units an MLP needs. Host-side code: the weights are built in NumPy and
copied into the parameters.
"""

from __future__ import annotations

import numpy as np

from tpcore.backend import get_xp
from tpcore.errors import TpcoreError
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.programs.ir import Head, Mlp, Program
from tpcore.rasp.lower import Layout

MARGIN = 20.0
"""The default logit margin of every choice: far beyond Gumbel noise (standard deviation 1.28),
so that the relaxed model samples the compiled program nearly always."""
UNSCALED = ("mlp_w2", "num_w2")
"""The parameters the margin does not scale: the MLPs' output weights, which take it from their
hidden units (``relu(s u) = s relu(u)`` for ``s > 0``)."""

Units = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""An MLP's weights: hidden units ``w1: (I, U)``, ``b1: (U,)``, ``w2: (U, k)``, and the output
bias ``b2: (k,)``."""


def mlp_units(m: Mlp, ir: Program, d: int, k: int) -> Units:
    """The hidden units of ``m`` (module docstring); ``d``: the stream's width."""
    table, default = m.table, m.default
    votes: list[tuple[np.ndarray, float, int, float]] = []  # (w1 column, b1, output, weight)
    if m.kind == "categorical":
        if table.ndim == 1:
            for u, c in enumerate(table.tolist()):
                if c != default:
                    votes.append((_column(2 * d, [u]), 0.0, c, 2.0))
        else:
            for u, row in enumerate(table.tolist()):
                if len(set(row)) == 1:
                    if row[0] != default:
                        votes.append((_column(2 * d, [u]), 0.0, row[0], 2.0))
                    continue
                for v, c in enumerate(row):
                    if c != default:
                        votes.append((_column(2 * d, [u, d + v]), -1.0, c, 2.0))
    else:
        return _staircase(m, ir, k)
    n_in = 2 * d if m.kind == "categorical" else 2
    w1 = np.zeros((n_in, len(votes)))
    b1 = np.zeros(len(votes))
    w2 = np.zeros((len(votes), k))
    for i, (col, bias, c, weight) in enumerate(votes):
        w1[:, i], b1[i], w2[i, c] = col, bias, weight
    return w1, b1, w2, _bias(k, default)


def _bias(k: int, c: int) -> np.ndarray:
    """The output bias ``e_c``."""
    b2 = np.zeros(k)
    b2[c] = 1.0
    return b2


def _staircase(m: Mlp, ir: Program, k: int) -> Units:
    """A numerical MLP's units: the steps of its table along ``z = w . (a, b)``."""
    a = np.asarray(ir.variables[m.inputs[0]].values, dtype=np.float64)
    b = (np.asarray(ir.variables[m.inputs[1]].values, dtype=np.float64) if m.table.ndim == 2
         else np.zeros(1))
    best = None
    for w in _directions(a, m.table.ndim):
        z = (w[0] * a[:, None] + w[1] * b[None, :]).ravel()
        order = np.argsort(z, kind="stable")
        zs, out = z[order], m.table.reshape(a.size, -1).ravel()[order]
        same = zs[1:] == zs[:-1]
        if (out[1:][same] != out[:-1][same]).any():
            continue  # not a function of z
        steps = np.flatnonzero(~same & (out[1:] != out[:-1]))
        if best is None or len(steps) < len(best[3]):
            best = (w, zs, out, steps)
    if best is None:
        raise TpcoreError(f"{m.name}: no direction separates its inputs' values")
    w, zs, out, steps = best
    w1 = np.zeros((2, 2 * len(steps)))
    b1 = np.zeros(2 * len(steps))
    w2 = np.zeros((2 * len(steps), k))
    for i, t in enumerate(steps.tolist()):
        lo, hi = zs[t], zs[t + 1]
        w1[:, 2 * i: 2 * i + 2] = np.asarray(w)[:, None]
        b1[2 * i: 2 * i + 2] = (-lo, -hi)
        change = np.zeros(k)
        change[out[t + 1]] += 1 / (hi - lo)
        change[out[t]] -= 1 / (hi - lo)
        w2[2 * i], w2[2 * i + 1] = change, -change
    return w1, b1, w2, _bias(k, int(out[0]))


def _directions(a: np.ndarray, ndim: int) -> list[tuple[float, float]]:
    """Candidate directions ``w`` for :func:`_staircase`: ``(1, 0)`` for one input; for two,
    ``(1, -1)`` and ``(1, 1)`` (tables of a difference or a sum) and ``(1, lambda)`` with
    ``lambda = max a - min a + 1``, which gives every pair of integers its own ``z``."""
    if ndim == 1:
        return [(1.0, 0.0)]
    return [(1.0, -1.0), (1.0, 1.0), (1.0, float(a.max() - a.min() + 1))]


def _column(n: int, ones: list[int]) -> np.ndarray:
    col = np.zeros(n)
    col[ones] = 1.0
    return col


def build(ir: Program, lay: Layout, dtype: str = "float32", seed: int = 0,
          margin: float = MARGIN) -> ProgramModel:
    """The model computing ``ir`` (in the model's names, laid out as ``lay``), every choice by
    ``margin``."""
    d = max(ir.tokens.size, ir.max_len, lay.k)
    units = {m.name: mlp_units(m, ir, d, lay.k) for m in ir.modules if isinstance(m, Mlp)}
    cfg = ProgramConfig(
        vocab_size=ir.tokens.size, max_len=ir.max_len, n_classes=len(ir.classifier.classes),
        n_layers=lay.layers, n_cat_heads=lay.counts["attn"], n_num_heads=lay.counts["num_attn"],
        n_cat_mlps=lay.counts["mlp"], n_num_mlps=lay.counts["num_mlp"], k=lay.k,
        d_mlp=max([1] + [u[0].shape[1] for u in units.values()]), causal=ir.causal,
        dtype=dtype, seed=seed)
    model = ProgramModel(cfg)
    params = {name: np.zeros(p.shape) for name, p in model.named_parameters()}
    slots = {v.name: v.slot for v in model.variables}
    for m in ir.modules:
        layer, index = (int(x) for x in m.name.rsplit("_", 2)[1:])
        pre = f"layers.{layer}."
        if isinstance(m, Head):
            _set_head(params, pre, index, m, ir, slots, cfg, d)
        else:
            _set_mlp(params, pre, index, m, slots, cfg, units[m.name])
    out = ir.classifier.features[0]
    spec = next(v for v in model.variables if v.name == out)
    params["w_out"][spec.slot * d: spec.slot * d + ir.variables[out].size] = \
        ir.classifier.weights[out]
    xp = get_xp()
    for name, p in model.named_parameters():
        scale = 1.0 if name.rsplit(".", 1)[-1] in UNSCALED else margin
        p.data[...] = xp.asarray(scale * params[name], dtype=p.data.dtype)
    return model


def _set_head(params: dict[str, np.ndarray], pre: str, index: int, h: Head, ir: Program,
              slots: dict[str, int], cfg: ProgramConfig, d: int) -> None:
    rows = cfg.attn_layout
    gates = params[pre + "attn_gates"]
    if h.kind == "categorical":
        reads = ((rows.cat_query, h.query), (rows.cat_key, h.key), (rows.cat_value, h.value))
        pred = params[pre + "cat_pred"][index]
    else:
        reads = ((rows.num_query, h.query), (rows.num_key, h.key))
        params[pre + "value_gates"][index, slots[h.value]] = 1.0
        pred = params[pre + "num_pred"][index]
    for block, var in reads:
        gates[block.start + index, slots[var]] = 1.0
    nothing = d - 1  # no key value takes it: the layout makes d exceed such a key's values
    for q, k in enumerate(h.predicate.tolist()):
        pred[q, k if k >= 0 else nothing] = 1.0


def _set_mlp(params: dict[str, np.ndarray], pre: str, index: int, m: Mlp,
             slots: dict[str, int], cfg: ProgramConfig, units: Units) -> None:
    cat = m.kind == "categorical"
    gates = params[pre + ("mlp_gates" if cat else "num_mlp_gates")]
    count = cfg.n_cat_mlps if cat else cfg.n_num_mlps
    first, second = (m.inputs * 2)[:2]
    gates[index, slots[first]] = 1.0
    gates[count + index, slots[second]] = 1.0
    w1, b1, w2, b2 = units
    n = w1.shape[1]
    names = ("mlp_w1", "mlp_b1", "mlp_w2", "mlp_b2") if cat else ("num_w1", "num_b1", "num_w2",
                                                                  "num_b2")
    params[pre + names[0]][index, :, :n] = w1
    params[pre + names[1]][index, 0, :n] = b1
    params[pre + names[2]][index, :n] = w2
    params[pre + names[3]][index, 0] = b2

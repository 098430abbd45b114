"""Initialise parts of a Transformer Program model from a program IR (the paper's Table 5).

A program written by hand, decompiled or imported names its modules as the model does
(``attn_{l}_{h}``, ``num_attn_{l}_{h}``, ``mlp_{l}_{i}``, ``num_mlp_{l}_{i}``) and its variables
as the model's stream (``tokens``, ``positions``, ``ones``, ``attn_0_1_outputs``, ...). Each chosen
part sets logits so that the model's argmax is the program's choice, by a margin ``strength``:

- ``read``: the read gates. Each row of a head's query, key and value gates (and an MLP's two
  input gates; an MLP of one input reads it twice) becomes ``strength * e_slot``, where ``slot``
  is the variable's position among the variables the layer may read;
- ``predicate``: each query value ``a`` the program maps to key value ``b`` gets the predicate row
  ``strength * e_b`` (rows of queries that match nothing keep their random start);
- ``classifier``: the program's classifier weights and bias, copied.

A part can be limited to one module, ``attn_1_0.read`` or ``mlp_0_0.read``; a bare ``read`` or
``predicate`` means every module of the program. The MLPs' internal weights are never set.

Values are matched by label: ``tokens`` by the task's vocabulary, ``positions``, MLP outputs and
learned embeddings by their integer labels ``0 .. width - 1``, a head's output by its value
variable's labels. A program that does not fit the model (a module or variable the model lacks,
a read the layer cannot see, a label outside the model's values) is refused with one line naming
the mismatch. Host-side code: the new logits are copied into the parameters' arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpcore.backend import to_host, xp_of
from tpcore.errors import TpcoreError
from tpcore.models.program import ProgramModel, VarSpec
from tpcore.programs.ir import Classifier, Head, Mlp, Program

PARTS = ("read", "predicate", "classifier")
"""What :func:`init_from_program` can initialise."""
STRENGTH = 10.0
"""Default logit margin of an initialised choice (Gumbel noise has standard deviation 1.28)."""
MAX_STRENGTH = 1000.0
"""Largest logit margin: far beyond any Gumbel sample, and far below float32 overflow in the
softmax's sums (a margin of 1e308 turned the first loss into NaN)."""


def parse_parts(parts: Sequence[str]) -> list[tuple[str | None, str]]:
    """``["read", "attn_1_0.predicate"]`` -> ``[(None, "read"), ("attn_1_0", "predicate")]``,
    refusing unknown parts."""
    out = []
    for part in parts:
        module, _, what = part.rpartition(".")
        if what not in PARTS or (what == "classifier" and module):
            raise TpcoreError(f"init part {part!r}: expected one of {', '.join(PARTS)}, or "
                              "MODULE.read / MODULE.predicate")
        out.append((module or None, what))
    if not out:
        raise TpcoreError("no init parts given; expected some of " + ", ".join(PARTS))
    return out


class _Fit:
    """Where a program's modules and values sit in ``model``."""

    def __init__(self, model: ProgramModel, program: Program, vocab: Sequence[str]):
        self.model, self.program, self.vocab = model, program, list(vocab)
        self.specs: dict[str, VarSpec] = {v.name: v for v in model.variables}
        self.modules = {m.name: m for m in program.modules}
        for var in program.variables.values():
            spec = self.specs.get(var.name)
            if spec is not None and spec.kind != var.kind:
                raise TpcoreError(f"variable {var.name!r} is {var.kind} in the program and "
                                  f"{spec.kind} in the model")
            if spec is not None and var.kind == "categorical":
                for label in var.values:
                    self.value_index(var.name, label)

    def spec(self, name: str, where: str) -> VarSpec:
        if name not in self.specs:
            raise TpcoreError(f"{where} reads variable {name!r}, which the model does not have")
        return self.specs[name]

    def value_index(self, var: str, label: Any) -> int:
        """The model's one-hot index of ``label`` of the categorical variable ``var``."""
        spec = self.specs[var]
        module = self.modules.get(spec.source or "")
        if isinstance(module, Head):
            self.spec(module.value, module.name)
            return self.value_index(module.value, label)
        if var == "tokens":
            if label not in self.vocab:
                raise TpcoreError(f"token {label!r} of the program is not in the task's "
                                  f"vocabulary {self.vocab}")
            return self.vocab.index(label)
        if isinstance(label, bool) or not isinstance(label, (int, np.integer)) \
                or not 0 <= label < spec.width:
            raise TpcoreError(f"value {label!r} of {var!r}: the model's values are the integers "
                              f"0 .. {spec.width - 1}")
        return int(label)

    def layer_of(self, name: str) -> tuple[int, int]:
        """``(layer, index)`` of a module named ``attn_l_h`` / ``mlp_l_i`` (``num_`` too)."""
        parts = name.removeprefix("num_").split("_")
        if len(parts) != 3 or parts[0] not in ("attn", "mlp") or not all(
                p.isdigit() for p in parts[1:]):
            raise TpcoreError(f"program module {name!r} is not a model module (attn_L_H, "
                              "num_attn_L_H, mlp_L_I or num_mlp_L_I)")
        layer, index = int(parts[1]), int(parts[2])
        cfg = self.model.config
        count = {"attn": cfg.n_cat_heads, "num_attn": cfg.n_num_heads, "mlp": cfg.n_cat_mlps,
                 "num_mlp": cfg.n_num_mlps}[name.rsplit("_", 2)[0]]
        if layer >= cfg.n_layers or index >= count:
            raise TpcoreError(f"program module {name!r}: the model has {cfg.n_layers} layers "
                              f"and {count} such modules per layer")
        return layer, index

    def slot(self, var: str, kind: str, visible: int, where: str) -> int:
        """Slot of ``var`` in its stream, checking it is of ``kind`` and among the first
        ``visible`` variables a module of this layer can read."""
        spec = self.spec(var, where)
        if spec.kind != kind or spec.slot >= visible:
            raise TpcoreError(f"{where} reads {var!r}, which the model's {where} cannot read "
                              f"(a {kind} variable computed before it is needed)")
        return spec.slot


def _one_hot_row(width: int, index: int, strength: float) -> np.ndarray:
    row = np.zeros(width)
    row[index] = strength
    return row


def init_from_program(model: ProgramModel, program: Program, parts: Sequence[str],
                      vocab: Sequence[str], classes: Sequence[str] | None = None,
                      strength: float = STRENGTH) -> list[str]:
    """Set the chosen ``parts`` of ``model`` from ``program`` (see the module docstring) and
    return what was set, e.g. ``["attn_0_0.read", "attn_0_0.predicate"]``. ``vocab``: the
    task's token strings; ``classes``: its class labels (checked for ``classifier``).
    Everything is checked before any parameter changes."""
    fit = _Fit(model, program, vocab)
    wanted = parse_parts(parts)
    for module, _ in wanted:
        if module is not None and module not in fit.modules:
            raise TpcoreError(f"init part {module!r}: the program has no such module")
    edits: list[tuple[Any, tuple, np.ndarray]] = []
    done: list[str] = []
    for m in program.modules:
        if not isinstance(m, (Head, Mlp)):
            continue
        for what in ("read", "predicate"):
            if not any(w == what and mod in (None, m.name) for mod, w in wanted):
                continue
            if what == "predicate" and not isinstance(m, Head):
                continue
            edits += (_head_edits(fit, m, what, strength) if isinstance(m, Head)
                      else _mlp_edits(fit, m, strength))
            done.append(f"{m.name}.{what}")
    if any(w == "classifier" for _, w in wanted):
        edits += _classifier_edits(fit, program.classifier, classes)
        done.append("classifier")
    for param, index, row in edits:
        xp = xp_of(param.data)
        param.data[index] = xp.asarray(row, dtype=param.data.dtype)
    return done


def _head_edits(fit: _Fit, h: Head, what: str, s: float) -> list[tuple[Any, tuple, np.ndarray]]:
    layer_i, index = fit.layer_of(h.name)
    layer, rows = fit.model.layers[layer_i], fit.model.config.attn_layout
    numerical = h.name.startswith("num_")
    if numerical != (h.kind == "numerical"):
        raise TpcoreError(f"program module {h.name!r} is a {h.kind} head; the model's "
                          f"{h.name} is not")
    if what == "read":
        m = layer.m
        q = fit.slot(h.query, "categorical", m, h.name)
        k = fit.slot(h.key, "categorical", m, h.name)
        if numerical:
            v = fit.slot(h.value, "numerical", layer.p, h.name)
            return [(layer.attn_gates, (rows.num_query.start + index,), _one_hot_row(m, q, s)),
                    (layer.attn_gates, (rows.num_key.start + index,), _one_hot_row(m, k, s)),
                    (layer.value_gates, (index,), _one_hot_row(layer.p, v, s))]
        v = fit.slot(h.value, "categorical", m, h.name)
        return [(layer.attn_gates, (rows.cat_query.start + index,), _one_hot_row(m, q, s)),
                (layer.attn_gates, (rows.cat_key.start + index,), _one_hot_row(m, k, s)),
                (layer.attn_gates, (rows.cat_value.start + index,), _one_hot_row(m, v, s))]
    pred = layer.num_pred if numerical else layer.cat_pred
    d = pred.data.shape[-1]
    qvar, kvar = fit.program.variables[h.query], fit.program.variables[h.key]
    edits = []
    for a, b in enumerate(h.predicate.tolist()):
        if b >= 0:
            qi = fit.value_index(h.query, qvar.values[a])
            edits.append((pred, (index, qi), _one_hot_row(d, fit.value_index(h.key,
                                                                        kvar.values[b]), s)))
    return edits


def _mlp_edits(fit: _Fit, mlp: Mlp, s: float) -> list[tuple[Any, tuple, np.ndarray]]:
    layer_i, index = fit.layer_of(mlp.name)
    layer, cfg = fit.model.layers[layer_i], fit.model.config
    numerical = mlp.name.startswith("num_")
    if numerical != (mlp.kind == "numerical"):
        raise TpcoreError(f"program module {mlp.name!r} is a {mlp.kind} MLP; the model's "
                          f"{mlp.name} is not")
    gates, count, kind, visible = (
        (layer.num_mlp_gates, cfg.n_num_mlps, "numerical", layer.p + cfg.n_num_heads)
        if numerical else (layer.mlp_gates, cfg.n_cat_mlps, "categorical",
                           layer.m + cfg.n_cat_heads))
    a, b = (mlp.inputs * 2)[:2]
    width = gates.data.shape[1]
    return [(gates, (index,), _one_hot_row(width, fit.slot(a, kind, visible, mlp.name), s)),
            (gates, (count + index,), _one_hot_row(width, fit.slot(b, kind, visible, mlp.name),
                                                   s))]


def _classifier_edits(fit: _Fit, clf: Classifier, classes: Sequence[str] | None
                      ) -> list[tuple[Any, tuple, np.ndarray]]:
    model = fit.model
    w = to_host(model.w_out.data).astype(np.float64)
    if classes is not None and list(clf.classes) != list(classes):
        raise TpcoreError(f"the program's classes {list(clf.classes)} are not the task's "
                          f"{list(classes)}")
    if len(clf.classes) != w.shape[1]:
        raise TpcoreError(f"the program has {len(clf.classes)} classes, the model "
                          f"{w.shape[1]}")
    d, m_all = model.config.width, model.n_vars("categorical")
    for f in clf.features:
        spec = fit.spec(f, "the classifier")
        weights = np.asarray(clf.weights[f], dtype=np.float64)
        if spec.kind == "numerical":
            w[d * m_all + spec.slot] = weights[0]
            continue
        for i, label in enumerate(fit.program.variables[f].values):
            w[spec.slot * d + fit.value_index(f, label)] = weights[i]
    return [(model.w_out, (slice(None),), w),
            (model.b_out, (slice(None),), np.asarray(clf.bias, dtype=np.float64))]

"""Trained Transformer Program (discrete mode) -> program IR.

Reads :meth:`tpcore.models.program.ProgramModel.discrete` (argmax of every gate and predicate row)
and names values with the task's strings:

- ``tokens`` gets the vocabulary, ``positions`` ``0 .. max_len - 1``, ``ones`` ``[1]``;
- a learned factored embedding becomes one lookup module ``embed_i`` per variable, reading
  ``tokens``;
- PrefixSumCounts variables ``prefix_count_{v}`` become prefix-count modules of token ``v``;
- the SparseExpertCountingNetwork's ``expert_count`` becomes an expert-count module ``experts``
  holding the gate's ``W, b`` (from ``DiscreteProgram.meta["expert_gate"]``) and the model's
  float type; its values are those of the experts the gate can pick on inputs framed with
  ``bos``/``eos`` (:func:`tpcore.programs.ir.expert_values`). A numerical head summing it when
  those include relative frequencies is refused, naming the head: the model adds float fractions
  in its own rounding order, which no value set can list;
- a categorical head keeps its predicate rows for the query variable's values, with key indices
  the key variable cannot take mapped to "matches nothing"; its output takes the value
  variable's labels (the type follows the computation graph, paper A.3); rule ``closest``;
- a numerical head's output gets every value a sum over at most ``max_len`` keys can reach;
- an MLP becomes a table by running its hidden layer on every combination of its inputs' values
  (all ``k^2`` categorical pairs; for numerical inputs every reachable value), in the model's
  float dtype;
- the classifier keeps the rows of each variable's values, and the model's classes (masked ones
  marked as never predicted, so class indices stay the model's).
Host-only code (NumPy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.programs.ir import (
    LIMITS,
    Classifier,
    ExpertCount,
    Head,
    Mlp,
    Module,
    PrefixCount,
    Program,
    Variable,
    check_size,
    expert_values,
    numerical_range,
)

PREFIX_SOURCE = "prefix_counts"
"""Module name of the PrefixSumCounts extension (:mod:`tpcore.models.counting`): its variables
``prefix_count_{v}`` count token id ``v`` strictly before each position."""
EXPERT_SOURCE = "experts"
"""Module name of the SparseExpertCountingNetwork: its variable ``expert_count`` is one expert
of the histogram per sequence, chosen by the gate."""


CHUNK = 2**16
"""Input combinations an MLP is evaluated on at once (bounds the memory of a large table)."""


def _mlp_table(m: Any, inputs: list[Variable], width: int, dtype: Any) -> np.ndarray:
    """Output index for every combination of the inputs' values: ``(|v_a|, |v_b|)``, at most
    ``LIMITS.table`` of them, evaluated :data:`CHUNK` combinations at a time."""
    a, b = inputs
    check_size(a.size * b.size, LIMITS.table, f"{m.name}: table entries")
    w1, b1, w2, b2 = (x.astype(dtype) for x in (m.w1, m.b1, m.w2, m.b2))
    eye = np.eye(width, dtype=dtype)
    va, vb = (np.asarray(x.values, dtype=dtype) if m.kind == "numerical" else None
              for x in (a, b))
    flat = np.empty(a.size * b.size, dtype=np.int64)
    for start in range(0, flat.size, CHUNK):
        ia, ib = np.divmod(np.arange(start, min(start + CHUNK, flat.size)), b.size)
        if m.kind == "categorical":
            x = np.concatenate([eye[ia], eye[ib]], axis=-1)
        else:
            x = np.stack([va[ia], vb[ib]], axis=-1)
        h = np.maximum(x @ w1 + b1, 0)
        flat[start : start + len(ia)] = (h @ w2 + b2).argmax(axis=-1)
    return flat.reshape(a.size, b.size)


def extract(model: Any, vocab: Sequence[str], classes: Sequence[str], *, name: str = "program",
            bos: str | None = None, eos: str | None = None, pad: str | None = None,
            passthrough: bool = False, meta: dict[str, Any] | None = None) -> Program:
    """The program of ``model`` (a ``ProgramModel`` or its ``DiscreteProgram``).

    ``vocab[i]``: the string of token id ``i``; ``classes[c]``: the label of output class ``c``.
    ``bos``/``eos``/``pad``: the task's framing tokens. ``passthrough=False`` keeps the model's own
    predictions at BOS/EOS positions, so the program agrees with the model at every position.
    """
    dp = model.discrete() if hasattr(model, "discrete") else model
    dtype = np.dtype(getattr(getattr(model, "config", None), "dtype", "float64"))
    specs = {v.name: v for v in dp.variables}
    if "tokens" in specs and specs["tokens"].width != len(vocab):
        raise TpcoreError(f"model has {specs['tokens'].width} token ids but the vocabulary has "
                          f"{len(vocab)} strings")
    known = {m.name for m in dp.modules} | {PREFIX_SOURCE, EXPERT_SOURCE}
    foreign = [x for x in dp.variables if x.source is not None and x.source not in known]
    if foreign:
        raise TpcoreError(f"variable {foreign[0].name!r} comes from module {foreign[0].source!r}, "
                          "which the program IR cannot express yet")
    check_size(dp.max_len, LIMITS.max_len, "maximum length")
    n_cls = len(dp.classifier_bias)
    if len(classes) != n_cls:
        raise TpcoreError(f"model has {n_cls} classes but {len(classes)} labels were given")
    v: dict[str, Variable] = {
        "tokens": Variable("tokens", "categorical", tuple(vocab)),
        "positions": Variable("positions", "categorical", tuple(range(dp.max_len))),
        "ones": Variable("ones", "numerical", (1,)),
    }
    modules: list[Module] = []
    if dp.embedding is not None:
        for i in range(dp.embedding.shape[1]):
            out = f"embed_{i}"
            v[out] = Variable(out, "categorical", tuple(range(specs[out].width)))
            modules.append(Mlp(f"{out}_lookup", "categorical", ("tokens",), out,
                               dp.embedding[:, i].astype(np.int64), 0))
    for x in dp.variables:
        if x.source == PREFIX_SOURCE:
            v[x.name] = Variable(x.name, "numerical", tuple(range(dp.max_len)))
            modules.append(PrefixCount(x.name, vocab[int(x.name.rsplit("_", 1)[1])], x.name))
        elif x.source == EXPERT_SOURCE:
            gate = dp.meta.get("expert_gate")
            if gate is None:
                raise TpcoreError(f"variable {x.name!r} comes from the expert gate, whose weights "
                                  "are missing: extract from the CountingProgramModel itself")
            e = ExpertCount(EXPERT_SOURCE, x.name, gate["weights"], gate["bias"], gate["dtype"])
            check_size(len(vocab) * dp.max_len, LIMITS.gate,
                       f"{x.name}: vocabulary times maximum length")
            v[x.name] = Variable(x.name, "numerical",
                                 expert_values(e, v["tokens"], bos, eos, pad, dp.max_len))
            modules.append(e)
    for m in dp.modules:
        if hasattr(m, "predicate"):
            q, k, val = v[m.query], v[m.key], v[m.value]
            pred = np.asarray(m.predicate[: q.size], dtype=np.int64)
            pred = np.where(pred < k.size, pred, -1)
            try:
                values = (val.values if m.kind == "categorical"
                          else numerical_range(val, dp.max_len))
            except TpcoreError as exc:
                raise TpcoreError(f"{m.name}: {exc}") from None
            v[m.output] = Variable(m.output, m.kind, values)
            modules.append(Head(m.name, m.kind, m.query, m.key, m.value, m.output, pred, "closest"))
        else:
            ins = [v[x] for x in m.inputs]
            table = _mlp_table(m, ins, dp.width, dtype)
            v[m.output] = Variable(m.output, "categorical", tuple(range(specs[m.output].width)))
            counts = np.bincount(table.ravel(), minlength=v[m.output].size)
            modules.append(Mlp(m.name, m.kind, tuple(m.inputs), m.output, table,
                               int(counts.argmax())))
    feats = tuple(x.name for x in dp.variables)
    weights = {}
    for f in feats:
        w = np.asarray(dp.classifier_weights[f], dtype=np.float64)
        weights[f] = w[: v[f].size] if v[f].kind == "categorical" else w
    clf = Classifier(tuple(classes), feats, weights,
                     np.asarray(dp.classifier_bias, dtype=np.float64),
                     tuple(int(c) for c in dp.masked_classes))
    return Program(name, v, modules, clf, causal=bool(dp.causal), bos=bos, eos=eos, pad=pad,
                   passthrough=passthrough, meta=dict(meta or {}))

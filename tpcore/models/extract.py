"""Trained Transformer Program (discrete mode) -> program IR.

Reads :meth:`tpcore.models.program.ProgramModel.discrete` (argmax of every gate and predicate row)
and names values with the task's strings:

- ``tokens`` gets the vocabulary, ``positions`` ``0 .. max_len - 1``, ``ones`` ``[1]``;
- a learned factored embedding becomes one lookup module ``embed_i`` per variable, reading
  ``tokens``;
- each stream extension describes its own program modules
  (:meth:`tpcore.models.program.StreamExtension.program_modules`): PrefixSumCounts a prefix-count
  module per token, the SparseExpertCountingNetwork an expert-count module ``experts`` holding
  the gate's ``W, b`` and the model's float type; their values are those
  :func:`tpcore.programs.ir.count_values` lists on inputs framed with ``bos``/``eos``. A numerical
  head summing the expert count when those include relative frequencies is refused, naming the
  head: the model adds float fractions in its own rounding order, which no value set can list;
- a categorical head keeps its predicate rows for the query variable's values, with key indices
  the key variable cannot take mapped to "matches nothing"; its output takes the value
  variable's labels (the type follows the computation graph, paper A.3); rule ``closest``;
- a numerical head's output gets every value a sum over at most ``max_len`` keys can reach;
- an MLP becomes a table by running it (:meth:`tpcore.models.program.DiscreteMlp.lookup`) on
  every combination of its inputs' values (all ``k^2`` categorical pairs; for numerical inputs
  every reachable value), in the model's float dtype;
- the classifier keeps the rows of each variable's values, and the model's classes (masked ones
  marked as never predicted, so class indices stay the model's).
Host-only code (NumPy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.models.program import DiscreteHead, DiscreteMlp, DiscreteProgram, ProgramModel
from tpcore.programs.ir import (
    LIMITS,
    Classifier,
    Head,
    Mlp,
    Program,
    ProgramModule,
    Variable,
    check_size,
    count_values,
    numerical_range,
)
from tpcore.tasks.data import TaskData

__all__ = ["CHUNK", "extract"]

CHUNK = 2**16
"""Input combinations an MLP is evaluated on at once (bounds the memory of a large table)."""


def _mlp_table(m: DiscreteMlp, inputs: list[Variable], width: int, dtype: Any) -> np.ndarray:
    """Output index for every combination of the inputs' values: ``(|v_a|, |v_b|)``, at most
    ``LIMITS.table`` of them, evaluated :data:`CHUNK` combinations at a time."""
    a, b = inputs
    check_size(a.size * b.size, LIMITS.table, f"{m.name}: table entries")
    va, vb = (np.arange(x.size) if m.kind == "categorical" else np.asarray(x.values)
              for x in (a, b))
    flat = np.empty(a.size * b.size, dtype=np.int64)
    for start in range(0, flat.size, CHUNK):
        ia, ib = np.divmod(np.arange(start, min(start + CHUNK, flat.size)), b.size)
        flat[start : start + len(ia)] = m.lookup(va[ia], vb[ib], width, dtype)
    return flat.reshape(a.size, b.size)


def extract(model: ProgramModel | DiscreteProgram, vocab: Sequence[str] | TaskData,
            classes: Sequence[str] | None = None, *, name: str | None = None,
            bos: str | None = None, eos: str | None = None, pad: str | None = None,
            passthrough: bool = False, meta: dict[str, Any] | None = None) -> Program:
    """The program of ``model`` (a :class:`ProgramModel` or its :class:`DiscreteProgram`).

    ``vocab[i]``: the string of token id ``i``; ``classes[c]``: the label of output class ``c``.
    ``bos``/``eos``/``pad``: the framing tokens. ``vocab`` may instead be the task the model was
    trained on (:class:`TaskData`): its vocabulary, classes, name and framing tokens then serve
    where not given (``extract(model, task)``). ``passthrough=False`` keeps the model's own
    predictions at BOS/EOS positions, so the program agrees with the model at every position.
    """
    if isinstance(vocab, TaskData):
        task, vocab = vocab, vocab.vocab
        classes = task.classes if classes is None else classes
        name, bos, eos, pad = name or task.name, bos or task.bos, eos or task.eos, pad or task.pad
    if classes is None:
        raise TpcoreError("extract needs the classes' labels, or the task in place of vocab")
    name = name or "program"
    dp = model.discrete() if isinstance(model, ProgramModel) else model
    dtype = np.dtype(getattr(getattr(model, "config", None), "dtype", "float64"))
    specs = {v.name: v for v in dp.variables}
    if "tokens" in specs and specs["tokens"].width != len(vocab):
        raise TpcoreError(f"model has {specs['tokens'].width} token ids but the vocabulary has "
                          f"{len(vocab)} strings")
    counted = {m.output: m for e in dp.extensions for m in e.program_modules(vocab)}
    heads_and_mlps = {m.name for m in dp.modules}
    for x in dp.variables:
        if x.source is not None and x.source not in heads_and_mlps and x.name not in counted:
            raise TpcoreError(f"variable {x.name!r} comes from module {x.source!r}, whose "
                              "weights are missing: extract from the model itself")
    check_size(dp.max_len, LIMITS.max_len, "maximum length")
    n_cls = len(dp.classifier_bias)
    if len(classes) != n_cls:
        raise TpcoreError(f"model has {n_cls} classes but {len(classes)} labels were given")
    v: dict[str, Variable] = {
        "tokens": Variable("tokens", "categorical", tuple(vocab)),
        "positions": Variable("positions", "categorical", tuple(range(dp.max_len))),
        "ones": Variable("ones", "numerical", (1,)),
    }
    modules: list[ProgramModule] = []
    if dp.embedding is not None:
        for i in range(dp.embedding.shape[1]):
            out = f"embed_{i}"
            v[out] = Variable(out, "categorical", tuple(range(specs[out].width)))
            modules.append(Mlp(f"{out}_lookup", "categorical", ("tokens",), out,
                               dp.embedding[:, i].astype(np.int64), 0))
    for x in dp.variables:
        if x.name in counted:
            m = counted[x.name]
            v[x.name] = Variable(x.name, "numerical",
                                 count_values(m, v["tokens"], bos, eos, pad, dp.max_len))
            modules.append(m)
    for m in dp.modules:
        if isinstance(m, DiscreteHead):
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

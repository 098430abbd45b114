"""The discrete model as plain data: :class:`DiscreteProgram`, its heads (:class:`DiscreteHead`)
and MLPs (:class:`DiscreteMlp`), which :meth:`ProgramModel.discrete
<tpcore.models.program.model.ProgramModel.discrete>` returns and program extraction reads.

This is the model's own argmax view, in its index space: variables by slot, predicates as index
maps, MLPs as their float weights. The program IR (:mod:`tpcore.programs.ir`) says the same in the
task's terms, with value names, value sets and MLP lookup tables, so turning one into the other
needs the task's vocabulary and evaluates every MLP (:func:`tpcore.models.extract.extract`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tpcore.backend import to_host
from tpcore.models.program.extension import StreamExtension
from tpcore.models.program.stream import VarSpec
from tpcore.nn.module import Parameter


def host(p: Parameter) -> np.ndarray:
    """A parameter's values as a host float64 array."""
    return np.asarray(to_host(p.data), dtype=np.float64)


@dataclass
class DiscreteHead:
    """An attention head after argmax. ``predicate[a] = b``: query value ``a`` matches key value
    ``b`` (exactly one per row). ``value`` is categorical for a categorical head (the output copies
    it) and numerical for a numerical head (the output sums it over matching keys)."""

    name: str
    kind: str
    layer: int
    query: str
    key: str
    value: str
    output: str
    predicate: np.ndarray


@dataclass
class DiscreteMlp:
    """An MLP after argmax of its read gates: ``out = argmax(relu([a; b] W1 + b1) W2 + b2)`` where
    ``a, b`` are its two inputs (one-hots of width ``d`` for a categorical MLP, scalars for a
    numerical one). Weights: ``w1 (I, D)``, ``b1 (D,)``, ``w2 (D, k)``, ``b2 (k,)``, float64."""

    name: str
    kind: str
    layer: int
    inputs: tuple[str, str]
    output: str
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray

    def lookup(self, a: np.ndarray, b: np.ndarray, width: int,
               dtype: Any = "float64") -> np.ndarray:
        """Output indices for input values ``a, b`` (indices of categorical inputs, numbers of
        numerical ones), any equal shapes; ``width`` = ``d`` for categorical inputs. Computed in
        the float type ``dtype`` (the model's, for outputs equal to its own)."""
        w1, b1, w2, b2 = (x.astype(dtype) for x in (self.w1, self.b1, self.w2, self.b2))
        a, b = np.asarray(a), np.asarray(b)
        if self.kind == "categorical":
            eye = np.eye(width, dtype=dtype)
            x = np.concatenate([eye[a], eye[b]], axis=-1)
        else:
            x = np.stack([a, b], axis=-1).astype(dtype)
        h = np.maximum(x @ w1 + b1, 0)
        return np.argmax(h @ w2 + b2, axis=-1)


@dataclass
class DiscreteProgram:
    """The discrete model as data: the variables in stream order, the modules in execution order
    (per layer: categorical heads, numerical heads, categorical MLPs, numerical MLPs), a learned
    embedding table when present (``embedding[v, i]``: value of variable ``embed_i`` for token
    ``v``) and the classifier ``logits = bias + sum_f W_f[value of f]`` (categorical ``f``,
    ``W_f: (width_f, C)``) ``+ W_f[0] * f`` (numerical, ``W_f: (1, C)``); masked classes never
    win. ``extensions``: the model's stream extensions, which describe their own program
    modules (:meth:`StreamExtension.program_modules`)."""

    variables: list[VarSpec]
    modules: list[DiscreteHead | DiscreteMlp]
    classifier_weights: dict[str, np.ndarray]
    classifier_bias: np.ndarray
    masked_classes: tuple[int, ...]
    width: int
    causal: bool
    max_len: int
    embedding: np.ndarray | None = None
    extensions: list[StreamExtension] = field(default_factory=list)

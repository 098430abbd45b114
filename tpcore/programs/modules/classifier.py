"""The program IR's linear classifier over chosen variables: its validation, JSON form and
reference evaluation (see :mod:`tpcore.programs.modules`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tpcore.backend import xp_of
from tpcore.programs.values import (
    LIMITS,
    Variable,
    check_finite,
    check_label,
    check_name,
    check_size,
    fail,
    need,
    read_numbers,
    shorten,
)


@dataclass
class Classifier:
    """Linear classifier over ``features``; ``weights[f]: (k_f, C)`` (``(1, C)`` if numerical);
    ``masked``: indices of classes never predicted (kept so that class indices stay the
    model's).

    ``logits_i = bias + sum_f W_f[index of f_i]`` for a categorical feature ``f`` and
    ``+ W_f[0] * f_i`` for a numerical one, summed in ``features`` order in float64; the
    prediction is the first maximum over the classes not ``masked``.
    """

    classes: tuple[str, ...]
    features: tuple[str, ...]
    weights: dict[str, np.ndarray]
    bias: np.ndarray
    masked: tuple[int, ...] = ()

    def kept(self) -> list[int]:
        """Indices of the classes that can be predicted."""
        return [c for c in range(len(self.classes)) if c not in self.masked]

    def validate(self, variables: dict[str, Variable]) -> None:
        n = len(self.classes)
        check_size(n, LIMITS.classes, "classes")
        for x in self.classes:
            check_label(x, "classes")
        if n == 0 or len(set(self.classes)) != n:
            fail("classifier", "classes must be non-empty and distinct")
        if any(not 0 <= m < n for m in self.masked) or len(set(self.masked)) >= n:
            fail("classifier", f"masked classes must be distinct indices in 0 .. {n - 1}, "
                 "leaving at least one class")
        if self.bias.shape != (n,):
            fail("classifier", f"bias must have shape ({n},), got {self.bias.shape}")
        check_finite(self.bias, "classifier bias")
        if set(self.features) != set(self.weights) or len(set(self.features)) != len(
                self.features):
            fail("classifier", "features and weights must name the same distinct variables")
        for f in self.features:
            if f not in variables:
                fail("classifier", f"feature {f!r} is not a variable")
            rows = variables[f].size if variables[f].kind == "categorical" else 1
            if self.weights[f].shape != (rows, n):
                fail("classifier", f"weights of {f!r} must have shape ({rows}, {n}), "
                     f"got {self.weights[f].shape}")
            check_finite(self.weights[f], f"classifier weights of {f!r}")
        check_size(sum(self.weights[f].size for f in self.features), LIMITS.weights,
                   "classifier weights")

    def to_json(self) -> dict[str, Any]:
        """Masked classes by label; weights as rows of lists."""
        return {"classes": list(self.classes), "bias": self.bias.tolist(),
                "masked": [self.classes[m] for m in self.masked],
                "features": list(self.features),
                "weights": {f: self.weights[f].tolist() for f in self.features}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Classifier:
        classes = need(d, "classes", "classifier", list)
        check_size(len(classes), LIMITS.classes, "classes")
        feats = [check_name(f, "classifier feature")
                 for f in need(d, "features", "classifier", list)]
        masked = need(d, "masked", "classifier", list) if "masked" in d else []
        index = {c: i for i, c in enumerate(classes) if isinstance(c, str)}
        for x in masked:
            if not isinstance(x, str) or x not in index:
                fail("classifier", f"masked class {shorten(x)} is not a class")
        weights = need(d, "weights", "classifier", dict)
        check_size(sum(len(w) * len(classes) for w in weights.values() if isinstance(w, list)),
                   LIMITS.weights, "classifier weights")
        return cls(
            tuple(classes), tuple(feats),
            {f: read_numbers(w, f"classifier weights of {shorten(f)}", 2)
             for f, w in weights.items()},
            read_numbers(need(d, "bias", "classifier"), "classifier bias", 1),
            tuple(index[x] for x in masked))

    def evaluate(self, env: dict[str, Any], variables: dict[str, Variable]) -> Any:
        """Logits ``(B, N, C)`` in float64, summed in ``features`` order; masked classes get
        ``-inf``."""
        xp = xp_of(env["tokens"])
        logits = xp.broadcast_to(xp.asarray(self.bias),
                                 env["tokens"].shape + self.bias.shape).copy()
        for f in self.features:
            w = xp.asarray(self.weights[f])
            if variables[f].kind == "categorical":
                logits = logits + w[env[f]]
            else:
                logits = logits + env[f][..., None] * w[0]
        if self.masked:
            logits[..., list(self.masked)] = -np.inf
        return logits

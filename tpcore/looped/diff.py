"""Differentiable looped execution: the backward of ``T`` loop iterations of a layer stack.

The looped transformer applies the same layers ``f_1 .. f_L`` every iteration:
``X_{t+1} = f_L(... f_1(X_t))``. The weights are shared across iterations, so

    dL/dW_l = sum_{t=0}^{T-1} (dL/dW_l at iteration t),

obtained by running :func:`tpcore.looped.layer.layer_backward` backwards through the tape of every
layer of every iteration (backpropagation through time). The hardmax has zero gradient with
respect to K, Q and lam; use a finite ``lam`` to see them. The snap layer is flat on its plateaus,
so it passes (almost) no gradient: differentiate a machine built with ``snap=False``.

:class:`StackParameters` holds a stack's weight arrays as trainable parameters, so the one
training loop (``tpcore.train.fit``) optimises looped weights like any model.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tpcore.looped.layer import AttentionHead, Layer, layer_backward, layer_forward
from tpcore.nn.module import Module, Parameter


def loop_forward(X: Any, layers: list[Layer], T: int, hard: bool = False) -> tuple[Any, list]:
    """``T`` iterations of ``layers`` on ``X: (d, n)`` or ``(B, d, n)``; returns ``(X_T, tape)``."""
    tape = []
    for _ in range(T):
        for layer in layers:
            X, cache = layer_forward(X, layer, hard=hard)
            tape.append(cache)
    return X, tape


def add_layers(a: Layer | None, b: Layer) -> Layer:
    """Entry-wise sum of two gradient :class:`Layer` s (``a`` may be None)."""
    if a is None:
        return b
    heads = tuple(AttentionHead(x.K + y.K, x.Q + y.Q, x.V + y.V, x.lam + y.lam)
                  for x, y in zip(a.heads, b.heads))
    return replace(a, heads=heads, W1=a.W1 + b.W1, b1=a.b1 + b.b1, W2=a.W2 + b.W2, b2=a.b2 + b.b2)


def loop_backward(dX: Any, tape: list, n_layers: int) -> tuple[Any, list[Layer]]:
    """Gradients of the loss with respect to ``X_0`` and each layer's weights (summed over the
    iterations) given ``dX = dL/dX_T``."""
    grads: list[Layer | None] = [None] * n_layers
    for i in range(len(tape) - 1, -1, -1):
        dX, g = layer_backward(dX, tape[i])
        grads[i % n_layers] = add_layers(grads[i % n_layers], g)
    return dX, grads


def weight_arrays(layer: Layer) -> dict[str, Any]:
    """Named weight arrays of a layer: ``K0, Q0, V0, K1, ...`` per head, ``W1, b1, W2, b2``."""
    out = {}
    for i, h in enumerate(layer.heads):
        out.update({f"K{i}": h.K, f"Q{i}": h.Q, f"V{i}": h.V})
    out.update({"W1": layer.W1, "b1": layer.b1, "W2": layer.W2, "b2": layer.b2})
    return out


def with_weights(layer: Layer, arrays: dict[str, Any]) -> Layer:
    """``layer`` with the arrays named as in :func:`weight_arrays` replaced."""
    heads = tuple(AttentionHead(arrays.get(f"K{i}", h.K), arrays.get(f"Q{i}", h.Q),
                       arrays.get(f"V{i}", h.V), h.lam) for i, h in enumerate(layer.heads))
    return replace(layer, heads=heads, W1=arrays.get("W1", layer.W1), b1=arrays.get("b1", layer.b1),
                   W2=arrays.get("W2", layer.W2), b2=arrays.get("b2", layer.b2))


class LayerParameters(Module):
    """The weight arrays of one layer, named as in :func:`weight_arrays`, as parameters."""

    def __init__(self, layer: Layer) -> None:
        self.layer = layer
        for name, array in weight_arrays(layer).items():
            setattr(self, name, Parameter(array.copy()))

    def current(self) -> Layer:
        """The layer with the parameters' present values."""
        return with_weights(self.layer, {k: p.data for k, p in self.named_parameters()})

    def set_grads(self, grads: Layer, masks: dict[str, Any] | None = None) -> None:
        """Gradients from a gradient :class:`Layer` (:func:`loop_backward`), each multiplied by
        its entry of ``masks`` when given (to train only some entries)."""
        for k, g in weight_arrays(grads).items():
            getattr(self, k).grad = g if masks is None else g * masks[k]


class StackParameters(Module):
    """A layer stack as parameters: ``layers[i]`` holds layer ``i``'s weight arrays."""

    def __init__(self, layers: list[Layer]) -> None:
        self.layers = [LayerParameters(layer) for layer in layers]

    def current(self) -> list[Layer]:
        """The stack with the parameters' present values."""
        return [p.current() for p in self.layers]

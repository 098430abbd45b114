"""Optimisers, gradient clipping and schedules.

An optimiser updates a list of :class:`~tpcore.nn.module.Parameter` in place from their ``grad``;
its ``lr`` attribute may be changed between steps by a schedule. Schedules are callables
``step -> value`` for ``step = 0, 1, ...``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tpcore.backend import to_host, xp_of
from tpcore.dispatch import kernel
from tpcore.errors import TpcoreError
from tpcore.nn.module import Parameter

Schedule = Callable[[int], float]


class Optimizer:
    """Holds the parameters and the learning rate; ``step()`` applies one update.

    ``buffers`` names the attributes that hold one array (or None) per parameter, such as
    Adam's moments: with the step count ``t`` and ``lr`` they are the state that
    :meth:`state_dict` saves, so that training can pause and resume exactly.

    While a training step is captured as a CUDA graph (:mod:`tpcore.graphs`), ``lr`` and ``t``
    are 0-d device arrays that the graph reads and increments at every replay; the updates then
    compute from them on the device."""

    buffers: tuple[str, ...] = ()

    def __init__(self, params: Sequence[Parameter], lr: float):
        if lr <= 0:
            raise TpcoreError(f"learning rate {lr} must be positive")
        self.params = list(params)
        self.lr = lr
        self.t = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        self.t += 1
        for i, p in enumerate(self.params):
            if p.grad is not None:
                self._update(i, p)

    def _update(self, i: int, p: Parameter) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """``{"t": steps taken, "lr": ..., "buffers": {"NAME.i": host copy}}`` for buffer
        ``NAME`` of parameter ``i`` (buffers not yet filled are left out)."""
        arrays = {f"{name}.{i}": np.array(to_host(a))
                  for name in self.buffers for i, a in enumerate(getattr(self, name))
                  if a is not None}
        return {"t": self.t, "lr": self.lr, "buffers": arrays}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved (buffers on their parameter's array module,
        dtypes as saved); a buffer whose shape is not its parameter's raises an error naming
        it."""
        arrays = state["buffers"]
        for name in self.buffers:
            values = getattr(self, name)
            for i, p in enumerate(self.params):
                a = arrays.get(f"{name}.{i}")
                if a is not None and tuple(a.shape) != p.shape:
                    raise TpcoreError(f"optimizer buffer {name}.{i} has shape {tuple(a.shape)}, "
                                      f"its parameter {p.shape}")
                if a is None:
                    values[i] = None
                elif values[i] is not None and values[i].dtype == a.dtype:
                    values[i][...] = xp_of(p.data).asarray(a)  # in place: it may be a view
                else:
                    values[i] = xp_of(p.data).array(a)
        self.t, self.lr = int(state["t"]), float(state["lr"])


class SGD(Optimizer):
    """``v = mu v + g + wd w``; ``w -= lr v`` (plain SGD when ``momentum = 0``)."""

    buffers = ("v",)

    def __init__(self, params: Sequence[Parameter], lr: float, momentum: float = 0.0,
                 weight_decay: float = 0.0):
        super().__init__(params, lr)
        self.momentum, self.weight_decay = momentum, weight_decay
        self.v: list[Any] = [None] * len(self.params)

    def _update(self, i: int, p: Parameter) -> None:
        g = p.grad + self.weight_decay * p.data if self.weight_decay else p.grad
        if self.momentum:
            self.v[i] = g if self.v[i] is None else self.momentum * self.v[i] + g
            g = self.v[i]
        p.data -= self.lr * g


class Flat:
    """Parameters of one dtype laid end to end in one buffer ``data``, each ``Parameter.data`` a
    view of its slice, so that an elementwise update of every parameter is one pass over
    ``data`` (one kernel launch on a GPU, not one per parameter).

    Code that assigns a new array to ``p.data`` (loading a state, casting) cuts the view;
    :meth:`bind` lays the parameters out again, and the optimiser calls it when
    :meth:`intact` says a view was cut."""

    def __init__(self, params: Sequence[Parameter]):
        self.params = list(params)
        self.bounds = list(itertools.accumulate((p.data.size for p in self.params), initial=0))
        self.data: Any = None
        self.bind()

    def bind(self) -> None:
        """Copy every parameter into a fresh buffer and make its ``data`` a view of it."""
        first = self.params[0].data
        self.data = xp_of(first).empty(self.bounds[-1], dtype=first.dtype)
        for p, start, end in zip(self.params, self.bounds, self.bounds[1:]):
            self.data[start:end] = p.data.reshape(-1)
            p.data = self.data[start:end].reshape(p.shape)
        self.views = [p.data for p in self.params]

    def intact(self) -> bool:
        """Whether every parameter's ``data`` is still its view of :attr:`data`."""
        return all(p.data is view for p, view in zip(self.params, self.views))

    def zeros(self) -> tuple[Any, list[Any]]:
        """A zero buffer laid out like :attr:`data`, and its per-parameter views."""
        buffer = xp_of(self.data).zeros_like(self.data)
        return buffer, [buffer[a:b].reshape(p.shape)
                        for p, a, b in zip(self.params, self.bounds, self.bounds[1:])]

    def gather(self, arrays: Sequence[Any]) -> Any:
        """One array per parameter (e.g. the gradients), laid out like :attr:`data`. On a device
        each array is copied into its slice: CuPy concatenates more than eight arrays through a
        table of their addresses copied from the host, which a captured step cannot do."""
        xp = xp_of(self.data)
        if xp is np:
            return np.concatenate([a.reshape(-1) for a in arrays]).astype(self.data.dtype,
                                                                          copy=False)
        out = xp.empty_like(self.data)
        for a, start, end in zip(arrays, self.bounds, self.bounds[1:]):
            out[start:end] = a.reshape(-1)
        return out


class Adam(Optimizer):
    """Adam: ``m = b1 m + (1-b1) g``, ``v = b2 v + (1-b2) g^2``,
    ``w -= lr m_hat / (sqrt(v_hat) + eps)`` with bias-corrected ``m_hat, v_hat``.

    ``weight_decay`` adds ``wd w`` to the gradient (L2, coupled); see :class:`AdamW` for the
    decoupled form.

    When the parameters share one dtype they live in one buffer (:class:`Flat`), and so do the
    moments: a step whose every parameter has a gradient gathers the gradients into one array
    and updates all parameters in one pass; a step where some have none updates the others one
    by one. The arithmetic per element is the same either way."""

    decoupled = False
    buffers = ("m", "v")

    def __init__(self, params: Sequence[Parameter], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(params, lr)
        self.b1, self.b2 = betas
        self.eps, self.weight_decay = eps, weight_decay
        dtypes = {p.data.dtype for p in self.params}
        self.flat = Flat(self.params) if self.params and len(dtypes) == 1 else None
        if self.flat is not None:
            self._m, self.m = self.flat.zeros()
            self._v, self.v = self.flat.zeros()
        else:
            self.m = [xp_of(p.data).zeros_like(p.data) for p in self.params]
            self.v = [xp_of(p.data).zeros_like(p.data) for p in self.params]

    def step(self) -> None:
        if self.flat is not None and not self.flat.intact():  # a parameter's array replaced
            if len({p.data.dtype for p in self.params}) == 1:
                self.flat.bind()
            else:
                self.flat = None
        if self.flat is None or any(p.grad is None for p in self.params):
            super().step()
            return
        self.t += 1
        g = self.flat.gather([p.grad for p in self.params])
        self._apply(self.flat.data, g, self._m, self._v)

    def _update(self, i: int, p: Parameter) -> None:
        self._apply(p.data, p.grad, self.m[i], self.v[i])

    def _apply(self, w: Any, g: Any, m: Any, v: Any) -> None:
        if self.weight_decay and not self.decoupled:
            g = g + self.weight_decay * w
        if isinstance(self.t, int):
            step = self.lr * math.sqrt(1 - self.b2**self.t) / (1 - self.b1**self.t)
        else:  # a 0-d device counter (a step captured as a CUDA graph): computed there
            xp = xp_of(self.t)
            step = (self.lr * xp.sqrt(1 - self.b2**self.t) / (1 - self.b1**self.t)).astype(w.dtype)
        if self.weight_decay and self.decoupled:
            w *= 1 - self.lr * self.weight_decay
        adam_update(w, g, m, v, self.b1, self.b2, step, self.eps)


@kernel("nn", gpu=True)
def adam_update(w: Any, g: Any, m: Any, v: Any, b1: float, b2: float, step: float,
                eps: float) -> None:
    """One Adam step in place: ``m = b1 m + (1-b1) g``, ``v = b2 v + (1-b2) g^2``,
    ``w -= step m / (sqrt(v) + eps)`` (``step``: the learning rate with the bias corrections)."""
    xp = xp_of(w)
    m *= b1
    m += (1 - b1) * g
    v *= b2
    v += (1 - b2) * (g * g)
    w -= (step * m / (xp.sqrt(v) + eps)).astype(w.dtype)


class AdamW(Adam):
    """Adam with decoupled weight decay: ``w -= lr wd w`` before the Adam step."""

    decoupled = True

    def __init__(self, params: Sequence[Parameter], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2):
        super().__init__(params, lr, betas, eps, weight_decay)


def clip_grad_norm(params: Sequence[Parameter], max_norm: float) -> Any:
    """Scale all gradients by ``min(1, max_norm / (||g|| + 1e-12))`` with ``||g||`` the global L2
    norm over every parameter; returns ``||g||`` before clipping, a 0-d array on the gradients'
    device. Nothing waits for the device: the scale is computed there and applied to every
    gradient (a multiplication by exactly 1 where no clipping is needed)."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    xp = xp_of(grads[0])
    total = xp.sqrt(sum((g * g).sum() for g in grads))
    scale = xp.minimum(1.0, max_norm / (total + 1e-12))
    for p in params:
        if p.grad is not None:
            p.grad = p.grad * scale.astype(p.grad.dtype)
    return total


def constant(value: float) -> Schedule:
    """``value`` at every step."""
    return lambda step: value


def step_decay(value: float, every: int, gamma: float) -> Schedule:
    """``value * gamma ** (step // every)``."""
    return lambda step: value * gamma ** (step // every)


def piecewise(value: float, drops: dict[int, float]) -> Schedule:
    """Manual drops: ``value`` until the first key of ``drops``, then that key's value, and so on
    (e.g. ``piecewise(1e-3, {5000: 1e-4})``)."""
    points = sorted(drops.items())

    def schedule(step: int) -> float:
        current = value
        for at, v in points:
            if step >= at:
                current = v
        return current

    return schedule


def cosine(value: float, total: int, warmup: int = 0, final: float = 0.0) -> Schedule:
    """Linear warm-up for ``warmup`` steps, then cosine from ``value`` to ``final`` at ``total``."""

    def schedule(step: int) -> float:
        if step < warmup:
            return value * (step + 1) / warmup
        frac = min(1.0, (step - warmup) / max(1, total - warmup))
        return final + 0.5 * (value - final) * (1 + math.cos(math.pi * frac))

    return schedule


def geometric(start: float, end: float, total: int) -> Schedule:
    """Per-step geometric interpolation ``start * (end/start) ** (step / (total-1))``, held at
    ``end`` after ``total`` steps (the Gumbel temperature schedule tau_start -> tau_end)."""
    if start <= 0 or end <= 0:
        raise TpcoreError(f"geometric schedule needs positive ends, got {start} -> {end}")
    return lambda step: start * (end / start) ** (min(step, total - 1) / max(1, total - 1))

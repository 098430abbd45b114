"""Hook points: named activations of a forward pass that a caller can read, record or edit, with
a backward that stays exact.

A model calls ``h = hooks(name, h)`` where it computes the activation ``name`` and, in its
backward, ``dh = hooks.grad(name, dh)`` at the same place. :class:`Hooks` holds the caller's hook
functions by name and, when asked, a cache that records every activation it passes.

A hook function ``fn(value, name)`` must not write into ``value``; what it returns decides the
forward and the backward (``h`` the activation, ``h'`` what the model goes on with, ``L`` any
function of the model's output):

- ``None`` or ``value`` itself: read only; ``h' = h`` and ``dL/dh = dL/dh'``;
- another array ``c`` (broadcast to ``h``'s shape): a constant replacement; ``h' = c`` and
  ``dL/dh = 0``. ``c`` is held fixed, as a value patched from another run or a zero is; a ``c``
  computed from ``value`` passes no gradient back (return an :class:`Edit` to keep one);
- an :class:`Edit` ``(keep, add)``: ``h' = keep * h + add`` elementwise and
  ``dL/dh = keep * dL/dh'``. Zeroing, scaling and patching some entries (:func:`edit`,
  :func:`replace`, :func:`scale`) are edits.

Either way every parameter's gradient is the exact gradient of the model as edited: upstream
parameters see ``dL/dh`` above, downstream ones the edited activation. The tests check this
against float64 finite differences.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tpcore.backend import Array, xp_of
from tpcore.errors import TpcoreError


@dataclass(frozen=True)
class Edit:
    """``h' = keep * h + add``; ``keep`` and ``add`` are scalars or arrays that broadcast to
    ``h``'s shape. The backward is ``dL/dh = keep * dL/dh'``."""

    keep: Any
    add: Any


HookFn = Callable[[Array, str], "Array | Edit | None"]
"""``fn(value, name) -> None | array | Edit`` (module docstring)."""


class HookName(str):
    """The name a hook function receives: a string that also answers ``.name``, so that a
    function written for TransformerLens (``fn(activation, hook)``, reading ``hook.name``) runs
    unchanged."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return str(self)


@dataclass
class _State:
    fns: dict[str, HookFn]
    cache: dict[str, Array] | None
    names: set[str] | None
    keep: dict[str, Any] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return bool(self.fns) or self.cache is not None


class Hooks:
    """Hook functions by full name (``fns``), and a ``cache`` dict that records a copy of every
    activation passed (only those in ``names`` when given), after its hook ran. :meth:`scope`
    gives a view whose names carry a prefix (``blocks.0.``), sharing everything else. A forward
    records each edit's ``keep`` for the backward of the same pass: one forward, then its
    backward, as for every module."""

    __slots__ = ("_state", "_prefix")

    def __init__(self, fns: Mapping[str, HookFn] | None = None,
                 cache: dict[str, Array] | None = None, names: Collection[str] | None = None):
        self._state = _State(dict(fns or {}), cache, None if names is None else set(names))
        self._prefix = ""

    @property
    def active(self) -> bool:
        """Whether any hook function is set or activations are recorded."""
        return self._state.active

    def wants(self, name: str) -> bool:
        """Whether hook point ``name`` has a hook function or is recorded, for activations
        computed only when asked for."""
        s = self._state
        name = self._prefix + name
        return name in s.fns or (s.cache is not None and (s.names is None or name in s.names))

    def scope(self, prefix: str) -> Hooks:
        """The same hooks, with ``prefix`` put before every name."""
        view = Hooks.__new__(Hooks)
        view._state, view._prefix = self._state, self._prefix + prefix
        return view

    def __call__(self, name: str, value: Array) -> Array:
        """The activation the model goes on with at hook point ``name`` (``value`` itself
        unless a hook edits it)."""
        s = self._state
        if not s.active:
            return value
        name = self._prefix + name
        fn = s.fns.get(name)
        if fn is not None:
            value = _apply(s.keep, name, value, fn(value, HookName(name)))
        if s.cache is not None and (s.names is None or name in s.names):
            s.cache[name] = value.copy()
        return value

    def edited(self, name: str) -> bool:
        """Whether a hook edited the activation at hook point ``name`` (so that :meth:`grad`
        there is not the identity)."""
        return self._state.keep.get(self._prefix + name) is not None

    def grad(self, name: str, dvalue: Array) -> Array:
        """``dL/dh`` from ``dL/dh'`` at hook point ``name``: ``keep * dvalue`` after an edit,
        zeros after a constant replacement, ``dvalue`` itself otherwise."""
        keep = self._state.keep.get(self._prefix + name)
        if keep is None:
            return dvalue
        if _is_zero(keep):
            return xp_of(dvalue).zeros_like(dvalue)
        return (keep * dvalue).astype(dvalue.dtype, copy=False)

    def stack(self, names: Sequence[str], values: Array) -> Array:
        """Stacked activations (``values[g]`` is ``names[g]``) through their hook points:
        ``values`` itself when none is edited, else an edited copy."""
        return self._each(self, names, values)

    def grad_stack(self, names: Sequence[str], dvalues: Array) -> Array:
        """:meth:`grad` of stacked activations: ``dvalues`` itself, or an edited copy."""
        return self._each(self.grad, names, dvalues)

    def _each(self, fn: Callable[[str, Array], Array], names: Sequence[str],
              values: Array) -> Array:
        if not self._state.active:
            return values
        out = values
        for g, name in enumerate(names):
            part = out[g]
            new = fn(name, part)
            if new is not part:
                if out is values:
                    out = values.copy()
                out[g] = new
        return out


NO_HOOKS = Hooks()
"""Nothing hooked, nothing recorded: every call returns its argument."""


def _is_zero(keep: Any) -> bool:
    return isinstance(keep, (int, float)) and keep == 0


def _apply(keeps: dict[str, Any], name: str, value: Array, out: Any) -> Array:
    """The edited activation for the hook result ``out``, recording its ``keep`` in
    ``keeps``."""
    if out is None or out is value:
        keeps.pop(name, None)
        return value
    keep, add = (out.keep, out.add) if isinstance(out, Edit) else (0, out)
    xp = xp_of(value)
    try:
        if _is_zero(keep):
            new = xp.broadcast_to(xp.asarray(add, dtype=value.dtype), value.shape).copy()
        else:
            new = (keep * value + add).astype(value.dtype, copy=False)
    except ValueError as exc:
        raise TpcoreError(f"hook on {name!r} returned a value that does not fit its shape "
                          f"{tuple(value.shape)}: {exc}") from None
    if new.shape != value.shape:
        raise TpcoreError(f"hook on {name!r} gave shape {tuple(new.shape)}; expected "
                          f"{tuple(value.shape)}")
    keeps[name] = keep
    return new


def edit(value: Array, index: Any, factor: float = 0.0, values: Any = 0.0) -> Edit:
    """The :class:`Edit` that sets ``value[index]`` to ``factor * value[index] + values[index]``
    and leaves the other entries alone (``values``: a scalar or an array shaped like
    ``value``; ``index``: any NumPy-style index, a boolean mask included)."""
    xp = xp_of(value)
    keep = xp.ones(value.shape, dtype=value.dtype)
    add = xp.zeros(value.shape, dtype=value.dtype)
    full = xp.broadcast_to(xp.asarray(values, dtype=value.dtype), value.shape)
    try:
        keep[index] = factor
        add[index] = full[index]
    except (IndexError, ValueError, TypeError) as exc:
        raise TpcoreError(f"index {index!r} does not fit an activation of shape "
                          f"{tuple(value.shape)}: {exc}") from None
    return Edit(keep, add)


def replace(values: Any, index: Any = ...) -> HookFn:
    """A hook that sets ``h[index] = values[index]`` (``values``: a scalar, e.g. 0 to ablate,
    or an array shaped like the activation, e.g. its value in another run's cache); the
    replaced entries pass no gradient back."""
    return lambda value, name: edit(value, index, 0.0, values)


def scale(factor: float, index: Any = ...) -> HookFn:
    """A hook that multiplies ``h[index]`` by ``factor`` (their gradient too)."""
    return lambda value, name: edit(value, index, factor)

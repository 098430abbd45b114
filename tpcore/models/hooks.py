"""Interpretability for tpcore's models, in TransformerLens' terms: a cache of every named
activation, hooks that read or edit activations during a forward pass, activation patching and
head ablation.

A :class:`Hooked` model (the standard transformer, the Transformer Program model) names every
activation it computes (``model.hook_names()``, shapes by ``model.hook_axes(name)``)::

    logits, cache = model.run_with_cache(tokens)
    cache["blocks.0.attn.hook_pattern"]          # or cache["pattern", 0]: (batch, head, q, k)
    logits = model.run_with_hooks(tokens, {"blocks.1.hook_resid_pre": fn})
    logits = ablate_head(model, tokens, (1, 0))  # zero head 0 of layer 1
    logits = patch(model, clean, corrupted, "blocks.0.hook_resid_post", positions=3)

A hook ``fn(value, name)`` returns ``None`` (read only), an array (a constant replacement) or an
:class:`~tpcore.nn.hookpoints.Edit` ``h' = keep * h + add``; after a hooked forward,
``model.backward`` gives the exact gradient of the edited model: a replaced entry passes no
gradient back, an edit passes ``keep`` times its gradient (:mod:`tpcore.nn.hookpoints`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tpcore.backend import Array, xp_of
from tpcore.errors import TpcoreError
from tpcore.models import resid
from tpcore.nn.hookpoints import Edit, HookFn, Hooks, edit, replace, scale

Selection = int | slice | Iterable[int] | None
"""Entries along one axis: an index, a slice, indices, or every entry (None)."""
NamesFilter = str | Collection[str] | Callable[[str], bool] | None
"""TransformerLens's ``names_filter``: a hook point's name, names, or a predicate over names."""

__all__ = ["Cache", "Edit", "HeadSweep", "HookFn", "Hooked", "LensNames", "ablate_head",
           "edit_hook", "patch", "patch_head", "patch_head_sweep", "patch_sweep", "replace",
           "scale"]


class Cache(Mapping[str, Array]):
    """Activations of one forward by hook-point name, in forward order. A tuple key is a short
    name (``cache["pattern", 0]``, ``cache["pattern", "attn_0_1"]``: ``model.hook_name``)."""

    def __init__(self, values: dict[str, Array], model: Hooked):
        self._values, self._model = values, model

    def __getitem__(self, key: str | tuple) -> Array:
        name = self._model.hook_name(*key) if isinstance(key, tuple) else key
        if name not in self._values:
            raise KeyError(f"{name!r} is not in this cache; it holds {', '.join(self._values)}")
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def names(self) -> list[str]:
        """The names cached, in forward order."""
        return list(self._values)

    @property
    def model(self) -> Hooked:
        """The model whose forward this cache recorded."""
        return self._model

    # the standard transformer's residual stream, under TransformerLens's names
    # (tpcore.models.resid says what each part is)
    def stack_activation(self, kind: str) -> Array:
        """``self[kind, l]`` stacked over the layers (:func:`resid.stack_activation`)."""
        return resid.stack_activation(self, kind)

    def accumulated_resid(self, return_labels: bool = False) -> Any:
        """The stream into every block and out of the last (:func:`resid.accumulated_resid`)."""
        return resid.accumulated_resid(self, return_labels)

    def decompose_resid(self, return_labels: bool = False) -> Any:
        """The parts that add up to the final stream (:func:`resid.decompose_resid`)."""
        return resid.decompose_resid(self, return_labels)

    def stack_head_results(self, return_labels: bool = False) -> Any:
        """Each head's write into the stream (:func:`resid.stack_head_results`)."""
        return resid.stack_head_results(self, return_labels)

    def logit_attrs(self, stack: Array, classes: Array | None = None) -> Array:
        """Each part's contribution to the logits (:func:`resid.logit_attribution`)."""
        return resid.logit_attribution(self, stack, classes)


class LensNames:
    """TransformerLens's names for the sizes of a model configuration with ``vocab_size``,
    ``max_len`` and ``n_classes`` fields: ``cfg.d_vocab``, ``cfg.n_ctx``, ``cfg.d_vocab_out``."""

    vocab_size: int
    max_len: int
    n_classes: int | None

    @property
    def d_vocab(self) -> int:
        """Token ids ``0 .. d_vocab - 1`` (``vocab_size``)."""
        return self.vocab_size

    @property
    def n_ctx(self) -> int:
        """The longest input (``max_len``)."""
        return self.max_len

    @property
    def d_vocab_out(self) -> int:
        """Output classes (``n_classes``, else ``vocab_size``)."""
        return self.n_classes or self.vocab_size


class Hooked:
    """A model whose forward takes ``hooks=`` (:class:`~tpcore.nn.hookpoints.Hooks`) and names
    its hook points. Subclasses define :meth:`hook_names`, :meth:`hook_axes`, :meth:`hook_name`
    and :meth:`head_output`."""

    forward: Callable[..., Array]

    def hook_names(self) -> list[str]:
        """Every hook point's name, in forward order."""
        raise NotImplementedError

    def hook_axes(self, name: str) -> tuple[str, ...]:
        """The axes of ``name``'s activation, e.g. ``("batch", "pos", "d_model")``."""
        raise NotImplementedError

    def hook_name(self, kind: str, where: Any = None) -> str:
        """The full name of a short one (``("pattern", 0)``)."""
        raise NotImplementedError

    def head_output(self, head: Any) -> tuple[str, dict[str, int]]:
        """The hook point holding ``head``'s output and the ``heads=`` selection in it."""
        raise NotImplementedError

    def heads(self) -> list[list[tuple[Any, str]]]:
        """Every attention head by layer, as ``(key, column)``: the key :meth:`head_output`
        takes and the head's name within its layer (``"head 0"``, ``"cat head 0"``)."""
        raise NotImplementedError

    def check_hook_names(self, names: Iterable[str]) -> None:
        """Raise naming the first name that is no hook point of this model (with the closest
        ones)."""
        known = self.hook_names()
        for name in names:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise TpcoreError(f"{name!r} is not a hook point of this "
                                  f"{type(self).__name__}{hint} (hook_names() lists all)")

    @property
    def cfg(self) -> Any:
        """The model's configuration, under TransformerLens's name (``model.cfg.d_vocab``)."""
        return self.config  # type: ignore[attr-defined]

    def __call__(self, tokens: Array, **forward: Any) -> Array:
        """``model(tokens)``: the logits of :meth:`forward`, as TransformerLens calls a model."""
        return self.forward(tokens, **forward)

    def _names(self, names_filter: NamesFilter) -> list[str] | None:
        """The hook points a TransformerLens ``names_filter`` picks: a name, a list of names or
        a predicate over names (None: every one)."""
        if names_filter is None:
            return None
        if isinstance(names_filter, str):
            names_filter = [names_filter]
        if callable(names_filter):
            return [n for n in self.hook_names() if names_filter(n)]
        names = list(names_filter)
        self.check_hook_names(names)
        return names

    def _hook_map(self, hooks: Mapping[str, HookFn] | None,
                  fwd_hooks: Sequence[tuple[str | Callable[[str], bool], HookFn]] | None
                  ) -> dict[str, HookFn]:
        """``hooks`` and TransformerLens's ``fwd_hooks`` (pairs of a name, or a predicate over
        names, and a function) as one map; two functions at one hook point are refused."""
        out = dict(hooks or {})
        self.check_hook_names(out)
        for where, fn in fwd_hooks or ():
            picked = self._names(where) if callable(where) else self._names([where])
            for name in picked or ():
                if name in out:
                    raise TpcoreError(f"two hook functions at {name!r}; combine them into one")
                out[name] = fn
        return out

    def run_with_hooks(self, tokens: Array, hooks: Mapping[str, HookFn] | None = None, *,
                       fwd_hooks: Sequence[tuple[str | Callable[[str], bool], HookFn]]
                       | None = None, **forward: Any) -> Array:
        """The logits of ``forward(tokens, **forward)`` with ``hooks[name]`` run at each hook
        point ``name`` (or TransformerLens's ``fwd_hooks=[(name or predicate, fn)]``);
        ``backward`` afterwards follows the edits."""
        return self.forward(tokens, hooks=Hooks(self._hook_map(hooks, fwd_hooks)), **forward)

    def run_with_cache(self, tokens: Array, names: Collection[str] | None = None,
                       hooks: Mapping[str, HookFn] | None = None, *,
                       names_filter: NamesFilter = None,
                       fwd_hooks: Sequence[tuple[str | Callable[[str], bool], HookFn]]
                       | None = None, **forward: Any) -> tuple[Array, Cache]:
        """``(logits, cache)``: the cache holds a copy of every activation (those in ``names``,
        or those TransformerLens's ``names_filter`` picks, when given) as the model used it,
        after any of ``hooks`` / ``fwd_hooks``."""
        if names is not None and names_filter is not None:
            raise TpcoreError("give names or names_filter, not both")
        names = self._names(names_filter) if names_filter is not None else names
        self.check_hook_names(names or ())
        values: dict[str, Array] = {}
        fns = self._hook_map(hooks, fwd_hooks)
        logits = self.forward(tokens, hooks=Hooks(fns, cache=values, names=names), **forward)
        return logits, Cache(values, self)


def _selection(value: Array, axes: tuple[str, ...], name: str, positions: Selection,
               heads: Selection) -> Array:
    """A boolean mask of ``value``'s shape: the entries at ``positions`` (along ``pos``, or
    ``query_pos`` for patterns) and ``heads`` (along ``head``), every entry of an axis given
    None."""
    xp = xp_of(value)
    mask = xp.ones(value.shape, dtype=bool)
    for what, sel, axis_names in (("positions", positions, ("pos", "query_pos")),
                                  ("heads", heads, ("head",))):
        if sel is None:
            continue
        axis = next((i for i, a in enumerate(axes) if a in axis_names), None)
        if axis is None:
            raise TpcoreError(f"{name!r} has no axis for {what}; its axes are {axes}")
        picked = xp.zeros(value.shape[axis], dtype=bool)
        try:
            picked[sel if isinstance(sel, (int, slice)) else list(sel)] = True
        except (IndexError, TypeError) as exc:
            raise TpcoreError(f"{what} {sel!r} do not fit axis {axes[axis]!r} of {name!r} "
                              f"(size {value.shape[axis]}): {exc}") from None
        shape = [1] * value.ndim
        shape[axis] = -1
        mask = mask & picked.reshape(shape)
    return mask


def edit_hook(model: Hooked, name: str, positions: Selection = None, heads: Selection = None,
              factor: float = 0.0, values: Any = 0.0) -> HookFn:
    """A hook for ``name`` that sets the selected entries to ``factor * h + values`` and leaves
    the rest: ``values`` an activation of another run patches it, ``values=0`` ablates,
    ``factor=s, values=0`` scales. ``positions`` select along the position axis (the query's
    for patterns), ``heads`` along the head axis; None selects every entry."""
    axes = model.hook_axes(name)
    return lambda value, hook: edit(value, _selection(value, axes, name, positions, heads),
                                    factor, values)


def _same_shape(clean: Array, corrupted: Array) -> None:
    if tuple(clean.shape) != tuple(corrupted.shape):
        raise TpcoreError(f"clean tokens {tuple(clean.shape)} and corrupted tokens "
                          f"{tuple(corrupted.shape)} must have the same shape")


def patch(model: Hooked, clean: Array, corrupted: Array, name: str,
          positions: Selection = None, heads: Selection = None, **forward: Any) -> Array:
    """Activation patching: the logits of the run on ``corrupted`` with activation ``name``
    (at ``positions`` and ``heads``; all when None) taken from the run on ``clean`` (same
    shape; ``forward``: the options of both runs, e.g. ``pad``)."""
    _same_shape(clean, corrupted)
    _, cache = model.run_with_cache(clean, names=[name], **forward)
    hook = edit_hook(model, name, positions, heads, values=cache[name])
    return model.run_with_hooks(corrupted, {name: hook}, **forward)


def patch_head(model: Hooked, clean: Array, corrupted: Array, head: Any,
               positions: Selection = None, **forward: Any) -> Array:
    """:func:`patch` of ``head``'s output (``(layer, h)`` for the transformer, a head name
    such as ``"attn_1_0"`` for a program model)."""
    name, selection = model.head_output(head)
    return patch(model, clean, corrupted, name, positions, **selection, **forward)


def ablate_head(model: Hooked, tokens: Array, head: Any, positions: Selection = None,
                **forward: Any) -> Array:
    """The logits with ``head``'s output set to zero (at ``positions``; all when None): for the
    transformer, the head's ``hook_z`` (as if its rows of ``Wo`` were zero); for a program
    model, its output variable."""
    name, selection = model.head_output(head)
    hook = edit_hook(model, name, positions, **selection)
    return model.run_with_hooks(tokens, {name: hook}, **forward)


def patch_sweep(model: Hooked, clean: Array, corrupted: Array, names: list[str],
                metric: Callable[[Array], float], **forward: Any) -> np.ndarray:
    """``metric(logits)`` of :func:`patch` for each hook point of ``names`` (rows) and each
    position (columns): a host array ``(len(names), N)``."""
    _same_shape(clean, corrupted)
    _, cache = model.run_with_cache(clean, names=names, **forward)
    rows = []
    for name in names:
        rows.append([float(metric(model.run_with_hooks(
            corrupted, {name: edit_hook(model, name, pos, values=cache[name])}, **forward)))
            for pos in range(clean.shape[1])])
    return np.array(rows)


@dataclass
class HeadSweep:
    """What :func:`patch_head_sweep` measured: ``values[l, h]`` (``[l, h, pos]`` by position)
    for the head in column ``h`` of layer ``l`` (``columns[h]``, e.g. ``"head 0"``); NaN where a
    layer has fewer heads."""

    values: np.ndarray
    columns: list[str]

    def table(self, prec: int = 3) -> str:
        """A Markdown table: a row per layer and a column per head, or by position a row per
        head and a column per position."""
        if self.values.ndim == 2:
            rows = [(f"layer {layer}", row) for layer, row in enumerate(self.values)]
            header = self.columns
        else:
            rows = [(f"layer {layer}, {column}", self.values[layer, h])
                    for layer in range(len(self.values)) for h, column in enumerate(self.columns)
                    if not np.isnan(self.values[layer, h]).all()]
            header = [f"pos {p}" for p in range(self.values.shape[2])]
        lines = ["| | " + " | ".join(header) + " |", "|---" * (len(header) + 1) + "|"]
        lines += ["| " + label + " | " + " | ".join(
            "-" if np.isnan(x) else f"{x:.{prec}f}" for x in row) + " |" for label, row in rows]
        return "\n".join(lines)


def patch_head_sweep(model: Hooked, clean: Array, corrupted: Array,
                     metric: Callable[[Array], float], by_position: bool = False,
                     **forward: Any) -> HeadSweep:
    """``metric(logits)`` of :func:`patch_head` for every head (each position apart when
    ``by_position``): how much of the clean behaviour each head's output carries into the
    corrupted run, laid out by layer and head (:meth:`Hooked.heads`)."""
    _same_shape(clean, corrupted)
    heads = model.heads()
    columns = max((layer for layer in heads), key=len)
    n = clean.shape[1]
    shape = (len(heads), len(columns)) + ((n,) if by_position else ())
    values = np.full(shape, np.nan)
    for layer, row in enumerate(heads):
        for h, (key, _) in enumerate(row):
            for pos in range(n) if by_position else (None,):
                value = float(metric(patch_head(model, clean, corrupted, key, pos, **forward)))
                values[(layer, h) if pos is None else (layer, h, pos)] = value
    return HeadSweep(values, [column for _, column in columns])

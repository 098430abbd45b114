"""Parameter bookkeeping: named parameters with gradients, save and load.

A :class:`Module` finds its parameters by walking its attributes in definition order:
:class:`Parameter` objects, sub-modules, and lists of sub-modules, named by dotted paths
(``blocks.0.attn.wq``). Models keep their configuration in ``self.config`` (a dataclass of type
``config_class``), which :func:`save` stores beside the weights with the class name, so that
:func:`load` can rebuild them from a table of classes by name (the models':
:func:`tpcore.models.load`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from tpcore.backend import get_xp, to_host, xp_of
from tpcore.errors import TpcoreError
from tpcore.io import npz_array_bytes, read_npz, read_text, write_json, write_npz
from tpcore.limits import check_memory


class Parameter:
    """A trainable array ``data`` and its gradient ``grad`` (None until a backward fills it)."""

    __slots__ = ("data", "grad")

    def __init__(self, data: Any):
        self.data = data
        self.grad = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    def accumulate(self, g: Any) -> None:
        """``grad += g`` (``grad = g`` when empty)."""
        self.grad = g if self.grad is None else self.grad + g


class Module:
    """Base class: named parameters, gradients, state dicts; ``config_class``: the dataclass of
    ``config`` that :func:`load` rebuilds a saved module from."""

    config_class: ClassVar[Any] = None
    config: Any = None

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """``(dotted_name, Parameter)`` for every parameter, in attribute order."""
        for name, value in vars(self).items():
            path = f"{prefix}{name}"
            if isinstance(value, Parameter):
                yield path, value
            elif isinstance(value, Module):
                yield from value.named_parameters(path + ".")
            elif isinstance(value, (list, tuple)):
                for i, item in enumerate(value):
                    if isinstance(item, Module):
                        yield from item.named_parameters(f"{path}.{i}.")

    def parameters(self) -> list[Parameter]:
        return [p for _, p in self.named_parameters()]

    def n_parameters(self) -> int:
        """Total number of scalar parameters."""
        return int(sum(p.data.size for p in self.parameters()))

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def state_dict(self) -> dict[str, np.ndarray]:
        """Host copies of every parameter, keyed by dotted name."""
        return {name: np.array(to_host(p.data)) for name, p in self.named_parameters()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Copy ``state`` into the parameters; a missing, unexpected or mis-shaped key raises an
        error naming the parameter."""
        params = dict(self.named_parameters())
        for name, p in params.items():
            if name not in state:
                raise TpcoreError(f"parameter {name!r} missing from the loaded state")
            if tuple(state[name].shape) != p.shape:
                raise TpcoreError(
                    f"parameter {name!r} has shape {tuple(state[name].shape)} in the loaded "
                    f"state, expected {p.shape}"
                )
        extra = sorted(set(state) - set(params))
        if extra:
            raise TpcoreError(f"unexpected parameter {extra[0]!r} in the loaded state")
        for name, p in params.items():
            p.data = xp_of(p.data).asarray(state[name], dtype=p.data.dtype)

    def astype(self, dtype: Any) -> Module:
        """Cast every parameter to ``dtype`` in place (e.g. float64 for gradchecks)."""
        for p in self.parameters():
            p.data = p.data.astype(dtype)
        return self


def save(module: Module, path: str | Path, extra: dict[str, Any] | None = None) -> None:
    """Write ``path`` (``.npz`` weights) and the same name with suffix ``.json`` (class name,
    config, ``extra``), both atomically."""
    path = Path(path).with_suffix(".npz")
    config = dataclasses.asdict(module.config) if module.config is not None else {}
    write_npz(path, module.state_dict())
    write_json(path.with_suffix(".json"),
               {"class": type(module).__name__, "config": config, **(extra or {})})


def load(path: str | Path, classes: Mapping[str, type[Module]]) -> Module:
    """Rebuild a module saved by :func:`save`, on the active backend, as the class of
    ``classes`` named by its saved class name. A malformed file raises a :class:`TpcoreError`
    naming the file and the key."""
    path = Path(path).with_suffix(".npz")
    meta_path = path.with_suffix(".json")
    for p in (path, meta_path):
        if not p.is_file():
            raise TpcoreError(f"checkpoint file {str(p)!r} not found")
    try:
        meta = json.loads(read_text(meta_path, "model description"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TpcoreError(f"{meta_path}: not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise TpcoreError(f"{meta_path}: expected a JSON object, got {type(meta).__name__}")
    cls = classes.get(meta.get("class", ""))
    if cls is None or cls.config_class is None:
        raise TpcoreError(f"checkpoint class {meta.get('class')!r} is not a loadable tpcore model")
    config = _config(meta_path, cls.config_class, meta.get("config"))
    stored = _check_size(path, config)
    try:
        module = cls(config)
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        raise TpcoreError(f"{meta_path}: cannot build {cls.__name__} from its config: "
                          f"{exc}") from None
    params = dict(module.named_parameters())
    try:
        arrays = read_npz(path, stored, {k: p.shape for k, p in params.items()})
    except ValueError as exc:
        raise TpcoreError(f"{path}: not a readable weights file ({exc})") from None
    state = {}
    for k, a in arrays.items():
        want = np.dtype(params[k].data.dtype)
        if a.dtype.kind != "f":
            raise TpcoreError(f"{path}: array {k!r} holds {a.dtype}; expected floats")
        with np.errstate(over="ignore"):
            cast = a.astype(want)
        if not np.isfinite(cast).all():
            raise TpcoreError(f"{path}: array {k!r} holds NaN or inf"
                              + (f" as {want}" if np.isfinite(a).all() else ""))
        state[k] = get_xp().asarray(cast)
    module.load_state_dict(state)
    return module


def _check_size(path: Path, config: Any) -> int:
    """Refuse, before anything is built, weights whose headers describe more than the machine's
    memory, and a config that describes far more parameters (``config.n_parameters()``, an
    upper bound, where the config has one) than the weights file holds."""
    try:
        stored = npz_array_bytes(path)
    except ValueError as exc:
        raise TpcoreError(f"{path}: not a readable weights file ({exc})") from None
    check_memory(stored, f"{path}")
    count = getattr(config, "n_parameters", None)
    if count is None:
        return stored
    try:
        itemsize = np.dtype(getattr(config, "dtype", "float32")).itemsize
    except TypeError:
        return stored  # not a type NumPy knows: building the module names it
    implied = count() * itemsize
    if implied > 2 * stored + 2**20:
        raise TpcoreError(f"{path.with_suffix('.json')}: its config describes about "
                          f"{implied:,} bytes of parameters but {path.name} holds {stored:,}")
    return stored


SCALARS: dict[str, type | tuple[type, ...]] = {"int": int, "float": (int, float), "bool": bool,
                                               "str": str}
"""JSON types accepted for config fields annotated with these names."""


def _config(meta_path: Path, config_class: Any, config: Any) -> Any:
    """``config_class(**config)``, refusing an unknown, missing or mistyped key by name."""
    if not isinstance(config, dict):
        raise TpcoreError(f"{meta_path}: key 'config' must be an object, got {config!r}")
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    unknown = sorted(set(config) - set(fields))
    if unknown:
        raise TpcoreError(f"{meta_path}: config key {unknown[0]!r} is not a setting of "
                          f"{config_class.__name__}; expected some of {', '.join(fields)}")
    for name, f in fields.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if name not in config and required:
            raise TpcoreError(f"{meta_path}: config key {name!r} is missing")
    for name, value in config.items():
        kind = SCALARS.get(str(fields[name].type))
        if kind and (not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool)):
            raise TpcoreError(f"{meta_path}: config key {name!r} is {value!r}; expected "
                              f"{fields[name].type}")
    try:
        return config_class(**config)
    except (TypeError, ValueError) as exc:
        raise TpcoreError(f"{meta_path}: config: {exc}") from None

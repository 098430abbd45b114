"""A device-strict array module for CPU machines: NumPy arrays that behave like CuPy's where
portability is at stake, so that a test run finds the host leaks a GPU run would hit.

Selected with ``TPCORE_BACKEND=numpy-strict`` (or ``set_backend("numpy-strict")``); a testing
tool, not a backend to compute with. Its array module :data:`xp` mirrors NumPy's namespace and
returns :class:`StrictArray` objects ("device arrays") that hold a NumPy array inside and follow
CuPy's rules:

- no implicit conversion to a host array: ``np.asarray(x)``, ``np.array(x)`` and anything that
  calls ``x.__array__`` raise ``TypeError``, as on a ``cupy.ndarray``; ``backend.to_host(x)`` is
  the way back;
- a host array never mixes with a device array: ``x + host``, ``host + x``, ``x[i] = host`` and
  ``xp.f(x, host)`` raise ``TypeError``. Host data enters through ``xp.asarray``/``xp.array``;
  host integer or boolean arrays and lists may index a device array (CuPy copies them over);
- a NumPy function or ufunc called on a device array raises ``TypeError`` (``np.exp(x)``,
  ``np.concatenate([x, y])``, ``np.zeros_like(x)``). This is stricter than CuPy, which dispatches
  many NumPy functions to its own: code must take its module from ``backend.xp_of``/``get_xp``;
- reductions, indexing by integers and ``xp`` functions return 0-d device arrays where NumPy
  returns NumPy scalars, as CuPy does; a 0-d array has no ``__index__``, so it cannot index a list
  or size a ``range``;
- explicit synchronising conversions that CuPy allows are allowed: ``float(x)``, ``int(x)``,
  ``bool(x)`` (so ``if x:``) on a one-element array, ``x.item()``, ``x.tolist()``, ``repr(x)``;
- ``xp.random.default_rng(seed)`` gives a generator with only the methods of CuPy's
  ``cupy.random.Generator`` (no ``normal``, ``choice``, ``permutation``, ``shuffle``), drawing the
  same numbers as NumPy's generator of that seed;
- the array methods are those CuPy and NumPy share; a CuPy-only one (``get``) is absent, so code
  that would run only on CuPy fails here too;
- inside :func:`no_sync` (every training step of :func:`tpcore.train.fit` runs in it) the
  conversions that wait for a GPU are refused too: ``float``/``int``/``bool``/``format`` of a
  device array, ``item``, ``tolist``, ``tobytes``, ``nonzero`` (and ``xp.nonzero``,
  ``flatnonzero``, ``argwhere``, ``unique``, one-argument ``where``), indexing by a device
  boolean mask (the size of those results is data) and ``to_host``, so that a CPU test run
  finds a host synchronisation that a new line of a forward, backward or optimiser would add
  to every step; so are copies from the host (``xp.asarray``/``xp.array`` of host data, a host
  index array or list, a number assigned through an index array, a join of more than eight
  arrays), which CuPy refuses while a step is captured as a CUDA graph.

Not modelled: CuPy functions that NumPy lacks (``cupyx``), CuPy's narrower acceptance of Python
lists as array arguments, numerical differences of GPU kernels.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import numpy as np

PYTHON_SCALARS = (bool, int, float, complex)
_no_sync = False


@contextmanager
def no_sync() -> Iterator[None]:
    """Refuse, while inside, the conversions of device arrays that wait for the device (module
    docstring); a no-op outside the strict backend's arrays."""
    global _no_sync
    before, _no_sync = _no_sync, True
    try:
        yield
    finally:
        _no_sync = before


def _synchronising(what: str) -> None:
    if _no_sync:
        raise TypeError(f"{what} of a device array inside a training step waits for the device "
                        "(a host synchronisation on a GPU); keep the value on the device, or read "
                        "it outside the step")


class StrictArray:
    """A device array: a NumPy array ``_a`` that only ``xp`` functions, operators, indexing and
    the methods below may touch (module docstring)."""

    __slots__ = ("_a",)
    __array_ufunc__ = None  # NumPy ufuncs refuse it; NumPy operators defer to its reflected ones
    __hash__ = None

    def __init__(self, a: np.ndarray):
        self._a = a

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError("implicit conversion of a device array to a NumPy array is not allowed "
                        "(as on CuPy); use tpcore.backend.to_host")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        raise TypeError(f"numpy.{func.__name__} called on a device array; take the array module "
                        "from tpcore.backend.xp_of or get_xp")

    # explicit host conversions that CuPy allows (each synchronises with the device on a GPU)
    def __float__(self) -> float:
        _synchronising("float()")
        return float(self._a)

    def __int__(self) -> int:
        _synchronising("int()")
        return int(self._a)

    def __complex__(self) -> complex:
        _synchronising("complex()")
        return complex(self._a)

    def __bool__(self) -> bool:
        _synchronising("bool()")
        return bool(self._a)

    def __repr__(self) -> str:
        return f"strict_{self._a!r}"

    def __format__(self, spec: str) -> str:
        _synchronising("format()")
        return format(self._a, spec)

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self):
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self._a)))

    def __getitem__(self, key: Any) -> StrictArray:
        if isinstance(key, StrictArray) and key.dtype == bool:
            _synchronising("indexing by a boolean mask")
        return _device(self._a[_index(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        parts = key if isinstance(key, tuple) else (key,)
        if not isinstance(value, StrictArray) and any(
                isinstance(k, (StrictArray, np.ndarray, list)) for k in parts):
            _from_host("a number assigned through an index array (CuPy makes it an array)")
        self._a[_index(key)] = _operand(value)

    def __copy__(self) -> StrictArray:
        return StrictArray(self._a.copy())

    def __deepcopy__(self, memo: Any) -> StrictArray:
        return StrictArray(self._a.copy())

    def __reduce__(self) -> tuple:
        return StrictArray, (self._a,)


def _binary(op: Any) -> tuple[Any, Any]:
    def forward(self: StrictArray, other: Any) -> Any:
        return _device(op(self._a, _operand(other)))

    def reflected(self: StrictArray, other: Any) -> Any:
        return _device(op(_operand(other), self._a))

    return forward, reflected


def _inplace(op: Any) -> Any:
    def apply(self: StrictArray, other: Any) -> StrictArray:
        op(self._a, _operand(other))
        return self

    return apply


def _unary(op: Any) -> Any:
    return lambda self: _device(op(self._a))


_SYNCHRONISING_METHODS = frozenset({"item", "tolist", "tobytes", "nonzero"})
_SYNCHRONISING_FUNCTIONS = frozenset({"nonzero", "flatnonzero", "argwhere", "unique"})
"""Methods and functions whose result (a host value, or an array sized by the data) waits for
the device."""


def _method(name: str) -> Any:
    def call(self: StrictArray, *args: Any, **kwargs: Any) -> Any:
        if name in _SYNCHRONISING_METHODS:
            _synchronising(f".{name}()")
        return _device(getattr(self._a, name)(*_numpy(args), **_numpy(kwargs)))

    call.__name__ = name
    return call


for _name in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "and", "or",
              "xor", "lshift", "rshift"):
    _op = getattr(operator, {"and": "and_", "or": "or_"}.get(_name, _name))
    _forward, _reflected = _binary(_op)
    setattr(StrictArray, f"__{_name}__", _forward)
    setattr(StrictArray, f"__r{_name}__", _reflected)
    setattr(StrictArray, f"__i{_name}__", _inplace(getattr(operator, f"i{_name}")))
StrictArray.__divmod__, StrictArray.__rdivmod__ = _binary(divmod)
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(StrictArray, f"__{_name}__", _binary(getattr(operator, _name))[0])
for _name in ("neg", "pos", "abs", "invert"):
    setattr(StrictArray, f"__{_name}__", _unary(getattr(operator, _name)))
for _name in ("shape", "dtype", "ndim", "size", "itemsize", "nbytes", "strides", "flags"):
    setattr(StrictArray, _name, property(operator.attrgetter(f"_a.{_name}")))
for _name in ("T", "mT", "real", "imag"):
    setattr(StrictArray, _name, property(lambda self, _n=_name: _device(getattr(self._a, _n))))
for _name in ("all", "any", "argmax", "argmin", "argpartition", "argsort", "astype", "choose",
              "clip", "compress", "conj", "conjugate", "copy", "cumprod", "cumsum", "diagonal",
              "dot", "fill", "flatten", "item", "max", "mean", "min", "nonzero", "partition",
              "prod", "put", "ravel", "repeat", "reshape", "round", "searchsorted", "sort",
              "squeeze", "std", "sum", "swapaxes", "take", "tobytes", "tolist", "trace",
              "transpose", "var", "view"):
    setattr(StrictArray, _name, _method(_name))


def _device(value: Any) -> Any:
    """Results back to the device: arrays (in tuples and lists too) and NumPy scalars, which
    become 0-d arrays as CuPy returns them."""
    if isinstance(value, np.ndarray):
        return StrictArray(value)
    if isinstance(value, np.generic):
        return StrictArray(np.asarray(value))
    if isinstance(value, (tuple, list)):
        return type(value)(_device(v) for v in value)
    return value


def _numpy(value: Any, host_ok: bool = False) -> Any:
    """Arguments to NumPy: device arrays unwrapped (in tuples, lists and dicts too); a host array
    raises ``TypeError`` unless ``host_ok`` (a conversion to the device)."""
    if isinstance(value, StrictArray):
        return value._a
    if isinstance(value, np.ndarray) and not host_ok:
        raise TypeError("a host NumPy array was passed where a device array is needed (CuPy "
                        "refuses it too); convert it with xp.asarray or tpcore.backend.asarray")
    if isinstance(value, (tuple, list)):
        return type(value)(_numpy(v, host_ok) for v in value)
    if isinstance(value, dict):
        return {k: _numpy(v, host_ok) for k, v in value.items()}
    return value


def _operand(value: Any) -> Any:
    """The other operand of an operator or an assignment: a device array or a scalar."""
    if isinstance(value, StrictArray):
        return value._a
    if isinstance(value, (*PYTHON_SCALARS, np.generic)):
        return value
    raise TypeError(f"a {type(value).__name__} cannot mix with a device array (CuPy refuses it "
                    "too); convert it with xp.asarray or tpcore.backend.asarray")


def _index(key: Any) -> Any:
    """An index: device arrays unwrapped; host integer or boolean arrays and lists pass, as
    CuPy copies them to the device (refused inside :func:`no_sync`)."""
    if isinstance(key, tuple):
        return tuple(_index(k) for k in key)
    if isinstance(key, (np.ndarray, list)):
        _from_host("an index")
    return key._a if isinstance(key, StrictArray) else key


def _from_host(what: str) -> None:
    if _no_sync:
        raise TypeError(f"{what} copied from the host inside a training step: CuPy refuses the "
                        "copy while a step is captured as a CUDA graph; make it on the device "
                        "(xp.arange, xp.full, ...) or before the step")


class _Function:
    """A NumPy function (or ufunc, with its ``.at``/``.reduce``...) on device arrays."""

    __slots__ = ("_f", "_host_ok")

    def __init__(self, f: Any, host_ok: bool = False):
        self._f, self._host_ok = f, host_ok

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self._f, "__name__", "")
        if name in _SYNCHRONISING_FUNCTIONS or (name == "where" and len(args) == 1):
            _synchronising(f"xp.{name}")
        if self._host_ok and args and not isinstance(args[0], StrictArray):
            _from_host(f"the argument of xp.{name}")
        if name in JOINS and args and len(args[0]) > JOIN_KERNEL_ARRAYS:
            _from_host(f"the address table of xp.{name} of {len(args[0])} arrays")
        return _device(self._f(*_numpy(args, self._host_ok), **_numpy(kwargs, self._host_ok)))

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._f, name)
        return _Function(value) if callable(value) else value


JOINS = ("concatenate", "stack", "vstack", "hstack")
JOIN_KERNEL_ARRAYS = 8
"""CuPy joins more arrays than this in one kernel that reads a table of their addresses, copied
from the host."""
CONVERSIONS = ("asarray", "array", "asanyarray")
"""The functions that take host data to the device."""


class _Namespace(ModuleType):
    """NumPy's namespace (or a submodule's, e.g. ``linalg``) on device arrays: functions wrapped,
    dtypes, classes and constants as NumPy's, ``ndarray`` the device array type."""

    def __init__(self, module: ModuleType):
        super().__init__(f"tpcore.strict:{module.__name__}")
        self._module = module

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self._module, name)
        if name == "ndarray":
            value = StrictArray
        elif isinstance(value, ModuleType):
            value = (_Random if name == "random" else _Namespace)(value)
        elif callable(value) and not isinstance(value, type):
            value = _Function(value, host_ok=name in CONVERSIONS)
        setattr(self, name, value)
        return value


class _Random(_Namespace):
    """``numpy.random`` with ``default_rng`` giving a :class:`Generator`."""

    def default_rng(self, seed: Any = None) -> Generator:
        return Generator(np.random.default_rng(seed))


GENERATOR_METHODS = ("random", "uniform", "integers", "beta", "chisquare", "dirichlet",
                     "exponential", "f", "geometric", "hypergeometric", "logseries",
                     "standard_exponential", "poisson", "power", "standard_normal", "gamma",
                     "standard_gamma", "binomial")
"""The methods of ``cupy.random.Generator``."""


class Generator:
    """NumPy's ``Generator`` limited to CuPy's methods, drawing device arrays."""

    def __init__(self, rng: np.random.Generator):
        self._rng = rng

    def __getattr__(self, name: str) -> Any:
        if name not in GENERATOR_METHODS:
            raise AttributeError(f"CuPy's random Generator has no method {name!r}")
        return _Function(getattr(self._rng, name))


xp = _Namespace(np)
"""The strict array module: what ``get_xp()`` and ``xp_of(device_array)`` return."""


def to_host(a: StrictArray) -> np.ndarray:
    """A host copy of device array ``a`` (as ``cupy.ndarray.get``)."""
    _synchronising("to_host")
    return a._a.copy()

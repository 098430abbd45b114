"""Array-module selection: NumPy by default, CuPy on request.

Every compute path asks this module for its array module, either from its inputs
(``xp = xp_of(x)``) or from the active backend (``get_xp()``), so the same code runs on both.

The backend is chosen by ``set_backend("numpy" | "numpy-strict" | "cupy")`` or, before the first
call, by the ``TPCORE_BACKEND`` environment variable. CuPy is imported only when selected.
``numpy-strict`` is a testing tool (:mod:`tpcore.strict`): NumPy arrays that refuse host
conversions and NumPy functions as a GPU run would, so that a CPU test run finds host leaks.

Matrix products of the training paths go through :func:`matmul`, so that a GPU step captured
as a CUDA graph can run them on a cuBLAS handle of its own (:func:`on_handle`).

This module only chooses and serves the array module. Whether a fused kernel stands in for a
reference is :mod:`tpcore.dispatch`'s decision; the BLAS threads are :mod:`tpcore.cpu`'s.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np

from tpcore import strict
from tpcore.errors import BackendError

BACKENDS = ("numpy", "numpy-strict", "cupy")
Array = Any
"""An array of the active module: NumPy's, CuPy's or the strict backend's (type hints)."""
DEFAULT_FLOAT = np.float32
"""Training dtype; gradchecks and the looped computer use float64 explicitly."""

_active: ModuleType | None = None


def _load_cupy() -> ModuleType:
    try:
        import cupy
    except ImportError as exc:
        raise BackendError(
            f"backend 'cupy' requested but CuPy is not importable ({exc}); "
            "install tpcore[gpu] on a machine with an NVIDIA GPU"
        ) from exc
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA driver missing or broken
        raise BackendError(f"backend 'cupy' requested but CUDA is unusable: {exc}") from exc
    if count < 1:
        raise BackendError("backend 'cupy' requested but no CUDA device is visible")
    return cupy


def set_backend(name: str) -> ModuleType:
    """Select the array module for all later computations and return it.

    ``name`` is one of :data:`BACKENDS`; CuPy raises :class:`BackendError` when it cannot run.
    """
    global _active
    if name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)}")
    _active = {"numpy": np, "numpy-strict": strict.xp}.get(name) or _load_cupy()
    return _active


def get_xp() -> ModuleType:
    """The active array module (reads ``TPCORE_BACKEND`` the first time)."""
    if _active is None:
        return set_backend(os.environ.get("TPCORE_BACKEND", "numpy").strip().lower() or "numpy")
    return _active


def backend_name() -> str:
    """``"numpy"``, ``"numpy-strict"`` or ``"cupy"``."""
    xp = get_xp()
    return "numpy" if xp is np else "numpy-strict" if xp is strict.xp else "cupy"


def on_gpu(a: Any) -> bool:
    """Whether ``a`` is a CuPy array (checked without importing CuPy)."""
    return type(a).__module__.split(".")[0] == "cupy"


def xp_of(*arrays: Any) -> ModuleType:
    """The array module that owns ``arrays``: CuPy's (or the strict module's) if any of them is a
    CuPy (or strict device) array, else NumPy.

    Never imports CuPy unless a CuPy array is present.
    """
    for a in arrays:
        if isinstance(a, strict.StrictArray):
            return strict.xp
        if on_gpu(a):
            import cupy

            return cupy
    return np


def asarray(a: Any, dtype: Any = None) -> Any:
    """``a`` as an array of the active backend (copied to the device when needed)."""
    return get_xp().asarray(a, dtype=dtype)


def to_host(a: Any) -> Any:
    """``a`` as a NumPy array (no copy when it already is one); scalars pass through."""
    if on_gpu(a):
        return a.get()
    if isinstance(a, strict.StrictArray):
        return strict.to_host(a)
    return np.asarray(a) if not np.isscalar(a) else a


def rng(seed: int | None = None, xp: ModuleType | None = None) -> Any:
    """A seeded random generator of the active (or given) array module.

    Same seed, same backend, same numbers. NumPy and CuPy generators give different streams.
    """
    xp = get_xp() if xp is None else xp
    return xp.random.default_rng(seed)


def no_host_sync() -> contextlib.AbstractContextManager:
    """A context in which the strict backend refuses the conversions that would wait for a GPU
    (:func:`tpcore.strict.no_sync`); a no-op on the other backends. Training steps run in it."""
    return strict.no_sync() if get_xp() is strict.xp else contextlib.nullcontext()


_blas: Any = None
"""The cuBLAS handle of the GPU step being captured (None: products go through the array
module)."""


SPLIT_DEPTH = 1024
"""The length of the pieces :func:`split_matmul` cuts a long sum into."""


def matmul(a: Any, b: Any) -> Any:
    """``a @ b`` (NumPy's rules: broadcast leading axes, 1-D operands). For GPU arrays: on the
    cuBLAS handle of the step being captured while one is set (:func:`on_handle`), since CuPy
    refuses cuBLAS inside a capture; and a small product of a long sum in pieces
    (:func:`split_matmul`)."""
    if on_gpu(a):
        if _long_and_small(a, b):
            return split_matmul(a, b)
        if _blas is not None:
            return _blas.matmul(a, b)
    return a @ b


def _long_and_small(a: Any, b: Any) -> bool:
    """Whether ``a @ b`` sums at least 16 pieces of :data:`SPLIT_DEPTH` terms into matrices of
    at most 128 x 128 entries: a weight's gradient over all tokens of a large batch, whose
    few output tiles would each run the whole sum alone on one multiprocessor."""
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        return False  # a mismatch is left to the product's own error
    k = a.shape[-1]
    return (k >= 16 * SPLIT_DEPTH and k % SPLIT_DEPTH == 0
            and a.shape[-2] * b.shape[-1] <= 128 * 128)


def split_matmul(a: Any, b: Any) -> Any:
    """``a @ b`` for ``a: (..., m, k)``, ``b: (..., k, n)`` with ``k`` a multiple of
    :data:`SPLIT_DEPTH`: the sum over ``k`` as ``k / SPLIT_DEPTH`` products of pieces, batched,
    then summed, ``sum_c a[..., :, c] @ b[..., c, :]`` (what cuBLAS calls split-K): many output
    tiles instead of a few, each with a short sum."""
    pieces = a.shape[-1] // SPLIT_DEPTH
    a4 = a.reshape(*a.shape[:-1], pieces, SPLIT_DEPTH).swapaxes(-3, -2)
    b4 = b.reshape(*b.shape[:-2], pieces, SPLIT_DEPTH, b.shape[-1])
    return matmul(a4, b4).sum(axis=-3)


@contextlib.contextmanager
def on_handle(blas: Any) -> Iterator[None]:
    """Run the products of GPU arrays on ``blas`` (a :class:`tpcore.kernels.cublas.Blas`, whose
    ``matmul`` is ``a @ b``) inside the block: a CUDA graph's warm-up and capture use one handle,
    so the captured step computes exactly what the warm-up step computed."""
    global _blas
    before, _blas = _blas, blas
    try:
        yield
    finally:
        _blas = before


def float_dtype(name: str | None = None) -> Any:
    """Resolve a dtype name (``"float32"``/``"float64"``) or return the default training dtype."""
    if name is None:
        return DEFAULT_FLOAT
    if name not in ("float32", "float64"):
        raise BackendError(f"dtype {name!r} not supported; expected 'float32' or 'float64'")
    return np.dtype(name).type


def scatter_add(target: Any, index: Any, values: Any) -> Any:
    """``target[index[i]] += values[i]`` with repeated indices accumulated, in place.

    ``target: (V, ...)``, ``index: (M,)`` ints, ``values: (M, ...)``. Returns ``target``.
    """
    xp = xp_of(target)
    if on_gpu(target):
        _one_hot_add(target, index, values)
    elif xp is np and target.ndim == 2:
        # bincount over flattened (row, column) cells: twice as fast as np.add.at
        d = target.shape[1]
        cells = (np.asarray(index)[:, None] * d + np.arange(d)).ravel()
        target += np.bincount(cells, weights=values.ravel(), minlength=target.size).reshape(
            target.shape).astype(target.dtype)
    else:
        xp.add.at(target, index, values)
    return target


def _one_hot_add(target: Any, index: Any, values: Any, cells: int = 1 << 24) -> None:
    """``scatter_add`` on a GPU, deterministically: ``target += onehot(index)^T values``, as matrix
    products over chunks of rows whose one-hot block holds at most ``cells`` entries (atomic
    adds, ``cupyx.scatter_add``'s way, sum in a different order on every run, and a paused run
    could not resume bit for bit)."""
    xp = xp_of(target)
    rows = target.shape[0]
    flat_values = values.reshape(len(index), -1).astype(target.dtype)
    ids = xp.arange(rows)
    chunk = max(1, cells // max(1, rows))
    total = None
    for start in range(0, len(index), chunk):
        hot = (index[start:start + chunk, None] == ids).astype(target.dtype)
        part = matmul(hot.T, flat_values[start:start + chunk])
        total = part if total is None else total + part
    if total is not None:
        target += total.reshape(target.shape)

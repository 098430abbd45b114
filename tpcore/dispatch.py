"""Kernel dispatch: when a fused kernel stands in for a readable NumPy reference.

The forward and backward passes of ``tpcore.nn`` and ``tpcore.models.program.ops`` are written
as plain array code, the code to read. Some of them are decorated with :func:`kernel`, which
runs a fused kernel of :mod:`tpcore.kernels` in their place when the arguments suit it: a numba
kernel on host NumPy float arrays, a CuPy kernel on GPU float arrays. Every kernel takes its
reference's arguments and returns what the reference returns (or ``NotImplemented`` for a case
it does not take), so the two are interchangeable and the tests compare them.

:func:`use_kernels` (or ``TPCORE_KERNELS=0`` in the environment) turns the kernels off for the
process; the device-strict backend always runs the references. numba and the kernel modules are
imported only when a kernel first runs, so importing this module stays light.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from tpcore.backend import on_gpu

KERNELS_VARIABLE = "TPCORE_KERNELS"
"""Environment variable: ``0`` runs the NumPy references instead of the fused kernels."""
GPU_KERNELS = "gpu"
"""The module of :mod:`tpcore.kernels` that holds the CuPy kernels."""

_kernels: bool | None = None
"""The switch of :func:`use_kernels`; None until first read (tests set it directly)."""


def use_kernels(on: bool | None = None) -> bool:
    """Whether the fused kernels replace the references (:func:`kernel`): numba's on host float
    arrays, CuPy's on GPU arrays; ``on`` turns them on or off for this process. The default: on
    unless ``TPCORE_KERNELS=0`` (numba's only where numba is importable)."""
    global _kernels
    if on is not None:
        _kernels = bool(on)
    if _kernels is None:
        _kernels = os.environ.get(KERNELS_VARIABLE, "1").strip() != "0"
    return _kernels


@functools.cache
def _has_numba() -> bool:
    """Whether numba can be imported (looked up once, without importing it)."""
    return importlib.util.find_spec("numba") is not None


def kernel(module: str | None, gpu: bool = False) -> Callable[[Callable], Callable]:
    """Decorator: run a kernel in place of the decorated reference when :func:`use_kernels` says
    so: ``tpcore.kernels.MODULE.NAME`` (numba; ``NAME``: the decorated function's) when the first
    argument is a NumPy float32/float64 array (``module=None``: no such kernel), and with
    ``gpu=True`` ``tpcore.kernels.gpu.NAME`` (CuPy) when it is a CuPy float array. The kernel
    takes the reference's arguments (defaults filled in) and returns what it returns, or
    ``NotImplemented`` for a case it does not take, when the reference runs. The strict backend
    always runs the reference; ``f.__wrapped__`` is the reference itself.

    The kernel is looked up by name on every call, so a test may replace it on its module."""

    def decorate(reference: Callable) -> Callable:
        code = reference.__code__
        names = code.co_varnames[: code.co_argcount]
        defaults = dict(zip(names[len(names) - len(reference.__defaults__ or ()):],
                            reference.__defaults__ or ()))
        name = reference.__name__
        host = None if module is None else f"tpcore.kernels.{module}"
        device = f"tpcore.kernels.{GPU_KERNELS}" if gpu else None

        @functools.wraps(reference)
        def dispatch(*args: Any, **kwargs: Any) -> Any:
            first = args[0] if args else None
            path = (host if type(first) is np.ndarray and _has_numba() else
                    device if on_gpu(first) else None)
            if path is not None and first.dtype.char in "fd" and use_kernels():
                fast = getattr(sys.modules.get(path) or importlib.import_module(path), name)
                full = args + tuple(kwargs[n] if n in kwargs else defaults[n]
                                    for n in names[len(args):])
                out = fast(*full)
                if out is not NotImplemented:
                    return out
            return reference(*args, **kwargs)

        return dispatch

    return decorate

"""The host processor while tpcore trains: how many threads NumPy's BLAS uses, and what happens
to subnormal floats.

**Threads.** The products of these small models are tiny; on shared cores a multi-threaded BLAS
spends its time waiting. Training runs on :func:`default_threads` threads (``TPCORE_THREADS``,
else up to two of the cores this process may use) and puts the previous count back afterwards
(:func:`limit_threads`).

**Subnormals.** As a Gumbel temperature falls towards 0.01, float32 softmax tails, samples, their
gradients and Adam's second moments underflow into subnormal numbers (magnitudes below
``finfo(float32).tiny``, 1.2e-38), which many x86 cores, Intel's above all, process one to two
orders of magnitude slower than normal ones. Like TensorFlow and XLA, tpcore trains float32
models with the processor's flush-to-zero and denormals-are-zero modes set
(:func:`flush_subnormals`): a subnormal result is written as zero and a subnormal operand read as
zero. Only values below 1.2e-38 change, far below the float32 resolution of any sum the model
forms. The mode is set on the calling thread (which runs NumPy and the numba kernels) and on
OpenBLAS's worker threads, whose pool is restarted so that its threads start from the calling
thread's mode; when training returns or raises (Ctrl-C included) the caller's mode comes back and
the pool is restarted again, so NumPy outside training behaves as before. ``TPCORE_SUBNORMALS=keep``
trains with subnormals kept, to measure what flushing changes. Float64 work (gradchecks, the
looped computer, belief propagation) never runs in this mode.

Flushing needs an x86-64 processor and numba (the register is reached through
:mod:`tpcore.kernels.fpmode`); elsewhere training runs unchanged and :func:`subnormal_mode` says
why. Restarting OpenBLAS's pool is safe while no other Python thread is inside a BLAS call.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import platform
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

import tpcore
from tpcore.backend import backend_name
from tpcore.errors import TpcoreError

THREADS_VARIABLE = "TPCORE_THREADS"
"""Environment variable: threads of training when none are asked for."""
MAX_DEFAULT_THREADS = 2
"""The default never takes more cores than this: the products of these small models are split
too finely beyond two threads for the synchronisation to pay."""
SUBNORMALS_VARIABLE = "TPCORE_SUBNORMALS"
"""Environment variable: ``flush`` (the default) or ``keep`` subnormals while training float32."""
_X86_64 = ("x86_64", "amd64")


def _cores() -> int:
    """The cores this process may run on."""
    return (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count() or 1)


def default_threads() -> int:
    """Threads of training when none are asked for: ``TPCORE_THREADS`` when set, else the cores
    this process may run on, at most :data:`MAX_DEFAULT_THREADS`. On cores that other jobs keep
    busy a second thread mostly waits: set ``TPCORE_THREADS=1`` (or ``--threads 1``) there.
    """
    text = os.environ.get(THREADS_VARIABLE, "").strip()
    if not text:
        return max(1, min(MAX_DEFAULT_THREADS, _cores()))
    if not text.isdigit() or int(text) < 1:
        raise TpcoreError(f"{THREADS_VARIABLE}={text!r}; expected an integer >= 1")
    return int(text)


def _openblas() -> list[ctypes.CDLL]:
    """Every OpenBLAS library loaded into this process (NumPy's and SciPy's bundle their own)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    return [ctypes.CDLL(lib)
            for lib in sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", maps)))]


def blas_threads(n: int) -> int | None:
    """Limit NumPy's bundled OpenBLAS to ``n`` threads in this process and return the previous
    count, or None when no OpenBLAS is loaded (``OPENBLAS_NUM_THREADS=1`` does the same when
    set before NumPy loads)."""
    for handle in _openblas():
        for prefix in ("scipy_openblas", "openblas"):
            for suffix in ("64_", ""):
                get = getattr(handle, f"{prefix}_get_num_threads{suffix}", None)
                put = getattr(handle, f"{prefix}_set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    before = int(get())
                    put(ctypes.c_int(n))
                    return before
    return None


@contextmanager
def limit_threads(n: int | None = None) -> Iterator[None]:
    """Run the block with NumPy's BLAS on ``n`` threads (:func:`default_threads` when None),
    restoring the previous count afterwards (a no-op where no OpenBLAS is loaded)."""
    n = default_threads() if n is None else n
    if n < 1:
        raise TpcoreError(f"threads must be >= 1, got {n}")
    before = blas_threads(n)
    try:
        yield
    finally:
        if before is not None:
            blas_threads(before)


def restart_blas_threads() -> int:
    """Stop the worker threads of every loaded OpenBLAS; its next threaded call starts new ones,
    which take the floating-point mode of the thread that makes it. Returns how many libraries
    were restarted."""
    count = 0
    for handle in _openblas():
        shutdown = getattr(handle, "blas_thread_shutdown_", None)
        if shutdown is not None:
            shutdown()
            count += 1
    return count


def cpu_name() -> str:
    """The processor's model name (from ``/proc/cpuinfo`` where there is one), its architecture
    and the cores this process may use, e.g. ``"AMD EPYC (x86_64, 2 cores)"``."""
    name = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                name = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    machine = platform.machine() or "unknown architecture"
    return f"{name or platform.processor() or 'unknown processor'} ({machine}, {_cores()} cores)"


def cpu_model() -> str:
    """The processor's vendor, family, model and stepping as ``/proc/cpuinfo`` gives them, e.g.
    ``"AuthenticAMD family 26 model 2 stepping 1"`` (two generations may share a model name,
    and round their products differently: their BLAS picks other kernels); ``""`` where
    there is no such file or it names none of them."""
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip().lower()
            if not key and fields:
                break  # the first processor's block is enough
            if key in ("vendor_id", "cpu family", "model", "stepping"):
                fields.setdefault(key, value.strip())
    except OSError:
        return ""
    parts = [fields.get("vendor_id", "")] + [f"{label} {fields[key]}" for key, label in (
        ("cpu family", "family"), ("model", "model"), ("stepping", "stepping")) if key in fields]
    return " ".join(p for p in parts if p)[:120]


def flush_unsupported() -> str | None:
    """Why subnormals cannot be flushed here (a phrase), or None when they can."""
    if platform.machine().lower() not in _X86_64:
        return f"not an x86-64 processor ({platform.machine() or 'unknown'})"
    if importlib.util.find_spec("numba") is None:
        return "numba is not installed"
    return None


def flush_wanted() -> bool:
    """Whether float32 training flushes subnormals: ``TPCORE_SUBNORMALS`` is ``flush`` (or unset)
    rather than ``keep``."""
    text = os.environ.get(SUBNORMALS_VARIABLE, "flush").strip().lower() or "flush"
    if text not in ("flush", "keep"):
        raise TpcoreError(f"{SUBNORMALS_VARIABLE}={text!r}; expected 'flush' or 'keep'")
    return text == "flush"


def _fpmode() -> Any:
    from tpcore.kernels import fpmode

    return fpmode


def subnormals_flushed() -> bool | None:
    """Whether the calling thread flushes subnormals now (FTZ and DAZ both set); None where that
    cannot be read (:func:`flush_unsupported`)."""
    if flush_unsupported():
        return None
    fpmode = _fpmode()
    bits = fpmode.FTZ | fpmode.DAZ
    return fpmode.get_mxcsr() & bits == bits


@contextmanager
def flush_subnormals(on: bool = True) -> Iterator[bool]:
    """Run the block with subnormals flushed to zero (``on``) on the calling thread and on
    OpenBLAS's workers; yield whether they are. Where flushing is unsupported, or ``on`` is
    False, or the mode is already set, nothing changes. Afterwards the calling thread's register
    is what it was and OpenBLAS's workers restart from it."""
    if not on or flush_unsupported():
        yield False
        return
    fpmode = _fpmode()
    before = fpmode.get_mxcsr()
    wanted = before | fpmode.FTZ | fpmode.DAZ
    if wanted == before:
        yield True
        return
    fpmode.set_mxcsr(wanted)
    try:
        restart_blas_threads()
        yield True
    finally:
        # the block's status flags (inexact, underflow, ...) stay; the control bits go back
        fpmode.set_mxcsr(fpmode.get_mxcsr() & 0x3F | before & ~0x3F)
        restart_blas_threads()


def subnormal_mode() -> str:
    """One line for ``tpcore info``: what float32 training does with subnormals here."""
    reason = flush_unsupported()
    if reason:
        return f"kept: cannot flush them ({reason})"
    if not flush_wanted():
        return f"kept while training ({SUBNORMALS_VARIABLE}=keep)"
    return ("flushed to zero while training float32 (flush-to-zero and denormals-are-zero on "
            "the training thread and OpenBLAS's)")


def training_machine(threads: int) -> dict[str, Any]:
    """What a float32 training run's bits depend on besides its configuration, recorded beside
    its metrics: the array backend, the processor (:func:`cpu_name`, :func:`cpu_model`), the
    BLAS ``threads``, whether subnormals were flushed, and the versions of tpcore and NumPy
    (whose bundled OpenBLAS does the products)."""
    return {"backend": backend_name(), "cpu": cpu_name(), "cpu_model": cpu_model(),
            "threads": threads,
            "subnormals": "flushed" if flush_wanted() and not flush_unsupported() else "kept",
            "tpcore": tpcore.__version__, "numpy": np.__version__}

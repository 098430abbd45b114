"""Memory checked before work: a run's estimated peak against the machine's physical memory,
and for work on a GPU against the GPU's free memory.

Each configuration estimates its own largest arrays (``memory_estimate`` beside the config);
:func:`check_memory` refuses an estimate above the limit, naming both, before anything is
allocated.
"""

from __future__ import annotations

import os
import resource
import sys

from tpcore.backend import backend_name
from tpcore.errors import TpcoreError

FALLBACK_LIMIT = 64 * 2**30
"""The limit in bytes where the system does not report its physical memory."""


def memory_limit() -> tuple[int, str]:
    """The limit in bytes and what it is: physical memory (``SC_PHYS_PAGES * SC_PAGE_SIZE``),
    else :data:`FALLBACK_LIMIT`."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "physical memory"
    except (AttributeError, ValueError, OSError):
        return FALLBACK_LIMIT, "a fixed cap: the system does not report its memory"


def size_text(n_bytes: float) -> str:
    """``n_bytes`` in MiB below 1 GiB, else in GiB."""
    if n_bytes < 2**30:
        return f"{n_bytes / 2**20:.0f} MiB"
    return f"{n_bytes / 2**30:.3g} GiB"


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB."""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / (1024.0 * 1024.0) if sys.platform == "darwin" else kb / 1024.0


def device_memory() -> tuple[int, int] | None:
    """``(free, total)`` bytes of the GPU that the ``cupy`` backend computes on (free counting the
    blocks CuPy's pool holds unused); None on the other backends."""
    if backend_name() != "cupy":
        return None
    import cupy

    free, total = cupy.cuda.runtime.memGetInfo()
    return free + cupy.get_default_memory_pool().free_bytes(), total


def check_memory(estimate: float, what: str, device: bool = False) -> None:
    """Raise if ``estimate`` bytes exceed the memory limit; ``what`` names the run and its sizes.
    ``device``: the arrays live on the active backend, so on a GPU they must also fit its free
    memory (:func:`device_memory`)."""
    limit, source = memory_limit()
    if estimate > limit:
        raise TpcoreError(f"{what} needs about {size_text(estimate)} of memory; the limit is "
                          f"{size_text(limit)} ({source})")
    gpu = device_memory() if device else None
    if gpu is not None and estimate > gpu[0]:
        raise TpcoreError(f"{what} needs about {size_text(estimate)} of GPU memory; the GPU has "
                          f"{size_text(gpu[0])} free of {size_text(gpu[1])}")

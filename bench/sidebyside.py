"""Side-by-side timing for the benches: tpcore's step and an anchor's (PyTorch, the authors'
code) called alternately in one process on the same number of threads, so that whatever else
runs on the shared cores weighs on both alike. The ratio of the two is the figure to read.

``compare(benchmark, {"tpcore": f, "torch": g}, threads=1)`` times ``f`` with pytest-benchmark
(its table row) and records in ``benchmark.extra_info``, for every function, the median and
minimum wall-clock milliseconds of the interleaved calls (blocks of a few calls each, so that
one library's spinning thread pool does not land in the other's timings), the ratios of
tpcore's to each anchor's (``ratio_<name>``: of the medians; ``ratio_<name>_min``: of the
minima), the thread count and the load average before and after.

Both sides run with subnormal floats flushed to zero, as tpcore trains float32 models
(:func:`tpcore.cpu.flush_subnormals`, on the calling thread and OpenBLAS's); the anchor gets the
same mode, which can only help it. :func:`kept` runs a function with subnormals kept instead, to
measure what flushing changes.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from tpcore.backend import asarray, get_xp
from tpcore.cpu import flush_subnormals, flush_unsupported, limit_threads
from tpcore.graphs import step_runner
from tpcore.nn.optim import Optimizer

STEPS = 100_000
"""The most steps a bench's training step is called for (its schedule tables' length)."""


def wait() -> None:
    """Wait for the active backend's device to finish its queued work (a no-op on NumPy), so that
    a timed step includes it."""
    xp = get_xp()
    if xp.__name__ == "cupy":
        xp.cuda.get_current_stream().synchronize()


@contextmanager
def threads(n: int) -> Iterator[None]:
    """NumPy's BLAS, the fused kernels and PyTorch (when imported) on ``n`` threads, subnormals
    flushed to zero."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch else None
    if torch:
        torch.set_num_threads(n)
    try:
        with limit_threads(n), flush_subnormals():
            yield
    finally:
        if torch:
            torch.set_num_threads(before)


def kept(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` run with subnormals kept on the calling thread (flush-to-zero and
    denormals-are-zero cleared for the call); for one-thread timings, where BLAS computes on the
    calling thread too. Where flushing is unsupported, ``fn`` itself."""
    if flush_unsupported():
        return fn
    from tpcore.kernels.fpmode import DAZ, FTZ, get_mxcsr, set_mxcsr

    def call() -> object:
        before = get_mxcsr()
        set_mxcsr(before & ~(FTZ | DAZ))
        try:
            return fn()
        finally:
            set_mxcsr(before)

    return call


def interleaved(fns: dict[str, Callable[[], object]], rounds: int = 15, block: int = 3,
                warmup: int = 2) -> dict[str, np.ndarray]:
    """Wall-clock seconds of each timed call: ``warmup`` calls of each first, then ``rounds``
    rounds giving every function in turn a block of ``block`` timed calls after one untimed
    call (so that the other's thread pool, spinning after its last call, has gone quiet)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            fn()
            for _ in range(block):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    return {name: np.array(t) for name, t in times.items()}


def summary(times: dict[str, np.ndarray], first: str = "tpcore") -> dict[str, float]:
    """Median and minimum milliseconds per function, and ``first``'s ratios to the others."""
    out: dict[str, float] = {}
    for name, t in times.items():
        out[f"{name}_ms"] = round(1000 * float(np.median(t)), 2)
        out[f"{name}_min_ms"] = round(1000 * float(t.min()), 2)
    for name, t in times.items():
        if name != first:
            out[f"ratio_{name}"] = round(float(np.median(times[first]) / np.median(t)), 3)
            out[f"ratio_{name}_min"] = round(float(times[first].min() / t.min()), 3)
    return out


def compare(benchmark, fns: dict[str, Callable[[], object]], threads_: int = 1,
            rounds: int = 7) -> dict[str, float]:
    """Benchmark the first function and time all of them interleaved (module docstring)."""
    load_before = os.getloadavg()[0]
    with threads(threads_):
        times = interleaved(fns, rounds)
        first = next(iter(fns.values()))
        benchmark.pedantic(first, rounds=max(3, rounds // 3), iterations=1)
    info = summary(times, next(iter(fns)))
    info |= {"threads": threads_, "load_before": round(load_before, 2),
             "load_after": round(os.getloadavg()[0], 2)}
    benchmark.extra_info.update(info)
    return info


def training_step(model: object, optimizer: Optimizer, step_fn: Callable, batch: dict,
                  tau: float | None = None, graphs: bool | None = None) -> Callable[[], object]:
    """A zero-argument training step of ``model`` on a fixed ``batch`` (host arrays) at Gumbel
    temperature ``tau``, as :func:`tpcore.train.fit` runs it (:func:`tpcore.graphs.step_runner`:
    captured as a CUDA graph on CuPy unless ``graphs`` is False, eager elsewhere); it waits for
    the device before it returns the loss. Its optimiser is ``step.optimizer``; ``step.describe()``
    says how the steps ran (:meth:`tpcore.graphs.EagerSteps.describe`)."""
    run = step_runner(model, optimizer, step_fn, 0, None, None if tau is None else lambda s: tau,
                      None, 0, STEPS, graphs)
    active = run.active()  # entered for the step's life: the graph's stream, device scalars
    active.__enter__()
    batch = {k: asarray(v) for k, v in batch.items()}
    count = iter(range(STEPS))

    def step() -> object:
        loss = run(next(count), batch)
        wait()
        return loss

    step.optimizer, step.active, step.describe = optimizer, active, run.describe
    return step

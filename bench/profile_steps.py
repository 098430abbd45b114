"""Where a training step's time goes: ``python bench/profile_steps.py [STEPS]`` runs the standard
transformer's bench step and the Transformer Program's (``bench_transformer.py``,
``bench_program_model.py``) under cProfile on the active backend (``TPCORE_BACKEND``) and prints,
for each, the milliseconds per step and the functions with the most time of their own.

On a GPU the host's time is what the profile sees (launching kernels, Python); each step is also
run without waiting for the device at its end, so that the time to queue its work (``queued``)
shows beside the wall-clock time: a step whose wall-clock time is close to its queueing time is
bound by launches, one far above it by the device. There the largest transformer of
``bench_gpu.py`` is profiled too.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_program_model  # noqa: E402
import bench_transformer  # noqa: E402
import sidebyside  # noqa: E402

from tpcore.backend import backend_name, get_xp  # noqa: E402


def _queued(step, steps: int) -> float:
    """Seconds per step to queue ``steps`` steps with the waits at their ends skipped."""
    wait, sidebyside.wait = sidebyside.wait, lambda: None  # the wait every tpcore step ends with
    try:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        queued = (time.perf_counter() - start) / steps
        get_xp().cuda.get_current_stream().synchronize()
    finally:
        sidebyside.wait = wait
    return queued


def profile(name: str, step, steps: int, top: int = 25) -> None:
    for _ in range(3):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    wall = (time.perf_counter() - start) / steps
    gpu = backend_name() == "cupy"
    queued = f", queued in {1000 * _queued(step, steps):.2f} ms" if gpu else ""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        step()
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(top)
    print(f"## {name} on {backend_name()}: {1000 * wall:.2f} ms per step{queued} "
          f"(profiled: {1000 * stats.total_tt / steps:.2f} ms)")
    print(text.getvalue())


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    profile("transformer d64 L2 N16 B256", bench_transformer.tpcore_step(), steps)
    profile("Transformer Program L3 B512", bench_program_model.make_step(3), steps)
    if backend_name() == "cupy":
        big = bench_transformer.tpcore_step(b=256, n=128, layers=6, d=512, h=8, d_mlp=2048)
        profile("transformer d512 L6 N128 B256", big, max(3, steps // 6))


if __name__ == "__main__":
    main()

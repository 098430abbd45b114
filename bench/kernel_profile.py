"""Where a GPU step's device time goes, kernel by kernel, for tpcore and PyTorch side by side:
``TPCORE_BACKEND=cupy python bench/kernel_profile.py [SIZE ...]`` profiles the standard
transformer's training step of ``bench_gpu.py`` at each SIZE (default the largest) under PyTorch's
profiler, which records every kernel the process runs through CUPTI, CuPy's and cuBLAS's
included, and prints, per step: each library's device time, and its kernels grouped by name
(calls, milliseconds, share), largest first.

tpcore's step runs as training runs it (captured as a CUDA graph) and eagerly
(``graphs=False``); the kernels are the same, the eager column shows what the capture saves.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_gpu import TRANSFORMERS  # noqa: E402
from bench_transformer import torch_step, tpcore_step  # noqa: E402

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def device_times(trace: dict) -> dict[str, tuple[int, float]]:
    """``{name: (calls, microseconds)}`` of a Chrome trace's device events."""
    table: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for event in trace.get("traceEvents", []):
        if event.get("cat") in DEVICE_CATEGORIES and "dur" in event:
            row = table[event["name"]]
            row[0] += 1
            row[1] += float(event["dur"])
    return {name: (calls, us) for name, (calls, us) in table.items()}


def profiled(step, steps: int) -> dict[str, tuple[int, float]]:
    """The device events of ``steps`` calls of ``step`` (after three unprofiled ones)."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return device_times(json.loads(path.read_text()))


def report(name: str, table: dict[str, tuple[int, float]], steps: int, top: int = 18) -> None:
    total = sum(us for _, us in table.values())
    print(f"### {name}: {total / steps / 1000:.2f} ms of device time per step, "
          f"{sum(c for c, _ in table.values()) / steps:.0f} device events")
    print("| kernel | calls | ms | share |\n|---|---|---|---|")
    for kernel, (calls, us) in sorted(table.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"| `{kernel[:80]}` | {calls / steps:g} | {us / steps / 1000:.3f} | "
              f"{us / total:.1%} |")
    print()


def main() -> None:
    sizes = sys.argv[1:] or ["d512-L6-N128-B256"]
    for size in sizes:
        b, n, layers, d, h = TRANSFORMERS[size]
        args = dict(b=b, n=n, layers=layers, d=d, h=h, d_mlp=4 * d)
        steps = 3 if d >= 256 else 10
        print(f"## transformer {size}")
        report("tpcore (captured)", profiled(tpcore_step(**args), steps), steps)
        report("tpcore (eager)", profiled(tpcore_step(**args, graphs=False), steps), steps)
        report("PyTorch", profiled(torch_step(**args, device="cuda"), steps), steps)


if __name__ == "__main__":
    main()

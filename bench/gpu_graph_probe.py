"""Can a training step be captured as a CUDA graph through CuPy? ``python bench/gpu_graph_probe.py``
on a GPU machine prints what each route gives, as JSON:

- ``elementwise``: a captured chain of elementwise kernels, replayed (the baseline: CuPy
  supports stream capture);
- ``matmul``: ``a @ b`` inside a capture (CuPy's cuBLAS path);
- ``cublas_direct``: ``cublasSgemm`` called through CuPy's low-level binding on a handle bound to
  the capturing stream, replayed and checked against ``a @ b``;
- ``replay``: microseconds per replay of a captured chain of 200 small
  elementwise kernels, against running them eagerly (what capture saves per launch).
"""

from __future__ import annotations

import json
import time

import numpy as np


def _part(out: dict, name: str, fn) -> None:
    """Run one probe, record its result or its error, and print the results so far."""
    try:
        out[name] = fn()
    except Exception as exc:  # what CuPy or CUDA says is the finding
        out[name] = f"{type(exc).__name__}: {exc}"
    print(json.dumps({name: out[name]}), flush=True)


def main() -> None:
    import cupy as cp
    from cupy_backends.cuda.libs import cublas

    out: dict[str, object] = {"cupy": cp.__version__}
    a = cp.asarray(np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32))
    b = cp.asarray(np.random.default_rng(1).standard_normal((48, 32)).astype(np.float32))
    want = a @ b

    def elementwise() -> str:
        stream, x = cp.cuda.Stream(non_blocking=True), cp.ones(1024, dtype=cp.float32)
        with stream:
            stream.begin_capture()
            y = x * 2 + 1
            graph = stream.end_capture()
        graph.launch(stream)
        stream.synchronize()
        return "ok" if bool((y == 3).all()) else "wrong result"

    def matmul() -> str:
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            try:
                a @ b
            finally:
                stream.end_capture()
        return "ok"

    def cublas_direct() -> str:
        stream = cp.cuda.Stream(non_blocking=True)
        c = cp.zeros((64, 32), dtype=cp.float32)
        handle = cp.cuda.device.get_cublas_handle()
        one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
        try:
            with stream:
                cublas.setStream(handle, stream.ptr)
                stream.begin_capture()
                # row-major c = a b is column-major c^T = b^T a^T
                cublas.sgemm(handle, 0, 0, 32, 64, 48, one.ctypes.data, b.data.ptr, 32,
                             a.data.ptr, 48, zero.ctypes.data, c.data.ptr, 32)
                graph = stream.end_capture()
        finally:
            cublas.setStream(handle, 0)
        graph.launch(stream)
        stream.synchronize()
        return f"ok, max error {float(abs(c - want).max()):.2e}"

    def replay() -> dict:
        stream, z = cp.cuda.Stream(non_blocking=True), cp.zeros(4096, dtype=cp.float32)

        def chain() -> None:
            for _ in range(200):
                z.__iadd__(1.0)

        with stream:
            chain()
            stream.synchronize()
            stream.begin_capture()
            chain()
            graph = stream.end_capture()
            times = {}
            for name, run in (("eager_us", chain), ("replay_us", lambda: graph.launch(stream))):
                run()
                stream.synchronize()
                began = time.perf_counter()
                for _ in range(20):
                    run()
                stream.synchronize()
                times[name] = round((time.perf_counter() - began) / 20 * 1e6, 1)
        return times

    for name, fn in (("elementwise", elementwise), ("matmul", matmul),
                     ("cublas_direct", cublas_direct), ("replay", replay)):
        _part(out, name, fn)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

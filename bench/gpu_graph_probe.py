"""Can a training step be captured as a CUDA graph through CuPy? ``python bench/gpu_graph_probe.py``
on a GPU machine prints what each route gives, as JSON:

- ``elementwise``: a captured chain of elementwise kernels, replayed (the baseline: CuPy
  supports stream capture);
- ``matmul``: ``a @ b`` inside a capture (CuPy's cuBLAS path);
- ``cublas_direct``: ``cublasSgemm`` called through CuPy's low-level binding on a handle bound to
  the capturing stream, replayed and checked against ``a @ b``;
- ``cublas_ctypes``: ``cublasSgemm_v2`` called through ``ctypes`` on a handle of its own (bound to
  the capturing stream, with a workspace of its own, so cuBLAS allocates nothing inside the
  capture), followed by an elementwise kernel, captured, replayed and checked against ``a @ b``;
- ``replay``: microseconds per replay of a captured chain of 200 small
  elementwise kernels, against running them eagerly (what capture saves per launch);
- ``step_like``: a chain shaped like the bench transformer's step (36 products of a
  ``(4096, 64)`` activation with ``(64, 64)`` or ``(64, 256)`` weights, each followed by four
  elementwise kernels): eagerly through CuPy (``a @ b``), eagerly through the ``ctypes`` handle,
  and replayed as one captured graph; microseconds per chain and the largest difference between
  the captured and the eager results.
"""

from __future__ import annotations

import ctypes
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


def _timed(stream, **runs) -> dict:
    """Microseconds per call of each ``name=run``: one warm-up, then 20 calls on ``stream``."""
    times = {}
    for name, run in runs.items():
        run()
        stream.synchronize()
        began = time.perf_counter()
        for _ in range(20):
            run()
        stream.synchronize()
        times[name] = round((time.perf_counter() - began) / 20 * 1e6, 1)
    return times


def _cublas_library() -> ctypes.CDLL:
    """The cuBLAS library CuPy has loaded (found in this process's memory map)."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        paths = {line.split()[-1] for line in maps if "libcublas.so" in line}
    if not paths:
        raise RuntimeError("no libcublas.so in this process (run a product through CuPy first)")
    return ctypes.CDLL(sorted(paths)[0])


class _Handle:
    """A cuBLAS handle of its own on ``stream``, with a 32 MiB workspace; ``gemm(a, b, c)`` writes
    the row-major product ``c = a b`` of float32 arrays (column-major ``c^T = b^T a^T``)."""

    def __init__(self, cp, stream) -> None:
        self.lib = lib = _cublas_library()
        p, i = ctypes.c_void_p, ctypes.c_int
        lib.cublasSgemm_v2.argtypes = [p, i, i, i, i, i, p, p, i, p, i, p, p, i]
        self.handle = p()
        self._check(lib.cublasCreate_v2(ctypes.byref(self.handle)), "create")
        self._check(lib.cublasSetStream_v2(self.handle, p(stream.ptr)), "stream")
        self.workspace = cp.empty(32 << 20, dtype=cp.uint8)
        self._check(lib.cublasSetWorkspace_v2(self.handle, p(self.workspace.data.ptr),
                                              ctypes.c_size_t(self.workspace.nbytes)), "workspace")
        self.one, self.zero = ctypes.c_float(1.0), ctypes.c_float(0.0)

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"cuBLAS {what}: status {status}")

    def gemm(self, a, b, c) -> None:
        (m, k), n = a.shape, b.shape[1]
        self._check(self.lib.cublasSgemm_v2(
            self.handle, 0, 0, n, m, k, ctypes.byref(self.one), b.data.ptr, n, a.data.ptr, k,
            ctypes.byref(self.zero), c.data.ptr, n), "sgemm")


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

    def cublas_ctypes() -> str:
        stream = cp.cuda.Stream(non_blocking=True)
        blas = _Handle(cp, stream)
        c = cp.zeros((64, 32), dtype=cp.float32)
        with stream:
            stream.begin_capture()
            blas.gemm(a, b, c)
            d = c * 2
            graph = stream.end_capture()
            c[...] = 0
            graph.launch(stream)
            stream.synchronize()
        return (f"ok, max error {float(abs(c - want).max()):.2e}, "
                f"{float(abs(d - 2 * want).max()):.2e} after the elementwise kernel")

    def step_like() -> dict:
        stream = cp.cuda.Stream(non_blocking=True)
        blas = _Handle(cp, stream)
        rng = np.random.default_rng(2)
        x = cp.asarray(rng.standard_normal((4096, 64)).astype(np.float32))
        ws = [cp.asarray((rng.standard_normal(s) / 8).astype(np.float32))
              for s in ((64, 64), (64, 256), (256, 64))]

        def chain(product) -> object:
            h = x
            for i in range(36):  # widths 64 -> 64 -> 256 -> 64 -> ...
                h = product(h, ws[i % 3])
                h = cp.tanh(h * 0.5 + 0.1) * 1.01 - 0.001
            return h

        def eager(h, w):
            return h @ w

        def direct(h, w):
            out = cp.empty((h.shape[0], w.shape[1]), dtype=cp.float32)
            blas.gemm(h, w, out)
            return out

        with stream:
            want_h = chain(eager)
            chain(direct)
            stream.synchronize()
            stream.begin_capture()
            got = chain(direct)
            graph = stream.end_capture()
            times = _timed(stream, cupy_eager_us=lambda: chain(eager),
                           ctypes_eager_us=lambda: chain(direct),
                           replay_us=lambda: graph.launch(stream))
            graph.launch(stream)
            stream.synchronize()
            times["max_difference"] = float(abs(got - want_h).max())
        return times

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
            times = _timed(stream, eager_us=chain, replay_us=lambda: graph.launch(stream))
        return times

    for name, fn in (("elementwise", elementwise), ("matmul", matmul),
                     ("cublas_direct", cublas_direct), ("cublas_ctypes", cublas_ctypes),
                     ("replay", replay), ("step_like", step_like)):
        _part(out, name, fn)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

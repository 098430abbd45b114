"""Matrix products on a cuBLAS handle of tpcore's own, for training steps captured as CUDA graphs.

CuPy refuses every cuBLAS call while a stream is being captured (its default handle would
allocate a workspace inside the capture). cuBLAS itself captures: a handle bound to the
capturing stream, with a workspace set beforehand, records its products into the graph like any
kernel. :class:`Blas` is such a handle, called through ``ctypes`` on the cuBLAS library CuPy has
loaded; :meth:`Blas.matmul` computes ``a @ b`` with NumPy's rules (broadcast leading dimensions,
1-D operands) for float32 and float64 arrays, as one ``gemm`` or one strided batched ``gemm``.

Row-major ``C = A B`` is column-major ``C^T = B^T A^T``, so each product passes ``B`` first. An
operand whose last two axes are a row-major matrix (unit column stride) goes as it is; one that
is a transposed view (unit row stride) goes with cuBLAS's transpose flag; any other layout, and
leading axes that do not collapse into one batch stride, are copied to C order first.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

WORKSPACE_BYTES = 32 << 20
"""cuBLAS's workspace per handle (its recommendation for Hopper GPUs)."""
_OP_N, _OP_T = 0, 1


@functools.cache
def _library() -> ctypes.CDLL:
    """The cuBLAS library of this process (the one CuPy loads), with argument types set."""
    import cupy

    cupy.cuda.device.get_cublas_handle()  # loads libcublas into the process
    with open("/proc/self/maps", encoding="utf-8") as maps:
        paths = sorted({line.split()[-1] for line in maps if "libcublas.so" in line})
    lib = ctypes.CDLL(paths[0]) if paths else ctypes.CDLL("libcublas.so")
    p, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    for name in ("cublasSgemm_v2", "cublasDgemm_v2"):
        getattr(lib, name).argtypes = [p, i, i, i, i, i, p, p, i, p, i, p, p, i]
    for name in ("cublasSgemmStridedBatched", "cublasDgemmStridedBatched"):
        getattr(lib, name).argtypes = [p, i, i, i, i, i, p, p, i, ll, p, i, ll, p, p, i, ll, i]
    lib.cublasCreate_v2.argtypes = [p]
    lib.cublasSetStream_v2.argtypes = [p, p]
    lib.cublasSetWorkspace_v2.argtypes = [p, p, ctypes.c_size_t]
    lib.cublasDestroy_v2.argtypes = [p]
    return lib


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"cuBLAS {what} failed with status {status}")


def _matrix(x: Any, stride: int) -> tuple[Any, int, int, int]:
    """``(array, op, ld, stride)``: ``x``'s last two axes ``(r, c)`` as cuBLAS reads them, with
    ``stride`` the batch stride of its leading axes; copied to C order (the stride then
    ``r c``, or 0 for a broadcast operand) when they are neither row-major nor a transposed
    view."""
    r, c = x.shape[-2:]
    e = x.itemsize
    s_r = x.strides[-2] if r > 1 else c * e
    s_c = x.strides[-1] if c > 1 else e
    if s_c == e and s_r % e == 0 and s_r >= c * e and s_r > 0:
        return x, _OP_N, s_r // e, stride
    if s_r == e and s_c % e == 0 and s_c >= r * e:
        return x, _OP_T, s_c // e, stride
    import cupy

    return cupy.ascontiguousarray(x), _OP_N, max(c, 1), r * c if stride else 0


def _batch_stride(x: Any) -> int | None:
    """The one element stride between the matrices of ``x``'s leading axes, or None when they
    do not collapse into one (0: every matrix the same, a broadcast operand)."""
    lead = [(n, s) for n, s in zip(x.shape[:-2], x.strides[:-2]) if n > 1]
    if not lead:
        return 0
    if all(s == 0 for _, s in lead):
        return 0
    for (_, outer), (n, inner) in zip(lead, lead[1:]):
        if outer != inner * n:
            return None
    stride = lead[-1][1]
    return stride // x.itemsize if stride % x.itemsize == 0 and stride > 0 else None


class Blas:
    """A cuBLAS handle on ``stream`` with a workspace of its own (so that nothing is allocated
    inside a capture); :meth:`matmul` is ``a @ b`` on it."""

    def __init__(self, stream: Any) -> None:
        import cupy

        self.lib = _library()
        self.handle = ctypes.c_void_p()
        _check(self.lib.cublasCreate_v2(ctypes.byref(self.handle)), "create")
        self.stream_ptr = None
        self.bind(stream)
        self.workspace = cupy.empty(WORKSPACE_BYTES, dtype=cupy.uint8)
        _check(self.lib.cublasSetWorkspace_v2(self.handle, self.workspace.data.ptr,
                                              WORKSPACE_BYTES), "workspace")
        self.scalars = {np.dtype(np.float32): (ctypes.c_float(1.0), ctypes.c_float(0.0)),
                        np.dtype(np.float64): (ctypes.c_double(1.0), ctypes.c_double(0.0))}

    def bind(self, stream: Any) -> None:
        """Queue the products on ``stream`` from now on."""
        if stream.ptr != self.stream_ptr:
            _check(self.lib.cublasSetStream_v2(self.handle, stream.ptr), "set stream")
            self.stream_ptr = stream.ptr

    def close(self) -> None:
        if self.handle:
            self.lib.cublasDestroy_v2(self.handle)
            self.handle = ctypes.c_void_p()

    def __del__(self) -> None:
        self.close()

    def matmul(self, a: Any, b: Any) -> Any:
        """``a @ b`` for float32 or float64 CuPy arrays of one dtype (NumPy's shape rules),
        computed on this handle; other dtypes raise ``TypeError``."""
        import cupy

        if a.dtype != b.dtype or a.dtype not in self.scalars:
            raise TypeError(f"products on the captured path take float32 or float64 arrays of "
                            f"one dtype, got {a.dtype} and {b.dtype}")
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("matmul: an operand is a scalar")
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        (m, k), (k2, n) = a2.shape[-2:], b2.shape[-2:]
        if k != k2:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align")
        lead = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        out = cupy.empty((*lead, m, n), dtype=a.dtype)
        if out.size and k == 0:
            out.fill(0)
        elif out.size:
            self._gemm(cupy.broadcast_to(a2, (*lead, m, k)),
                       cupy.broadcast_to(b2, (*lead, k, n)), out)
        if a.ndim == 1:
            out = out[..., 0, :]
        if b.ndim == 1:
            out = out[..., 0]
        return out

    def _gemm(self, a: Any, b: Any, out: Any) -> None:
        """``out = a @ b`` for equal leading shapes, ``out`` in C order."""
        import cupy

        self.bind(cupy.cuda.get_current_stream())
        sa, sb = _batch_stride(a), _batch_stride(b)
        if sa is None:
            a, sa = cupy.ascontiguousarray(a), a.shape[-2] * a.shape[-1]
        if sb is None:
            b, sb = cupy.ascontiguousarray(b), b.shape[-2] * b.shape[-1]
        a, op_a, lda, sa = _matrix(a, sa)
        b, op_b, ldb, sb = _matrix(b, sb)
        (m, k), n = a.shape[-2:], b.shape[-1]
        batch = out.size // (m * n)
        one, zero = self.scalars[out.dtype]
        double = out.dtype == np.float64
        if batch == 1:
            gemm = self.lib.cublasDgemm_v2 if double else self.lib.cublasSgemm_v2
            _check(gemm(self.handle, op_b, op_a, n, m, k, ctypes.byref(one), b.data.ptr, ldb,
                        a.data.ptr, lda, ctypes.byref(zero), out.data.ptr, n), "gemm")
            return
        gemm = self.lib.cublasDgemmStridedBatched if double else self.lib.cublasSgemmStridedBatched
        _check(gemm(self.handle, op_b, op_a, n, m, k, ctypes.byref(one), b.data.ptr, ldb, sb,
                    a.data.ptr, lda, sa, ctypes.byref(zero), out.data.ptr, n, m * n, batch),
               "strided batched gemm")

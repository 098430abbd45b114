"""CuPy kernel of :class:`tpcore.counter_rng.CounterRng`: the uniforms of one draw in one launch,
equal bit for bit to the reference :func:`tpcore.counter_rng.uniform_reference`.

One thread per Philox block ``b``: it runs Philox4x32-10 on counter ``(b mod 2^32, b >> 32,
draw, step mod 2^32)`` with the reference's ``uint32`` arithmetic (``mulhi``/``mullo`` from the
64-bit product, sums wrapping modulo ``2^32``) and writes elements ``4b..4b+3`` (float32) or
``2b, 2b+1`` (float64). The step is read from device memory when given as a 0-d array, so that a
captured CUDA graph in which the step is incremented on the device draws fresh numbers on every
replay. CuPy is imported on first use only.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from tpcore.kernels.gpu import NO_FMA

_BLOCK = 128

_PHILOX = r"""
typedef {T} T;

// mulhi and mullo of a 32-bit product, from the 64-bit product
__device__ __forceinline__ unsigned int mulhilo(unsigned int a, unsigned int b, unsigned int* hi) {
    unsigned long long p = (unsigned long long)a * b;
    *hi = (unsigned int)(p >> 32);
    return (unsigned int)p;
}

// Philox4x32-10 of counter c under key (k0, k1), in place (unsigned sums wrap modulo 2^32)
__device__ __forceinline__ void philox4x32(unsigned int c[4], unsigned int k0, unsigned int k1) {
    for (int r = 0; r < 10; ++r) {
        unsigned int hi0, hi1;
        unsigned int lo0 = mulhilo(0xD2511F53u, c[0], &hi0);
        unsigned int lo1 = mulhilo(0xCD9E8D57u, c[2], &hi1);
        unsigned int c1 = c[1], c3 = c[3];
        c[0] = hi1 ^ c1 ^ k0;
        c[1] = lo1;
        c[2] = hi0 ^ c3 ^ k1;
        c[3] = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

// float32: elements 4b + k, k < 4, of words c[k]: (c[k] >> 8) 2^-24, exact, in [0, 1)
__device__ __forceinline__ void store(float* o, long long left, const unsigned int c[4]) {
    for (int k = 0; k < 4 && k < left; ++k) o[k] = (float)(c[k] >> 8) * 5.9604644775390625e-08f;
}

// float64: elements 2b + j, j < 2, of words c[2j], c[2j+1]:
// ((c[2j] >> 5) 2^26 + (c[2j+1] >> 6)) 2^-53, exact, in [0, 1)
__device__ __forceinline__ void store(double* o, long long left, const unsigned int c[4]) {
    for (int j = 0; j < 2 && j < left; ++j) {
        unsigned long long m = ((unsigned long long)(c[2 * j] >> 5) << 26) | (c[2 * j + 1] >> 6);
        o[j] = (double)m * 1.1102230246251565404236316680908203125e-16;
    }
}

// out: n uniforms of draw `draw` of step *step_ptr (when not null) or `step`; thread b computes
// Philox block b, which holds 16 / sizeof(T) elements
extern "C" __global__ void philox_uniform(T* out, long long n, unsigned int key0,
                                          unsigned int key1, unsigned int draw, long long step,
                                          const long long* step_ptr) {
    long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long first = b * (long long)(16 / sizeof(T));
    if (first >= n) return;
    unsigned int c[4] = {(unsigned int)b, (unsigned int)((unsigned long long)b >> 32), draw,
                         (unsigned int)(step_ptr ? *step_ptr : step)};
    philox4x32(c, key0, key1);
    store(out + first, n - first, c);
}
"""


def _cupy() -> Any:
    import cupy

    return cupy


@functools.cache
def _kernel(char: str) -> Any:
    module = _cupy().RawModule(code=_PHILOX.replace("{T}", "float" if char == "f" else "double"),
                               options=NO_FMA)
    return module.get_function("philox_uniform")


def philox_uniform(out: Any, key0: int, key1: int, draw: int, step: Any) -> None:
    """Fill ``out`` (a C-contiguous float32 or float64 CuPy array, any shape, ``n`` elements in
    C order) with the uniforms of draw ``draw`` under key ``(key0, key1)``, in one launch on the
    current stream.

    ``key0``, ``key1``, ``draw``: ints in ``[0, 2^32)``. ``step``: an int in ``[0, 2^32)`` (passed
    by value), or a 0-d integer CuPy array that the kernel reads on the device (never on the
    host); another integer dtype than int64 is cast first with ``astype``, a device operation but
    a temporary array, so a CUDA graph capture should pass int64.
    """
    n = out.size
    if n == 0:
        return
    if isinstance(step, (int, np.integer)):
        value, pointer = np.int64(step), np.uint64(0)  # a null step pointer
    else:
        value, pointer = np.int64(0), step if step.dtype == np.int64 else step.astype(np.int64)
    blocks = -(-n * out.itemsize // 16)  # a Philox block's 16 bytes hold 16 / itemsize elements
    _kernel(out.dtype.char)((-(-blocks // _BLOCK),), (_BLOCK,),
                            (out, np.int64(n), np.uint32(key0), np.uint32(key1),
                             np.uint32(draw), value, pointer))

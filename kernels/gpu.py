"""CuPy kernels: one launch where the references (:mod:`tpcore.nn.functional`,
:mod:`tpcore.nn.attention`, :mod:`tpcore.nn.losses`, :mod:`tpcore.nn.relax`,
:mod:`tpcore.nn.optim`) launch several, for GPU arrays.

Each function takes its reference's arguments and returns what it returns, or ``NotImplemented``
for a case it does not take (then the reference runs): :func:`tpcore.dispatch.kernel` dispatches
here when the first argument is a CuPy array. The arithmetic is the reference's, element by
element, in the arrays' dtype, without fused multiply-adds (:data:`NO_FMA`); sums along a row
run in order within a thread (and across a warp's lanes by shuffles), so they round differently
from the reference's reductions (within float32 rounding; tested against the references on a
GPU).

The counter-based noise of :mod:`tpcore.counter_rng` is one kernel too (:func:`philox_fill`).

Row kernels (softmax, attention's masked softmax, log-softmax, layer norm and their backwards)
give one thread a whole row of the last axis when rows are short (fewer than :data:`WARP_ROWS`
entries: attention over a few tokens, the classes of a small vocabulary), and one warp of 32
threads a row otherwise (layer norm over ``d`` features, attention over a hundred tokens), the
lanes reading the row in coalesced strides and summing with warp shuffles; each kernel takes the
lanes of a row as its last argument. Column sums (bias and gain gradients) are products with a ones
vector, which cuBLAS runs as one matrix-vector product: CuPy's reduction over the first axis of
a tall ``(rows, d)`` array gives each of the ``d`` outputs one block. CuPy is imported on first
use only.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from tpcore.backend import matmul

_GELU_C = math.sqrt(2.0 / math.pi)
_BLOCK = 128
WARP_ROWS = 32
"""The row length from which the row kernels give a row one warp instead of one thread."""
NO_FMA = ("--fmad=false",)
"""Compiler options of every kernel here: no fused multiply-adds, so that each product is rounded
before it is added, as in the references (a fused ``a * b - c`` keeps the product's low bits:
with ``a * b == c`` it gives the product's rounding error instead of 0)."""


def _cupy() -> Any:
    import cupy

    return cupy


_GELU = """
T x2 = x * x;
T t = tanh(c * x * (T(1) + T(0.044715) * x2));
T d = (T(1) - t * t) * x * (half_c * (T(1) + T(0.134145) * x2));
T h = (t + T(1)) * T(0.5);
deriv = d + h;
y = x * h;
"""
"""The tanh GELU ``y`` of ``x`` and its derivative (:func:`tpcore.nn.functional.gelu_forward`)."""


@functools.cache
def _elementwise(name: str) -> Any:
    cp = _cupy()
    if name == "adam":
        return cp.ElementwiseKernel(
            "T g, T b1, T c1, T b2, T c2, T step, T eps", "T w, T m, T v",
            "m = b1 * m + c1 * g; v = b2 * v + c2 * (g * g); w -= step * m / (sqrt(v) + eps);",
            "tpcore_adam", options=NO_FMA)
    if name == "gumbel":
        return cp.ElementwiseKernel(
            "T tiny, T top", "T u", "T x = min(max(u, tiny), top); u = -log(-log(x));",
            "tpcore_gumbel", options=NO_FMA)
    if name == "gelu":
        return cp.ElementwiseKernel("T x, T c, T half_c", "T y, T deriv", _GELU, "tpcore_gelu",
                                    options=NO_FMA)
    if name == "linear_gelu":
        return cp.ElementwiseKernel(
            "T u, raw T b, uint32 n, T c, T half_c", "T y, T deriv",
            "T x = u + b[static_cast<unsigned int>(i) % n];" + _GELU, "tpcore_linear_gelu",
            options=NO_FMA)
    if name == "cross_entropy":
        return cp.ElementwiseKernel(
            "T logp, T w, I t, I col", "T d",
            "T s = -w; T dl = col == t ? s : T(0) * s; d = dl - exp(logp) * s;",
            "tpcore_cross_entropy", options=NO_FMA)
    raise KeyError(name)


_ROWS = r"""
typedef {T} T;

// Each row of k entries is read by w lanes (threads) together: w = 1, one thread a row, or
// w = 32, one warp a row (rows of at least 32 entries, so that every lane holds one). Lane l
// reads entries l, l + w, ...; the lanes' partial sums and maxima combine by shuffles, which
// with w = 1 leave a thread's in-order sum as it is.
__device__ __forceinline__ T lanes_sum(T v, int w) {
    for (int o = w >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ T lanes_max(T v, int w) {
    for (int o = w >> 1; o > 0; o >>= 1) {
        T u = __shfl_xor_sync(0xffffffffu, v, o);
        v = u > v ? u : v;
    }
    return v;
}

// A row y of k logits, m their maximum, becomes exp(y - m) / sum exp(y - m) in place.
__device__ __forceinline__ void normalise_row(T* yr, T m, int k, int lane, int w) {
    T s = 0;
    for (int j = lane; j < k; j += w) {
        T e = exp(yr[j] - m);
        yr[j] = e;
        s += e;
    }
    s = lanes_sum(s, w);
    for (int j = lane; j < k; j += w) yr[j] = yr[j] / s;
}

#define ROW_AND_LANE                                                      \
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;       \
    long long r = t / w;                                                  \
    int lane = (int)(t % w);                                              \
    if (r >= rows) return;

extern "C" __global__ void softmax_rows(const T* x, const T* g, T* y, long long rows, int k,
                                        T tau_value, const T* tau_at, int has_g, int w) {
    ROW_AND_LANE
    T tau = tau_at ? *tau_at : tau_value;
    const T* xr = x + r * k;
    const T* gr = g + r * k;
    T* yr = y + r * k;
    T m = (has_g ? xr[lane] + gr[lane] : xr[lane]) / tau;
    for (int j = lane; j < k; j += w) {
        T z = (has_g ? xr[j] + gr[j] : xr[j]) / tau;
        yr[j] = z;
        m = z > m ? z : m;
    }
    normalise_row(yr, lanes_max(m, w), k, lane, w);
}

// softmax(where(mask, scale * x, masked)) of attention scores (B, H, Nq, Nk), one row a query:
// row r is batch b = r / (nh nq), head h = r / nq % nh, query i = r % nq; the mask (null: none)
// is C-order (mb, mh, nq, nk) with mb in {1, B}, mh in {1, nh} (full_b, full_h: not broadcast).
extern "C" __global__ void masked_softmax_rows(const T* x, const bool* mask, T* y,
                                               long long rows, int k, T scale, T masked,
                                               int nh, int nq, int full_b, int full_h, int w) {
    ROW_AND_LANE
    const T* xr = x + r * k;
    T* yr = y + r * k;
    long long b = r / ((long long)nh * nq);
    int h = (int)(r / nq % nh), i = (int)(r % nq);
    const bool* mr = mask ? mask + (((full_b ? b : 0) * (full_h ? nh : 1) + (full_h ? h : 0))
                                    * nq + i) * k : 0;
    T m = (!mr || mr[lane]) ? xr[lane] * scale : masked;
    for (int j = lane; j < k; j += w) {
        T z = (!mr || mr[j]) ? xr[j] * scale : masked;
        yr[j] = z;
        m = z > m ? z : m;
    }
    normalise_row(yr, lanes_max(m, w), k, lane, w);
}

extern "C" __global__ void softmax_rows_backward(const T* dy, const T* y, T* dx, long long rows,
                                                 int k, T tau_value, const T* tau_at, int w) {
    ROW_AND_LANE
    T tau = tau_at ? *tau_at : tau_value;
    const T* dyr = dy + r * k;
    const T* yr = y + r * k;
    T* dxr = dx + r * k;
    T s = 0;
    for (int j = lane; j < k; j += w) s += dyr[j] * yr[j];
    s = lanes_sum(s, w);
    for (int j = lane; j < k; j += w) dxr[j] = yr[j] * (dyr[j] - s) / tau;
}

extern "C" __global__ void log_softmax_rows(const T* x, T* y, long long rows, int k, int w) {
    ROW_AND_LANE
    const T* xr = x + r * k;
    T* yr = y + r * k;
    T m = xr[lane];
    for (int j = lane + w; j < k; j += w) m = xr[j] > m ? xr[j] : m;
    m = lanes_max(m, w);
    T s = 0;
    for (int j = lane; j < k; j += w) s += exp(xr[j] - m);
    T ls = log(lanes_sum(s, w));
    for (int j = lane; j < k; j += w) yr[j] = (xr[j] - m) - ls;
}

extern "C" __global__ void log_softmax_rows_backward(const T* dy, const T* y, T* dx,
                                                     long long rows, int k, int w) {
    ROW_AND_LANE
    const T* dyr = dy + r * k;
    const T* yr = y + r * k;
    T* dxr = dx + r * k;
    T s = 0;
    for (int j = lane; j < k; j += w) s += dyr[j];
    s = lanes_sum(s, w);
    for (int j = lane; j < k; j += w) dxr[j] = dyr[j] - exp(yr[j]) * s;
}

extern "C" __global__ void layer_norm_rows(const T* x, const T* gamma, const T* beta, T* y,
                                           T* xhat, T* inv, long long rows, int d, T eps,
                                           int w) {
    ROW_AND_LANE
    const T* xr = x + r * d;
    T* yr = y + r * d;
    T* hr = xhat + r * d;
    T s = 0;
    for (int j = lane; j < d; j += w) s += xr[j];
    T mean = lanes_sum(s, w) / d;
    T q = 0;
    for (int j = lane; j < d; j += w) {
        T c = xr[j] - mean;
        hr[j] = c;
        q += c * c;
    }
    T iv = T(1) / sqrt(lanes_sum(q, w) / d + eps);
    if (lane == 0) inv[r] = iv;
    for (int j = lane; j < d; j += w) {
        T h = hr[j] * iv;
        hr[j] = h;
        yr[j] = gamma[j] * h + beta[j];
    }
}

extern "C" __global__ void layer_norm_rows_backward(const T* dy, const T* xhat, const T* inv,
                                                    const T* gamma, T* dx, long long rows,
                                                    int d, int w) {
    ROW_AND_LANE
    const T* dyr = dy + r * d;
    const T* hr = xhat + r * d;
    T* dxr = dx + r * d;
    T sg = 0, sgh = 0;
    for (int j = lane; j < d; j += w) {
        T g = dyr[j] * gamma[j];
        sg += g;
        sgh += g * hr[j];
    }
    T mg = lanes_sum(sg, w) / d, mgh = lanes_sum(sgh, w) / d, iv = inv[r];
    for (int j = lane; j < d; j += w) dxr[j] = iv * (dyr[j] * gamma[j] - mg - hr[j] * mgh);
}
"""


@functools.cache
def _rows(name: str, char: str) -> Any:
    cp = _cupy()
    module = cp.RawModule(code=_ROWS.replace("{T}", "float" if char == "f" else "double"),
                          options=NO_FMA)
    return module.get_function(name)


def _launch(name: str, rows: int, k: int, dtype: Any, *args: Any) -> None:
    """Run row kernel ``name`` over ``rows`` rows of ``k`` entries: one thread a row, or one
    warp a row from :data:`WARP_ROWS` entries on (its last argument, the lanes of a row)."""
    lanes = 32 if k >= WARP_ROWS else 1
    grid = (max(1, -(-rows * lanes // _BLOCK)),)
    _rows(name, np.dtype(dtype).char)(grid, (_BLOCK,), (*args, np.int32(lanes)))


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


@functools.cache
def _philox(char: str) -> Any:
    module = _cupy().RawModule(code=_PHILOX.replace("{T}", "float" if char == "f" else "double"),
                               options=NO_FMA)
    return module.get_function("philox_uniform")


@functools.lru_cache(maxsize=16)
def _ones(n: int, char: str, device: int) -> Any:
    return _cupy().ones(n, dtype=char)


def _column_sum(x: Any) -> Any:
    """``x.sum(axis=0)`` of a 2-D array as the product ``ones @ x`` (one cuBLAS launch)."""
    return matmul(_ones(x.shape[0], x.dtype.char, _cupy().cuda.Device().id), x)


def _last_axis(axis: int, *arrays: Any) -> bool:
    """Whether the row kernels take these arrays: ``axis`` the last, all C-contiguous, of one
    float shape and dtype, with at least one row."""
    first = arrays[0]
    return (axis in (-1, first.ndim - 1) and first.size > 0
            and all(a.flags.c_contiguous and a.shape == first.shape and a.dtype == first.dtype
                    for a in arrays))


def _rows_of(x: Any) -> tuple[int, int]:
    k = x.shape[-1]
    return x.size // k, k


def adam_update(w: Any, g: Any, m: Any, v: Any, b1: float, b2: float, step: float,
                eps: float) -> Any:
    """:func:`tpcore.nn.optim.adam_update` in one launch."""
    if not (w.dtype == g.dtype == m.dtype == v.dtype) or w.shape != g.shape:
        return NotImplemented
    _elementwise("adam")(g, b1, 1 - b1, b2, 1 - b2, step, eps, w, m, v)
    return None


def philox_fill(out: Any, key0: int, key1: int, draw: int, step: Any) -> Any:
    """:func:`tpcore.counter_rng.philox_fill` in one launch: one thread per Philox block ``b``
    runs Philox4x32-10 on counter ``(b mod 2^32, b >> 32, draw, step mod 2^32)`` with the
    reference's ``uint32`` arithmetic and writes its 4 (float32) or 2 (float64) elements. A
    ``step`` given as a 0-d integer array is read on the device (cast to int64 first if it is
    not), so a captured CUDA graph that increments it draws fresh numbers at every replay."""
    if out.size == 0:
        return out
    if isinstance(step, (int, np.integer)):
        value, pointer = np.int64(step), np.uint64(0)  # a null step pointer
    else:
        value, pointer = np.int64(0), step if step.dtype == np.int64 else step.astype(np.int64)
    blocks = -(-out.size * out.itemsize // 16)  # a block's 16 bytes hold 16 / itemsize elements
    _philox(out.dtype.char)((-(-blocks // _BLOCK),), (_BLOCK,),
                            (out, np.int64(out.size), np.uint32(key0), np.uint32(key1),
                             np.uint32(draw), value, pointer))
    return out


def gumbel_from_uniform(u: Any) -> Any:
    """:func:`tpcore.nn.relax.gumbel_from_uniform` in one launch (in place)."""
    info = np.finfo(u.dtype)
    _elementwise("gumbel")(info.tiny, 1.0 - info.eps, u)
    return u


def gelu_forward(x: Any) -> Any:
    """:func:`tpcore.nn.functional.gelu_forward` in one launch."""
    cp = _cupy()
    y, deriv = cp.empty_like(x), cp.empty_like(x)
    _elementwise("gelu")(x, _GELU_C, 0.5 * _GELU_C, y, deriv)
    return y, deriv


def linear_gelu_forward(x: Any, w: Any, b: Any) -> Any:
    """:func:`tpcore.nn.functional.linear_gelu_forward`: one product over all leading
    dimensions, then the bias and the GELU in one pass over it (the sum ``x W + b`` is never
    written)."""
    if (b is None or not x.dtype == w.dtype == b.dtype or w.ndim != 2 or w.shape[1] != b.size
            or x.size // max(x.shape[-1], 1) * w.shape[1] >= 2**32):
        return NotImplemented
    u = matmul(x.reshape(-1, x.shape[-1]), w)
    cp = _cupy()
    y, deriv = cp.empty_like(u), cp.empty_like(u)
    _elementwise("linear_gelu")(u, b, np.uint32(b.size), _GELU_C, 0.5 * _GELU_C, y, deriv)
    shape = (*x.shape[:-1], w.shape[1])
    return y.reshape(shape), ((x, w, True), deriv.reshape(shape))


def _temperature(tau: Any, dtype: Any) -> tuple[Any, Any]:
    """A row kernel's two temperature arguments: the value and a null pointer for a number,
    or 1 and a pointer to it for a 0-d device array (a captured step's temperature, read on the
    device at every replay)."""
    if isinstance(tau, (int, float, np.floating)):
        return dtype.type(tau), np.uintp(0)
    return dtype.type(1), tau.astype(dtype, copy=False)


def _softmax(x: Any, noise: Any, tau: Any) -> Any:
    cp = _cupy()
    y = cp.empty_like(x)
    rows, k = _rows_of(x)
    _launch("softmax_rows", rows, k, x.dtype, x, x if noise is None else noise, y, np.int64(rows),
            np.int32(k), *_temperature(tau, x.dtype), np.int32(noise is not None))
    return y


def softmax(x: Any, axis: int = -1) -> Any:
    """:func:`tpcore.nn.functional.softmax` along the last axis, one thread per row."""
    if not _last_axis(axis, x):
        return NotImplemented
    return _softmax(x, None, 1.0)


def masked_softmax(scores: Any, mask: Any, scale: float, masked_score: float = -1e9) -> Any:
    """:func:`tpcore.nn.attention.masked_softmax`: scale, mask and softmax in one row kernel,
    for C-order scores ``(B, H, Nq, Nk)`` and a boolean mask broadcast along ``B`` or ``H``
    only (the reference scales, masks and normalises in passes of their own)."""
    if scores.ndim != 4 or not _last_axis(-1, scores):
        return NotImplemented
    b, h, nq, nk = scores.shape
    full_b = full_h = 0
    if mask is not None:
        mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
        if (mask.dtype != np.bool_ or mask.shape[2:] != (nq, nk) or mask.shape[0] not in (1, b)
                or mask.shape[1] not in (1, h)):
            return NotImplemented
        mask = _cupy().ascontiguousarray(mask)
        full_b, full_h = int(mask.shape[0] == b), int(mask.shape[1] == h)
    y = _cupy().empty_like(scores)
    rows = b * h * nq
    _launch("masked_softmax_rows", rows, nk, scores.dtype, scores,
            np.uintp(0) if mask is None else mask, y, np.int64(rows), np.int32(nk),
            scores.dtype.type(scale), scores.dtype.type(masked_score), np.int32(h), np.int32(nq),
            np.int32(full_b), np.int32(full_h))
    return y


def gumbel_softmax_forward(logits: Any, noise: Any, tau: Any, hard: bool = False,
                           axis: int = -1) -> Any:
    """:func:`tpcore.nn.relax.gumbel_softmax_forward` (soft samples, last axis), the noise
    added and the temperature divided inside the row kernel (``tau`` a number or a 0-d device
    array)."""
    if hard or not _last_axis(axis, logits, *(() if noise is None else (noise,))):
        return NotImplemented
    y = _softmax(logits, noise, tau)
    return y, (y, tau, axis)


def softmax_backward(dy: Any, cache: tuple) -> Any:
    """:func:`tpcore.nn.functional.softmax_backward` along the last axis."""
    y, tau, axis = cache
    if not _last_axis(axis, dy, y):
        return NotImplemented
    dx = _cupy().empty_like(dy)
    rows, k = _rows_of(dy)
    _launch("softmax_rows_backward", rows, k, dy.dtype, dy, y, dx, np.int64(rows), np.int32(k),
            *_temperature(tau, dy.dtype))
    return dx


def log_softmax_forward(x: Any, axis: int = -1) -> Any:
    """:func:`tpcore.nn.functional.log_softmax_forward` along the last axis."""
    if not _last_axis(axis, x):
        return NotImplemented
    y = _cupy().empty_like(x)
    rows, k = _rows_of(x)
    _launch("log_softmax_rows", rows, k, x.dtype, x, y, np.int64(rows), np.int32(k))
    return y, (y, axis)


def log_softmax_backward(dy: Any, cache: tuple) -> Any:
    """:func:`tpcore.nn.functional.log_softmax_backward` along the last axis."""
    y, axis = cache
    if not _last_axis(axis, dy, y):
        return NotImplemented
    dx = _cupy().empty_like(dy)
    rows, k = _rows_of(dy)
    _launch("log_softmax_rows_backward", rows, k, dy.dtype, dy, y, dx, np.int64(rows), np.int32(k))
    return dx


def cross_entropy_grad(logp: Any, targets: Any, w: Any) -> Any:
    """:func:`tpcore.nn.losses.cross_entropy_grad` in one elementwise pass (the reference
    builds the one-hot targets, scales them and runs the log-softmax's backward)."""
    if (logp.dtype != w.dtype or targets.dtype.kind not in "iu"
            or not logp.shape[:-1] == w.shape == targets.shape):
        return NotImplemented
    cols = _cupy().arange(logp.shape[-1], dtype=targets.dtype)
    return _elementwise("cross_entropy")(logp, w[..., None], targets[..., None], cols)


def layer_norm_forward(x: Any, gamma: Any, beta: Any, eps: float = 1e-5) -> Any:
    """:func:`tpcore.nn.functional.layer_norm_forward` (the cache's ``inv`` shaped
    ``(..., 1)``)."""
    d = x.shape[-1]
    if not (_last_axis(-1, x) and gamma.shape == beta.shape == (d,)
            and gamma.dtype == beta.dtype == x.dtype
            and gamma.flags.c_contiguous and beta.flags.c_contiguous):
        return NotImplemented
    cp = _cupy()
    rows, _ = _rows_of(x)
    y, xhat = cp.empty_like(x), cp.empty_like(x)
    inv = cp.empty(x.shape[:-1] + (1,), dtype=x.dtype)
    _launch("layer_norm_rows", rows, d, x.dtype, x, gamma, beta, y, xhat, inv, np.int64(rows),
            np.int32(d), x.dtype.type(eps))
    return y, (xhat, inv, gamma)


def layer_norm_backward(dy: Any, cache: tuple) -> Any:
    """:func:`tpcore.nn.functional.layer_norm_backward`: ``dx`` in the row kernel, ``dgamma``
    and ``dbeta`` as column sums."""
    xhat, inv, gamma = cache
    d = dy.shape[-1]
    if not (_last_axis(-1, dy, xhat) and inv.flags.c_contiguous and inv.size == dy.size // d
            and gamma.shape == (d,) and gamma.dtype == dy.dtype == inv.dtype
            and gamma.flags.c_contiguous):
        return NotImplemented
    dx = _cupy().empty_like(dy)
    rows, _ = _rows_of(dy)
    _launch("layer_norm_rows_backward", rows, d, dy.dtype, dy, xhat, inv, gamma, dx,
            np.int64(rows), np.int32(d))
    flat = dy.reshape(-1, d)
    return dx, _column_sum(flat * xhat.reshape(-1, d)), _column_sum(flat)


def linear_forward(x: Any, w: Any, b: Any = None) -> Any:
    """:func:`tpcore.nn.functional.linear_forward` as one product over all leading dimensions
    (``(B, N, D) @ (D, E)`` would run as ``B`` batched products), the bias added in place."""
    if x.dtype != w.dtype or w.ndim != 2 or (b is not None and b.dtype != x.dtype):
        return NotImplemented
    y = matmul(x.reshape(-1, x.shape[-1]), w)
    if b is not None:
        y += b
    return y.reshape(*x.shape[:-1], w.shape[1]), (x, w, b is not None)


def linear_backward(dy: Any, cache: tuple) -> Any:
    """:func:`tpcore.nn.functional.linear_backward` with two-dimensional products and the bias
    gradient as a column sum (:func:`_column_sum`)."""
    x, w, has_b = cache
    if not dy.dtype == x.dtype == w.dtype or w.ndim != 2:
        return NotImplemented
    flat = dy.reshape(-1, dy.shape[-1])
    dx = matmul(flat, w.T).reshape(*dy.shape[:-1], w.shape[0])
    dw = matmul(x.reshape(-1, x.shape[-1]).T, flat)
    return dx, dw, (_column_sum(flat) if has_b else None)

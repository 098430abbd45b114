"""Elementary functions for the fused kernels: ``exp``, ``log`` and ``tanh`` that compile to
vector instructions in float32 loops, and the exact ``math`` functions in float64.

numba calls the C library's ``expf``/``logf``/``tanhf`` one element at a time, so a loop that
uses them does not vectorise; these float32 versions are branch-free polynomials that LLVM turns
into AVX-512 or AVX2 code, accurate to about 1 ulp (exp, log) and 2 ulp (tanh), which the tests
check against NumPy. A float64 argument takes ``math.exp``/``math.log``/``math.tanh``: the float64
path is the one the gradchecks and the equality tests use, so it stays exact.

``exp(x)``: ``x = n ln2 + r`` with ``|r| <= ln2 / 2`` (two-part ``ln2``), ``e^r`` by a degree-6
polynomial, ``2^n`` built from its exponent bits; ``x`` is clamped to ``[-87.3, 88.7]`` so the
result stays a normal float (``e^-87.3`` is 1.2e-38, ~0 next to any softmax row's maximum).
``log(x)`` for normal ``x > 0``: ``x = 2^e m`` with ``m`` in ``[sqrt(2)/2, sqrt(2))``, then
``log(m)`` by fdlibm's ``logf`` polynomial in ``s = (m - 1) / (m + 1)``.
``tanh(x)``: Eigen's rational approximation (degree 13 over degree 6) on ``[-7.9, 7.9]``, where
float32 ``tanh`` is already +-1 beyond.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

F32 = np.float32
I32 = np.int32
JIT = {"fastmath": {"reassoc", "contract", "nsz", "arcp", "afn"}, "error_model": "numpy"}
"""Options of every kernel: reassociation (vectorised sums), no division-by-zero checks (which
stop vectorisation); NaN and infinity keep their IEEE meaning, so a diverging run still shows."""


@intrinsic
def _bits_to_f32(typingctx, x):  # noqa: ARG001 (numba's intrinsic signature)
    """Reinterpret an int32 as the float32 with the same bits."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


@intrinsic
def _f32_to_bits(typingctx, x):  # noqa: ARG001
    """Reinterpret a float32 as the int32 with the same bits."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(types.float32), codegen


def exp(x):
    """``e^x`` (float32: polynomial; float64: ``math.exp``)."""
    return math.exp(x)


def log(x):
    """``log(x)`` for ``x > 0`` (float32: polynomial; float64: ``math.log``)."""
    return math.log(x)


def tanh(x):
    """``tanh(x)`` (float32: rational approximation; float64: ``math.tanh``)."""
    return math.tanh(x)


@njit(fastmath={"contract"}, error_model="numpy")
def _reduce_ln2(x, n):
    """``x - n ln2`` with ``ln2`` in two parts (Cody-Waite), kept in this order: the kernels'
    reassociation would fold the two parts into one and lose the low bits."""
    return (x - n * F32(0.693145751953125)) - n * F32(1.428606765330187e-06)


def _exp32(x):
    x = min(max(x, F32(-87.3)), F32(88.7))
    n = np.floor(x * F32(1.4426950408889634) + F32(0.5))  # float32, so r stays float32
    r = _reduce_ln2(x, n)
    p = F32(1.9875691500e-4)
    p = p * r + F32(1.3981999507e-3)
    p = p * r + F32(8.3334519073e-3)
    p = p * r + F32(4.1665795894e-2)
    p = p * r + F32(1.6666665459e-1)
    p = p * r + F32(5.0000001201e-1)
    p = p * r * r + r + F32(1.0)
    return p * _bits_to_f32(I32((I32(n) + I32(127)) << I32(23)))


def _log32(x):
    bits = _f32_to_bits(x)
    e = ((bits >> I32(23)) & I32(255)) - I32(127)
    m = _bits_to_f32((bits & I32(0x7FFFFF)) | I32(0x3F800000))
    big = m > F32(1.41421356)
    m = m * F32(0.5) if big else m
    e = e + I32(1) if big else e
    f = m - F32(1.0)
    s = f / (F32(2.0) + f)
    z = s * s
    w = z * z
    r = z * (F32(0.66666662693) + w * F32(0.28498786688)) + w * (
        F32(0.40000972152) + w * F32(0.24279078841))
    hfsq = F32(0.5) * f * f
    return F32(e) * F32(0.693147180369) + (f - (hfsq - s * (hfsq + r)))


def _tanh32(x):
    x = min(max(x, F32(-7.90531110763549805)), F32(7.90531110763549805))
    x2 = x * x
    p = F32(-2.76076847742355e-16)
    p = p * x2 + F32(2.00018790482477e-13)
    p = p * x2 + F32(-8.60467152213735e-11)
    p = p * x2 + F32(5.12229709037114e-08)
    p = p * x2 + F32(1.48572235717979e-05)
    p = p * x2 + F32(6.37261928875436e-04)
    p = p * x2 + F32(4.89352455891786e-03)
    q = F32(1.19825839466702e-06)
    q = q * x2 + F32(1.18534705686654e-04)
    q = q * x2 + F32(2.26843463243900e-03)
    q = q * x2 + F32(4.89352518554385e-03)
    return x * p / q


def _typed(fast, exact):
    """The overload body: ``fast`` for a float32 argument, ``exact`` otherwise."""
    def choose(x):
        return fast if x == types.float32 else exact
    return choose


overload(exp, jit_options=JIT)(_typed(_exp32, lambda x: math.exp(x)))
overload(log, jit_options=JIT)(_typed(_log32, lambda x: math.log(x)))
overload(tanh, jit_options=JIT)(_typed(_tanh32, lambda x: math.tanh(x)))

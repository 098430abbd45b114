"""Counter-based random numbers: the noise of a training step as a function of
``(seed, step, draw, element)`` alone, with no generator state to carry between steps.

:func:`philox4x32` is Random123's Philox4x32-10 block function (Salmon et al., "Parallel random
numbers: as easy as 1, 2, 3", SC 2011): a keyed bijection of 128-bit counters whose outputs pass
BigCrush. :class:`CounterRng` numbers the elements of each draw of a step and turns the block
outputs into uniforms in ``[0, 1)``. Because the step is part of the counter and may be a 0-d
device array, a CUDA graph that increments the step on the device draws fresh noise on every
replay. On CuPy one kernel (:func:`tpcore.kernels.gpu.philox_fill`) computes exactly the
numbers of the array code here, which is the readable reference run on NumPy and the strict
backend.

The integer constants are typed NumPy scalars so that every operation stays in ``uint32`` or
``uint64`` (wrapping modulo ``2^32`` or ``2^64``) under any NumPy or CuPy promotion rules.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from tpcore import strict
from tpcore.backend import Array, get_xp, xp_of
from tpcore.dispatch import kernel
from tpcore.errors import TpcoreError

PHILOX_M0 = np.uint64(0xD2511F53)
PHILOX_M1 = np.uint64(0xCD9E8D57)
"""The round multipliers of Philox4x32."""
PHILOX_W0 = np.uint32(0x9E3779B9)
PHILOX_W1 = np.uint32(0xBB67AE85)
"""The Weyl increments of the key schedule (golden ratio, sqrt(3) - 1, times 2^32)."""
PHILOX_ROUNDS = 10
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
WORDS_PER_ELEMENT = {np.dtype(np.float32): 1, np.dtype(np.float64): 2}
"""Philox output words (32 bits each) that one uniform of each dtype takes: 24 of a word's bits
make a float32, 27 + 26 of two words' bits a float64."""

_U32 = 2 ** 32
_SHIFT32 = np.uint64(32)


def philox4x32(counter: tuple[Array, Array, Array, Array],
               key: tuple[Array, Array]) -> tuple[Array, Array, Array, Array]:
    """Philox4x32-10: four 32-bit output words of a 128-bit counter under a 64-bit key.

    ``counter``: four ``uint32`` arrays (or ints), broadcastable to one shape ``S``; ``key``: two
    ``uint32`` values or 0-d arrays. Returns four ``uint32`` arrays of shape ``S`` (NumPy scalars
    where ``S`` is ``()`` on NumPy), of the array module of the inputs
    (:func:`tpcore.backend.xp_of`). All arithmetic is modulo ``2^32``.

    Ten rounds, each with ``hi(a * b) = (a * b) >> 32`` and ``lo(a * b) = (a * b) mod 2^32`` of
    the 64-bit product::

        (c0, c1, c2, c3) <- (hi(M1 c2) ^ c1 ^ k0,  lo(M1 c2),  hi(M0 c0) ^ c3 ^ k1,  lo(M0 c0))
        (k0, k1)         <- (k0 + W0,  k1 + W1)

    with ``M0 = 0xD2511F53``, ``M1 = 0xCD9E8D57``, ``W0 = 0x9E3779B9``, ``W1 = 0xBB67AE85``.
    """
    xp = xp_of(*counter, *key)
    c0, c1, c2, c3 = (_words(xp, c) for c in counter)
    # copies, bumped in place: a 0-d array's uint32 sum wraps silently (NumPy's scalar sum warns)
    k0, k1 = (_words(xp, k).copy() for k in key)
    for _ in range(PHILOX_ROUNDS):
        p0 = c0.astype(xp.uint64) * PHILOX_M0
        p1 = c2.astype(xp.uint64) * PHILOX_M1
        hi0, lo0 = (p0 >> _SHIFT32).astype(xp.uint32), p0.astype(xp.uint32)
        hi1, lo1 = (p1 >> _SHIFT32).astype(xp.uint32), p1.astype(xp.uint32)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 += PHILOX_W0
        k1 += PHILOX_W1
    return c0, c1, c2, c3


def _words(xp: ModuleType, value: int | Array) -> Array:
    """``value`` as ``uint32`` words of ``xp``; an int is made on the device (``xp.full``), not
    copied from the host, which a captured CUDA graph could not do."""
    if isinstance(value, (int, np.integer)):
        return xp.full((), value, dtype=xp.uint32)
    return value.astype(xp.uint32, copy=False)


def uniform_reference(n: int, dtype: np.dtype, key: tuple[int, int], draw: int,
                      step: int | Array, xp: ModuleType) -> Array:
    """The first ``n`` uniforms in ``[0, 1)`` of draw ``draw`` of step ``step``: ``(n,)`` in
    ``dtype``, of array module ``xp`` (:class:`CounterRng` states the layout).

    Block ``b`` is Philox4x32-10 of counter ``(b mod 2^32, b >> 32, draw, step mod 2^32)`` under
    ``key``, giving words ``w0..w3``. float32: element ``4b + k`` is ``(w_k >> 8) 2^-24``;
    float64: element ``2b + j`` is ``((w_2j >> 5) 2^26 + (w_2j+1 >> 6)) 2^-53``. Both are exact.
    """
    per_block = 4 // WORDS_PER_ELEMENT[np.dtype(dtype)]
    b = xp.arange(-(-n // per_block), dtype=xp.uint64)
    step_word = step if isinstance(step, int) else step.astype(xp.uint32)
    w0, w1, w2, w3 = philox4x32((b.astype(xp.uint32), (b >> _SHIFT32).astype(xp.uint32), draw,
                                 step_word), key)
    if per_block == 4:
        w = xp.stack([w0, w1, w2, w3], axis=-1).reshape(-1)[:n]
        return (w >> np.uint32(8)).astype(xp.float32) * np.float32(2.0 ** -24)
    hi = xp.stack([w0, w2], axis=-1).reshape(-1)[:n]
    lo = xp.stack([w1, w3], axis=-1).reshape(-1)[:n]
    m = ((hi >> np.uint32(5)).astype(xp.uint64) << np.uint64(26)) | \
        (lo >> np.uint32(6)).astype(xp.uint64)
    return m.astype(xp.float64) * np.float64(2.0 ** -53)


class CounterRng:
    """The noise generator of one training step: uniforms that depend only on ``(seed, step,
    draw, element)``, the same on every backend (NumPy, the strict backend, CuPy).

    ``seed``: an int in ``[0, 2^64)``, the Philox key ``(seed mod 2^32, seed >> 32)``.
    ``step``: an int in ``[0, 2^32)``, or a 0-d integer array of ``xp`` (a device step, which a
    CUDA graph may increment between replays). A device step is used as it is, never read on the
    host (reading it would wait for the device), so its range is not checked: a value outside
    ``[0, 2^32)`` counts modulo ``2^32``. ``xp``: the array module drawn from (default: the
    active backend's).

    Each :meth:`random` call is the next draw ``d = 0, 1, 2, ...``; element ``i`` (flat, C
    order) of draw ``d`` comes from the Philox block ``b = i // 4`` (float32) or ``b = i // 2``
    (float64) of counter ``(b mod 2^32, b >> 32, d, step)`` (:func:`uniform_reference`).
    """

    def __init__(self, seed: int, step: int | Array, xp: ModuleType | None = None):
        self.xp = get_xp() if xp is None else xp
        if not isinstance(seed, (int, np.integer)) or not 0 <= seed < _U32 * _U32:
            raise TpcoreError(f"seed {seed!r}: expected an int in [0, 2^64)")
        self.key = (int(seed) % _U32, int(seed) // _U32)
        self.step = self._checked_step(step)
        self.draw = 0

    def _checked_step(self, step: int | Array) -> int | Array:
        """``step`` as an int in ``[0, 2^32)`` or a 0-d integer array of ``self.xp`` (checked by
        its type, shape and dtype only: its value stays on the device)."""
        if isinstance(step, (int, np.integer)):
            if not 0 <= step < _U32:
                raise TpcoreError(f"step {step!r}: expected an int in [0, 2^32)")
            return int(step)
        owner = xp_of(step)
        if owner is not np and owner is not self.xp:
            raise TpcoreError(f"step is an array of {owner.__name__}; the generator draws "
                              f"arrays of {self.xp.__name__}")
        if getattr(step, "ndim", None) != 0 or step.dtype.kind not in "iu":
            raise TpcoreError(f"step of type {type(step).__name__}: expected an int in "
                              "[0, 2^32) or a 0-d integer array")
        return self.xp.asarray(step)

    def random(self, shape: int | tuple[int, ...], dtype: type | np.dtype = np.float32,
               out: Array | None = None) -> Array:
        """Uniforms in ``[0, 1)`` of ``shape`` and ``dtype`` (float32 or float64): the next draw.

        ``out``: an optional C-contiguous array of ``self.xp`` of that shape and dtype, filled and
        returned (no allocation: what a CUDA graph capture needs). On CuPy one kernel draws them.
        """
        if dtype is None or dtype not in FLOAT_DTYPES:
            raise TpcoreError(f"dtype {dtype!r}: expected float32 or float64")
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if out is None:
            out = self.xp.empty(shape, dtype)
        elif (xp_of(out) is not self.xp or out.shape != shape or out.dtype != dtype
              or not out.flags.c_contiguous):
            raise TpcoreError(f"out of shape {out.shape}, dtype {out.dtype}: expected a "
                              f"C-contiguous array of {self.xp.__name__}, shape {shape}, "
                              f"dtype {np.dtype(dtype)}")
        if self.draw >= _U32:
            raise TpcoreError(f"draw {self.draw}: at most 2^32 draws per step")
        draw, self.draw = self.draw, self.draw + 1
        return philox_fill(out, *self.key, draw, self.step)


@kernel(None, gpu=True)
def philox_fill(out: Array, key0: int, key1: int, draw: int, step: int | Array) -> Array:
    """``out`` (C-contiguous, float32 or float64) filled in place with the uniforms of draw
    ``draw`` of step ``step`` under the key ``(key0, key1)`` (:func:`uniform_reference`); returns
    ``out``. On CuPy one kernel does it (:func:`tpcore.kernels.gpu.philox_fill`)."""
    out[...] = uniform_reference(out.size, out.dtype, (key0, key1), draw, step,
                                 xp_of(out)).reshape(out.shape)
    return out


def step_rng(seed: int, step: int | Array, xp: ModuleType | None = None) -> Any:
    """The noise generator of training step ``step`` of a run seeded ``seed``: a fresh generator
    of the pair, so that a step's noise depends on nothing but ``(seed, step)`` and a run paused
    after any step resumes bit for bit, on every backend.

    NumPy (and the strict backend): PCG64 seeded by ``SeedSequence([seed, step])``. CuPy, and a
    ``step`` that is a 0-d array on any backend (a step whose per-step values live on the device,
    as in one captured as a CUDA graph, which draws the noise of the step it replays):
    :class:`CounterRng` of the pair. The two generators draw different numbers.
    """
    xp = get_xp() if xp is None else xp
    if (xp is np or xp is strict.xp) and isinstance(step, (int, np.integer)):
        return xp.random.default_rng([seed, step])
    return CounterRng(seed, step, xp)

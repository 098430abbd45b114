"""+-1 encodings of addresses and integers (Sec. 4.1 and 5.1 of Giannou et al. 2023).

* Address ``i`` in ``L`` bits: ``p_i[k] = +1`` if bit ``k`` of ``i`` is 1 else ``-1`` (LSB first),
  so ``p_i . p_i = L`` and ``p_i . p_j <= L - 2`` for ``i != j``.
* Integer ``x`` in ``N``-bit two's complement: bit ``k`` of ``x mod 2^N`` as +-1 (LSB first, the
  last bit is the sign). Arithmetic wraps modulo ``2^N`` into ``[-2^(N-1), 2^(N-1) - 1]``.

Encoders build punchcards on the host (NumPy); decoders read any array module (they threshold at
0, so they also decode noisy +-1 values) and return host integers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpcore.backend import to_host
from tpcore.errors import TpcoreError


def address_bits(n: int) -> int:
    """Bits ``L = max(1, ceil(log2 n))`` that address columns ``0..n-1``."""
    if n < 1:
        raise TpcoreError(f"number of columns n = {n}; expected n >= 1")
    return max(1, int(n - 1).bit_length())


def int_range(N: int) -> tuple[int, int]:
    """The ``N``-bit two's-complement range ``(-2^(N-1), 2^(N-1) - 1)``."""
    if N < 2:
        raise TpcoreError(f"bits per integer N = {N}; expected N >= 2")
    return -(1 << (N - 1)), (1 << (N - 1)) - 1


def wrap(x: Any, N: int) -> Any:
    """``x`` wrapped modulo ``2^N`` into the two's-complement range (ints or integer arrays)."""
    half = 1 << (N - 1)
    return (x + half) % (1 << N) - half


def encode_bits(values: Any, bits: int) -> np.ndarray:
    """Non-negative integers ``values: (k,)`` -> +-1 bit columns ``(bits, k)``, LSB first."""
    v = np.asarray(values, dtype=np.int64).reshape(-1)
    return ((v[None, :] >> np.arange(bits)[:, None]) & 1) * 2.0 - 1.0


def encode_address(index: Any, L: int) -> np.ndarray:
    """Column addresses ``index: (k,)`` -> ``(L, k)`` +-1 encodings ``p_i``."""
    return encode_bits(index, L)


def encode_int(values: Any, N: int) -> np.ndarray:
    """Integers ``values: (k,)`` (must fit ``N`` bits) -> ``(N, k)`` +-1 two's complement."""
    v = np.asarray(values, dtype=np.int64).reshape(-1)
    lo, hi = int_range(N)
    bad = np.nonzero((v < lo) | (v > hi))[0]
    if bad.size:
        raise TpcoreError(f"value {int(v[bad[0]])} at position {int(bad[0])} is outside the "
                          f"{N}-bit range [{lo}, {hi}]")
    return encode_bits(v % (1 << N), N)


def decode_unsigned(B: Any) -> np.ndarray:
    """+-1 bits ``B: (..., bits, k)`` (LSB first, thresholded at 0) -> integers ``(..., k)``."""
    b = (to_host(B) > 0).astype(np.int64)
    weights = (1 << np.arange(b.shape[-2], dtype=np.int64))[:, None]
    return (b * weights).sum(axis=-2)


def decode_int(B: Any) -> np.ndarray:
    """+-1 two's-complement bits ``B: (..., N, k)`` -> signed integers ``(..., k)``."""
    N = B.shape[-2]
    return wrap(decode_unsigned(B), N)

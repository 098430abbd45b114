"""+-1 encodings of integers and addresses."""

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.looped.encodings import (
    address_bits,
    decode_int,
    decode_unsigned,
    encode_address,
    encode_int,
    int_range,
)

pytestmark = pytest.mark.host_only("the +-1 encoders build host arrays")


@pytest.mark.parametrize("N", [2, 5, 9])
def test_int_roundtrip_and_range(N):
    lo, hi = int_range(N)
    v = np.arange(lo, hi + 1)
    np.testing.assert_array_equal(decode_int(encode_int(v, N)), v)
    with pytest.raises(TpcoreError, match=f"value {hi + 1} at position 0"):
        encode_int([hi + 1], N)


def test_address_codes_separate_by_two():
    n = 37
    L = address_bits(n)
    P = encode_address(np.arange(n), L)
    G = P.T @ P
    assert np.all(np.diag(G) == L)
    assert np.all(G[~np.eye(n, dtype=bool)] <= L - 2)
    np.testing.assert_array_equal(decode_unsigned(P), np.arange(n))

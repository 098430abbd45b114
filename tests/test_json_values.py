"""NumPy values in tpcore's JSON: float32 written with its own digits, read back exactly."""

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tpcore.io import json_text, json_value


def test_float32_is_written_with_its_own_digits():
    assert json_text(np.float32(0.1)) == "0.1"
    assert json_value({"qk": np.round(np.array([-22.3, 4.1], np.float32), 1)}) == {
        "qk": [-22.3, 4.1]}
    assert json_value(np.float16(0.1)) == 0.1
    assert json_value(np.float64(0.1) + np.float64(0.2)) == 0.30000000000000004  # float64 whole
    special = np.array([np.inf, -np.inf, np.nan], np.float32)
    assert json_text(special) == "[Infinity, -Infinity, NaN]"


@settings(max_examples=300, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float32_reads_back_as_the_same_float32(x):
    value = np.float32(x)
    back = json.loads(json_text(np.array([value, -value])))
    assert np.array_equal(np.array(back, np.float32), [value, -value])
    assert np.float32(json.loads(json_text(value))) == value

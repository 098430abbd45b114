"""Hand-written Eq. 1 weights: row blocks, the layer builder, and the gated feed-forward idioms
(copy where the gate is 1, silence where it is <= 0, linear maps and clearing), checked by
applying the built feed-forward ``x + W2 ReLU(W1 x + b1) + b2`` to columns."""

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.looped.weights import (
    LayerBuilder,
    RowBlocks,
    clear,
    gated_copy,
    gated_linear,
    linear_map,
    row_vec,
    select,
)

pytestmark = pytest.mark.host_only("weights are built on the host")

C = 100.0


def _ff(b: LayerBuilder, x: np.ndarray) -> np.ndarray:
    """The built layer's feed-forward on columns ``x: (d, n)``."""
    layer = b.layer(np)
    assert not layer.heads
    return x + layer.W2 @ np.maximum(layer.W1 @ x + layer.b1[:, None], 0) + layer.b2[:, None]


def test_row_blocks_are_allocated_in_order_once():
    blocks = RowBlocks()
    assert blocks.add("a", 2) == slice(0, 2) and blocks.add("b", 3) == slice(2, 5)
    assert blocks.size == 5 and blocks["b"].tolist() == [2, 3, 4] and "a" in blocks
    with pytest.raises(TpcoreError, match="row block 'a' allocated twice"):
        blocks.add("a", 1)
    assert row_vec(4, [(1, 2.0), (1, 0.5), (3, -1.0)]).tolist() == [0, 2.5, 0, -1]
    assert select(4, np.array([2, 0]), 3.0).tolist() == [[0, 0, 3, 0], [3, 0, 0, 0]]


def test_gated_copy_copies_where_the_gate_is_one_and_is_silent_below():
    d = 4  # rows: 0 source, 1 destination, 2 gate, 3 unused
    b = LayerBuilder(d)
    gated_copy(b, np.array([0]), np.array([1]), row_vec(d, {2: 1.0}), 0.0, C, scale=2.0)
    x = np.array([[3.0, -7.5, 3.0, 4.0],
                  [1.0, 1.0, 1.0, 1.0],
                  [1.0, 1.0, 0.0, -1.0],
                  [9.0, 9.0, 9.0, 9.0]])
    y = _ff(b, x)
    assert y[1].tolist() == [7.0, -14.0, 1.0, 1.0]  # += 2 x[0] where the gate is 1 only
    np.testing.assert_array_equal(np.delete(y, 1, 0), np.delete(x, 1, 0))


def test_linear_map_and_clear():
    d = 3
    b = LayerBuilder(d)
    linear_map(b, np.array([[1.0, -2.0, 0.0]]), np.array([2]))
    x = np.array([[1.0, -4.0], [2.0, 0.5], [10.0, 10.0]])
    assert _ff(b, x)[2].tolist() == [7.0, 5.0]
    b = LayerBuilder(d)
    clear(b, np.array([0, 2]))
    np.testing.assert_array_equal(_ff(b, x), [[0, 0], [2.0, 0.5], [0, 0]])
    b = LayerBuilder(d)
    gated_linear(b, np.array([[0.0, 1.0, 0.0]]), np.array([0]), np.zeros(d), 1.0, C)
    assert _ff(b, x)[0].tolist() == [3.0, -3.5]  # a constant gate of 1: always on


def test_extend_places_another_layer_on_mapped_rows():
    small = LayerBuilder(2)
    linear_map(small, np.array([[1.0, 0.0]]), np.array([1]))  # x1 += x0
    small.b2[0] = 0.5
    big = LayerBuilder(4)
    big.extend(small, rowmap=np.array([3, 1]))  # its row 0 is row 3 here, its row 1 row 1
    assert big.n_units == 2
    x = np.arange(8.0).reshape(4, 2)
    y = _ff(big, x)
    assert y[1].tolist() == (x[1] + x[3]).tolist() and y[3].tolist() == (x[3] + 0.5).tolist()
    np.testing.assert_array_equal(y[[0, 2]], x[[0, 2]])

"""The SUBLEQ punchcard layout: row blocks tile the width in order, the paper's count is the
layout without its temporaries, and sizes out of range are refused naming them."""

import pytest

from tpcore.errors import TpcoreError
from tpcore.subleq.layout import BLOCKS, MAX_BITS, MAX_COLUMNS, TEMPORARY, Layout

pytestmark = pytest.mark.host_only("layout arithmetic: no arrays")


@pytest.mark.parametrize("s, m, k, N", [(1, 2, 1, 2), (1, 8, 6, 8), (3, 40, 37, 16)])
def test_blocks_tile_the_rows_and_the_paper_count_leaves_out_temporaries(s, m, k, N):
    lay = Layout(s, m, k, N)
    assert lay.n == s + m + k and 2 ** lay.L >= lay.n
    starts = [lay.rows[b].start for b in BLOCKS]
    stops = [lay.rows[b].stop for b in BLOCKS]
    assert starts[0] == 0 and starts[1:] == stops[:-1] and stops[-1] == lay.d
    temporaries = sum(lay.rows[b].stop - lay.rows[b].start for b in TEMPORARY)
    assert lay.d - temporaries == lay.d_paper == 8 * lay.L + 3 * N + 1
    assert lay.first_instruction == s + m and lay.eof == lay.n - 1
    assert lay.r("mem", N - 1) == lay.rows["mem"].stop - 1
    with pytest.raises(IndexError, match=f"block mem has {N} rows"):
        lay.r("mem", N)


def test_memory_estimate_grows_with_batch_and_shrinks_on_the_sparse_path():
    lay = Layout(1, 40, 30, 8)
    dense, sparse = lay.memory_estimate(4), lay.memory_estimate(4, sparse=True)
    assert sparse < dense < lay.memory_estimate(8)
    assert lay.memory_estimate(1, trace_steps=100) > lay.memory_estimate(1)


@pytest.mark.parametrize("sizes, words", [((0, 2, 1, 2), "s = 0; expected s >= 1"),
                                          ((1, 1, 1, 2), "m = 1; expected m >= 2"),
                                          ((1, 2, 1, MAX_BITS + 1), f"N = {MAX_BITS + 1} bits"),
                                          ((1, MAX_COLUMNS, 1, 8), "expected at most")])
def test_sizes_out_of_range_are_refused(sizes, words):
    with pytest.raises(TpcoreError, match=words):
        Layout(*sizes)

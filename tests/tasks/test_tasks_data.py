"""A task's data: framing tokens, encoding, distinct rows drawn in random order, and the
80 / 10 / 10 split."""

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.tasks.data import BOS, EOS, PAD, TaskData, split, unique_rows

pytestmark = pytest.mark.host_only("task data generation on the host")


def _task(vocab=(PAD, BOS, EOS, "a", "b")):
    return TaskData("toy", tuple(vocab), ("x", "y"), causal=False, max_len=4)


def test_framing_tokens_and_encoding():
    task = _task()
    assert (task.bos, task.eos, task.pad) == (BOS, EOS, PAD)
    assert _task((PAD, "a")).bos is None and _task((PAD, "a")).eos is None
    assert task.encode([BOS, "b", "a", EOS]).tolist() == [1, 4, 3, 2]
    with pytest.raises(TpcoreError, match="token 'c' is not in the toy vocabulary"):
        task.encode([BOS, "c"])
    with pytest.raises(TpcoreError, match="length 5 exceeds max_len 4"):
        task.encode([BOS, "a", "a", "a", EOS])


def test_unique_rows_are_distinct_and_shuffled():
    def sample(gen, size):
        return gen.integers(0, 4, (size, 3))  # 64 possible rows

    rows = unique_rows(sample, 40, np.random.default_rng(0), "toy")
    assert rows.shape == (40, 3) and len(np.unique(rows, axis=0)) == 40
    again = unique_rows(sample, 40, np.random.default_rng(0), "toy")
    np.testing.assert_array_equal(rows, again)  # seeded
    # a space of 64 rows gives what it has when asked for more, and refuses far too many
    assert len(unique_rows(sample, 100, np.random.default_rng(1), "toy")) == 64
    with pytest.raises(TpcoreError, match="cannot draw 200 distinct toy inputs"):
        unique_rows(sample, 200, np.random.default_rng(1), "toy")


def test_split_cuts_in_order():
    data = {"tokens": np.arange(20)[:, None], "targets": np.arange(20)[:, None] * 2}
    parts = split(data, 20)
    assert [len(parts[s]["tokens"]) for s in ("train", "val", "test")] == [16, 2, 2]
    assert parts["val"]["tokens"][:, 0].tolist() == [16, 17]
    assert parts["test"]["targets"][:, 0].tolist() == [36, 38]

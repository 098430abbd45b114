"""Sorting task generators and encodings."""

from types import SimpleNamespace

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.tasks.sorting import (
    TASKS,
    _set_table,
    all_distinct_lists,
    encode,
    generate,
    get_task,
    hard_lists,
    hard_sets,
    one_list,
    random_lists,
    task_of,
)

pytestmark = pytest.mark.host_only("task data generation on the host")


@pytest.mark.parametrize("name", list(TASKS))
def test_random_lists_shapes_and_ranges(name, rng):
    task = TASKS[name]
    lists, lengths = random_lists(task, 500, rng)
    assert lists.shape == (500, task.length)
    valid = np.arange(task.length) < lengths[:, None]
    assert (lists[valid] >= 0).all() and (lists[valid] < task.n_values).all()
    assert (lists[~valid] == task.n_values).all()
    if task.variable_length:
        assert set(lengths.tolist()) == set(range(1, task.length + 1))
    else:
        assert (lengths == task.length).all()
    if task.distinct:
        assert all(len(set(row)) == task.length for row in lists.tolist())


def test_causal_encoding_layout():
    task = TASKS["causal"]
    lists = np.array([[3, 1, 2, 1, 0, 9, 9, 5, 4, 4]])
    enc = encode(task, lists)
    s = sorted(lists[0].tolist())
    assert enc["tokens"].shape == (1, 22)
    assert enc["tokens"][0].tolist() == [task.bos, *lists[0].tolist(), task.sep, *s]
    assert np.flatnonzero(enc["mask"][0]).tolist() == list(range(11, 21))
    assert enc["targets"][0, 11:21].tolist() == s
    # the logits at position 11 + k see s_0..s_{k-1} and predict s_k (next token)
    assert (enc["tokens"][0, 12:22] == enc["targets"][0, 11:21]).all()


def test_bidirectional_encoding_layout():
    task = TASKS["bidirectional"]
    lists = np.full((2, 10), task.n_values)
    lists[0, :3] = [7, 2, 7]
    lists[1] = np.arange(10)[::-1]
    enc = encode(task, lists, np.array([3, 10]))
    assert enc["tokens"][0].tolist() == [task.bos, 7, 2, 7, task.sep] + [task.pad] * 7
    assert enc["tokens"][1].tolist() == [task.bos, *range(9, -1, -1), task.sep]
    assert enc["targets"][0, 1:4].tolist() == [2, 7, 7]
    assert np.flatnonzero(enc["mask"][0]).tolist() == [1, 2, 3]
    assert (enc["pad"] == (enc["tokens"] == task.pad)).all()


def test_set_table_lists_each_sets_elements_in_order():
    elements, sizes = _set_table(6)
    for code in range(2**6):
        members = [v for v in range(6) if code >> v & 1]
        assert sizes[code] == len(members)
        assert elements[code, : len(members)].tolist() == members


def test_hard_sets_never_empty_and_mix_intervals_and_subsets(rng):
    sets = hard_sets(30000, 10, rng)
    assert sets.any(axis=1).all()
    # an interval has no holes: its count equals max - min + 1
    idx = np.arange(10)
    lo = np.where(sets, idx, 10).min(axis=1)
    hi = np.where(sets, idx, -1).max(axis=1)
    interval = sets.sum(axis=1) == hi - lo + 1
    # 1/3 of the sets are intervals by construction, some random subsets are too
    assert 0.40 < interval.mean() < 0.75
    # subsets keep each value with a uniform p: about half the values overall among subsets
    assert 0.4 < sets[~interval].mean() < 0.6


def test_hard_lists_have_few_distinct_values_and_all_values_occur(rng):
    task = TASKS["causal"]
    lists, lengths = hard_lists(task, 20000, rng)
    assert (lengths == 10).all() and lists.min() == 0 and lists.max() == 9
    distinct = np.array([len(set(r)) for r in lists.tolist()])
    uniform = np.array([len(set(r)) for r in random_lists(task, 20000, rng)[0].tolist()])
    assert (distinct <= 2).mean() > 0.15 > (uniform <= 2).mean()
    # constant lists: 1/3 * 1/10 (x = y) + 2/3 * P(|S| = 1 | S nonempty) = 1/30 + 2/3 * 1/10
    assert abs((distinct == 1).mean() - 0.1) < 0.015


def test_hard_items_are_uniform_within_the_set(rng):
    task = TASKS["causal"]
    lists, _ = hard_lists(task, 50000, rng)
    two = np.array([len(set(r)) == 2 and set(r) == {0, 9} for r in lists.tolist()])
    # among lists drawn from S = {0, 9} items are fair coin flips (ignoring the constant draws)
    assert two.sum() > 50
    assert abs((lists[two] == 0).mean() - 0.5) < 0.05


def test_generators_are_seeded():
    task = TASKS["bidirectional"]
    a = generate(task, "hard", 100, np.random.default_rng(3))
    b = generate(task, "hard", 100, np.random.default_rng(3))
    assert all((x == y).all() for x, y in zip(a, b))


def test_bad_requests_raise():
    with pytest.raises(TpcoreError, match="distinct"):
        hard_lists(TASKS["distinct"], 5, np.random.default_rng(0))
    with pytest.raises(TpcoreError, match="generator 'easy'"):
        generate(TASKS["causal"], "easy", 5, np.random.default_rng(0))
    with pytest.raises(TpcoreError, match="length 3"):
        encode(TASKS["causal"], np.zeros((1, 3), dtype=int))


def test_all_distinct_lists_covers_every_subset(rng):
    task = TASKS["distinct"]
    lists = all_distinct_lists(task, rng)
    assert lists.shape == (3003, 10)
    assert len({tuple(sorted(r)) for r in lists.tolist()}) == 3003


def test_one_list_fills_a_short_list_for_the_fixed_length_tasks():
    lists, lengths = one_list(TASKS["causal"], [3, 1, 2])
    assert lists.tolist() == [[3, 1, 2] + [9] * 7] and lengths.tolist() == [10]
    assert np.sort(lists[0])[:3].tolist() == [1, 2, 3]
    lists, lengths = one_list(TASKS["distinct"], [3, 1, 2])
    assert lists.tolist() == [[3, 1, 2, 8, 9, 10, 11, 12, 13, 14]] and lengths.tolist() == [10]
    lists, lengths = one_list(TASKS["bidirectional"], [3, 1, 2])
    assert lists.tolist() == [[3, 1, 2] + [10] * 7] and lengths.tolist() == [3]


@pytest.mark.parametrize("task, values, match", [
    ("causal", [3, 10], "does not fit the causal task: expected up to 10 values in 0..9"),
    ("bidirectional", list(range(10)) + [1], "expected 1..10 values"),
    ("causal", [], "does not fit"),
    ("distinct", [3, 3], "repeats a value"),
    ("distinct", [14, 1], "cannot be filled up to 10 distinct values"),
])
def test_one_list_names_what_does_not_fit(task, values, match):
    with pytest.raises(TpcoreError, match=match):
        one_list(TASKS[task], values)


def test_task_of_matches_the_model_config():
    for task in TASKS.values():
        config = SimpleNamespace(vocab_size=task.vocab_size, max_len=task.seq_len,
                                 causal=task.causal)
        assert task_of(SimpleNamespace(config=config)) is task
    with pytest.raises(TpcoreError, match="matches none of the sorting tasks"):
        task_of(SimpleNamespace(config=SimpleNamespace(vocab_size=5, max_len=3, causal=True)))


def test_to_tokens_and_back():
    task = get_task("bidirectional")
    ids = task.to_tokens([[3, 1, 2], "5 5 1 0"])
    assert ids.shape == (2, task.seq_len) and ids[0, 5:].tolist() == [task.pad] * 7
    assert ids.tolist() == encode(task, np.array([[3, 1, 2] + [10] * 7, [5, 5, 1, 0] + [10] * 6]),
                                  np.array([3, 4]))["tokens"].tolist()
    assert task.to_str_tokens(ids) == [["BOS", "3", "1", "2", "EOS"],
                                       ["BOS", "5", "5", "1", "0", "EOS"]]
    assert task.to_str_tokens(task.to_tokens([3, 1, 2])) == ["BOS", "3", "1", "2", "EOS"]
    causal = get_task("causal")
    row = causal.to_str_tokens(causal.to_tokens([3, 1, 2]))
    assert row[:5] == ["BOS", "3", "1", "2", "9"] and row[11:15] == ["MOS", "1", "2", "3"]


def test_to_tokens_bad_input_names_it():
    task = get_task("bidirectional")
    with pytest.raises(TpcoreError, match=r"list \[3, 11\] does not fit"):
        task.to_tokens([[3, 1], [3, 11]])
    with pytest.raises(TpcoreError, match="row 1, position 2: token id 99 is outside"):
        task.to_str_tokens(np.array([[10, 1, 11], [10, 1, 99]]))
    with pytest.raises(TpcoreError, match="got none"):
        task.to_tokens([])

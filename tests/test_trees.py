"""tpcore.trees: the grammar, sampling and exact BP of one sequence in one call each."""

import numpy as np
import pytest

from tpcore import trees
from tpcore.bp import bp_forward, evidence_from_leaves
from tpcore.errors import TpcoreError
from tpcore.tasks.trees import random_grammar


def test_bp_of_one_sequence_is_the_reference_on_its_evidence():
    g = trees.grammar()
    leaves = np.array([[0, 3, 0, 1, 2, 2, 0, 1]])
    mask = np.zeros_like(leaves, dtype=bool)
    mask[0, 2] = True
    want = bp_forward(g.M, g.p0, evidence_from_leaves(leaves, g.q, mask), 1)[0]
    for written in ("0 3 ? 1 2 2 0 1", [0, 3, None, 1, 2, 2, 0, 1], "0,3,_,1,2,2,0,1"):
        got = trees.bp(written, k=1)
        np.testing.assert_allclose(got.root, want.root[0], atol=1e-12)
        np.testing.assert_allclose(got.leaves, want.leaves[0], atol=1e-12)
        np.testing.assert_allclose(got.cavity, want.cavity[0], atol=1e-12)
        assert got.log_z == pytest.approx(float(want.log_z[0]), abs=1e-10)
    assert np.isclose(got.root.sum(), 1.0) and got.leaves.shape == (8, 4)


def test_the_default_grammar_is_the_papers():
    paper = random_grammar(4, 1.0, 0, paper_grammar=True)
    np.testing.assert_array_equal(trees.grammar().M, paper.M)
    other = trees.grammar(seed=1, paper=False)
    assert not np.allclose(other.M, paper.M)
    assert trees.bp("0 1 ? 3", grammar=other).log_z != trees.bp("0 1 ? 3").log_z


def test_sample_draws_filtered_sequences_reproducibly():
    a = trees.sample(5, l=3, k=1, seed=2)
    b = trees.sample(5, l=3, k=1, seed=2)
    assert a.leaves.shape == (5, 8) and a.levels is None
    np.testing.assert_array_equal(a.leaves, b.leaves)
    assert len(trees.sample(2, l=3, levels=True).levels) == 4


@pytest.mark.parametrize("leaves, k, match", [
    ("0 1 5 3", 0, "leaf '5'"), ("0 1 x 3", 0, "'x'"), ("0 1 2", 0, "3 leaves"),
    ("0 1 2 3", 3, "k=3; expected a filtering level 0..2")])
def test_bad_sequences_are_named(leaves, k, match):
    with pytest.raises(TpcoreError, match=match):
        trees.bp(leaves, k)


def test_bp_of_a_batch_is_bp_of_each_sequence():
    t = trees.sample(6, l=3, k=0, seed=4)
    masked = np.zeros(t.leaves.shape, dtype=bool)
    masked[:, 2] = masked[3, 5] = True
    batch = trees.bp_batch(t.leaves, masked, k=1)
    assert batch.root.shape == (6, 4) and batch.leaves.shape == (6, 8, 4)
    for b in range(6):
        one = trees.bp([None if m else int(x) for x, m in zip(t.leaves[b], masked[b])], k=1)
        np.testing.assert_array_equal(one.root, batch.root[b])
        np.testing.assert_array_equal(one.cavity, batch.cavity[b])
        assert one.log_z == batch.log_z[b]
    written = trees.bp_batch(["0 3 ? 1 2 2 0 1", "1 1 2 ? 0 0 3 3"])
    assert written.log_z[0] == trees.bp("0 3 ? 1 2 2 0 1").log_z


@pytest.mark.parametrize("leaves, masked, match", [
    (np.array([[0, 1, 4, 3]]), None, r"leaf 4 \(sequence 0, position 2\)"),
    (np.zeros((2, 4)), None, "expected integer symbols"),
    (np.zeros((2, 4), int), np.zeros((2, 3), bool), "masked has shape"),
    (["0 1 ? 3", "0 1 2 3 0 1 2 3"], None, r"sequences of \[4, 8\] leaves"),
    (["0 1 ? 3"], np.zeros((1, 4), bool), "write a masked leaf"),
    (np.zeros((2, 6), int), None, "got 6 leaves")])
def test_bad_batches_are_named(leaves, masked, match):
    with pytest.raises(TpcoreError, match=match):
        trees.bp_batch(leaves, masked)

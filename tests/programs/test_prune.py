"""Keeping some categorical heads of a program: the kept modules compute what they computed,
under the names a narrower model gives them, and only choices that drop nothing read are made."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.programs import interpret as it
from tpcore.programs.examples import random_inputs, random_program
from tpcore.programs.prune import MAX_CHOICES, categorical_heads, head_choices, keep_heads

pytestmark = pytest.mark.host_only("pruning is host code over the program IR")


def every_choice(heads: list[list[int]], k: int) -> list[tuple[tuple[int, ...], ...]]:
    return list(itertools.product(*(itertools.combinations(hs, k) for hs in heads)))


@pytest.mark.parametrize("mlps", [0, 1])
def test_kept_modules_compute_what_they_did_under_their_new_names(mlps):
    checked = 0
    for seed in range(12):
        p = random_program(seed, layers=2, cat_heads=3, num_heads=1, cat_mlps=mlps,
                           num_mlps=mlps)
        checked += check_every_choice(p, seed)
    assert checked >= 5, "too few choices to test"


def check_every_choice(p, seed: int) -> int:
    """Check each choice of 2 heads per layer of ``p``; returns how many there were."""
    ids, lengths = random_inputs(p, 64, seed)
    env = it.evaluate(p, ids, lengths)
    choices = head_choices(p, 2)
    for choice in choices:
        q = keep_heads(p, choice)
        assert categorical_heads(q) == [[0, 1], [0, 1]]
        new_env = it.evaluate(q, ids, lengths)
        for layer, kept in enumerate(choice):
            for new, old in enumerate(kept):
                assert np.array_equal(new_env[f"attn_{layer}_{new}_outputs"],
                                      env[f"attn_{layer}_{old}_outputs"])
        others = [m.output for m in p.modules if not m.name.startswith("attn_")]
        assert all(np.array_equal(new_env[o], env[o]) for o in others)
        kept_features = [f for f in p.classifier.features
                         if not f.startswith("attn_") or any(
                             f == f"attn_{layer}_{h}_outputs"
                             for layer, hs in enumerate(choice) for h in hs)]
        assert len(q.classifier.features) == len(kept_features)
        for old, new in zip(kept_features, q.classifier.features):
            assert np.array_equal(q.classifier.weights[new], p.classifier.weights[old])
    return len(choices)


def test_the_choices_listed_are_exactly_those_that_drop_nothing_read():
    kept = refused = 0
    for seed in range(8):
        p = random_program(seed, layers=2, cat_heads=3, num_heads=1)
        listed = set(head_choices(p, 1))
        for choice in every_choice(categorical_heads(p), 1):
            if choice in listed:
                keep_heads(p, choice)
                kept += 1
            else:
                with pytest.raises(TpcoreError, match="the output of a head not kept"):
                    keep_heads(p, choice)
                refused += 1
    assert kept and refused


def test_heads_are_renumbered_in_the_order_given():
    p = random_program(0, layers=1, cat_heads=3, num_heads=0, cat_mlps=0, num_mlps=0)
    ids, lengths = random_inputs(p, 16)
    env, new_env = it.evaluate(p, ids, lengths), it.evaluate(keep_heads(p, ((2, 0),)), ids,
                                                                lengths)
    assert np.array_equal(new_env["attn_0_0_outputs"], env["attn_0_2_outputs"])
    assert np.array_equal(new_env["attn_0_1_outputs"], env["attn_0_0_outputs"])


@pytest.mark.parametrize("choice, match", [
    (((0,),), "names 1 layers"),
    (((0,), (0, 0)), "expected distinct heads"),
    (((0,), (5,)), "expected distinct heads"),
])
def test_a_choice_that_does_not_fit_is_refused(choice, match):
    p = random_program(1, layers=2, cat_heads=2, num_heads=0, cat_mlps=0, num_mlps=0)
    with pytest.raises(TpcoreError, match=match):
        keep_heads(p, choice)


def test_too_many_or_too_few_heads_to_keep_are_refused():
    p = random_program(1, layers=2, cat_heads=2, num_heads=0)
    with pytest.raises(TpcoreError, match="expected 1 .. the fewest a layer has"):
        head_choices(p, 3)
    with pytest.raises(TpcoreError, match="expected 1 .. the fewest"):
        head_choices(p, 0)
    wide = random_program(1, layers=3, cat_heads=8, num_heads=0, cat_mlps=0, num_mlps=0)
    with pytest.raises(TpcoreError, match=f"expected at most {MAX_CHOICES}"):
        head_choices(wide, 4)

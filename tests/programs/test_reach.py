"""Value sets per length and position: sound on every framed input, and tight where the
framing decides a value."""

from __future__ import annotations

import numpy as np
import pytest

from tpcore.programs import interpret as it
from tpcore.programs import ir, reach
from tpcore.programs.examples import (
    all_inputs,
    counting_program,
    random_program,
    reverse_program,
)
from tpcore.programs.ir import Head, Program, RunningCount, Variable, numerical_range

pytestmark = pytest.mark.host_only("value-set analysis is host code over the program IR")


def every_input(p: Program) -> tuple[np.ndarray, np.ndarray]:
    """Every framed input, the framing alone included, as ``(ids, lengths)``."""
    return it.encode(p, [p.frame([]), *all_inputs(p)])


def assert_sound(p: Program, sets: reach.ValueSets) -> None:
    """Every variable's value at every position of every framed input is in its set."""
    ids, lengths = every_input(p)
    env = it.evaluate(p, ids, lengths)
    index = {c: n for n, c in enumerate(sets.contexts)}
    pos = np.arange(ids.shape[1])
    valid = pos[None, :] < lengths[:, None]
    context = np.asarray([[index.get((n, i), index.get((None, i), -1)) for i in pos]
                          for n in lengths.tolist()])
    for name, var in p.variables.items():
        x, here = env[name], valid
        if var.kind == "numerical":
            values = np.asarray(var.values, dtype=np.float64)
            at = np.clip(np.searchsorted(values, x), 0, var.size - 1)
            listed = values[at] == x
            assert name in sets.outside or listed[valid].all(), name
            x, here = at, valid & listed
        assert sets.masks[name][context[here], x[here]].all(), name


@pytest.mark.parametrize("seed", range(8))
def test_sound_on_every_input_of_random_programs(seed):
    p = random_program(seed, vocab=3, max_len=6, causal=seed % 2 == 1, layers=3)
    assert_sound(p, reach.value_sets(p))


def test_sound_with_lengths_merged(monkeypatch):
    monkeypatch.setattr(reach, "BUDGET", 0)
    for seed in range(4):
        p = random_program(seed, vocab=3, max_len=6, causal=seed == 1)
        sets = reach.value_sets(p)
        assert {length for length, _ in sets.contexts} == {None}
        assert_sound(p, sets)


@pytest.mark.parametrize("key, target, want", [
    ("positions", None, [1]),            # every query finds its own position
    ("tokens", None, list(range(7))),    # up to the 6 content tokens, 1 for <s> or </s>
    ("tokens", 1, [1]),                  # <s>: always one, at position 0
    ("tokens", 2, [1]),                  # </s>: always one, at the end
    ("tokens", 0, [0]),                  # <pad> is never part of an input
])
def test_counts(key, target, want):
    sets = reach.value_sets(counting_program(key, target))
    assert np.flatnonzero(sets.union("num_attn_0_0_outputs")).tolist() == want


def test_per_length_sets_know_the_end():
    p = reverse_program()
    sets = reach.value_sets(p)
    length = sets.masks["attn_0_0_outputs"]  # the position of </s>
    for n, (size, i) in enumerate(sets.contexts):
        assert np.flatnonzero(length[n]).tolist() == [size - 1], (size, i)
    assert np.flatnonzero(sets.union("tokens")).tolist() == list(range(1, p.tokens.size))
    table = sets.domain(("attn_0_0_outputs", "positions"))
    assert np.array_equal(table, np.tril(np.ones_like(table))[:, :] & (
        np.arange(p.max_len)[:, None] >= 1))


def test_sums_of_sums_are_exact_sets():
    p = counting_program("positions", value="ones")
    v = dict(p.variables)
    out = "num_attn_1_0_outputs"
    v[out] = Variable(out, "numerical", numerical_range(v["num_attn_0_0_outputs"], 8))
    every = np.full(v["tokens"].size, 3, dtype=np.int64)  # every query looks for token "0"
    second = Head("num_attn_1_0", "numerical", "tokens", "tokens", "num_attn_0_0_outputs", out,
                  every)
    q = Program("count2", v, [*p.modules, second], p.classifier, bos="<s>", eos="</s>",
                pad="<pad>")
    sets = reach.value_sets(q)
    assert np.flatnonzero(sets.union(out)).tolist() == list(range(7))
    assert_sound(q, sets)


def _with_running_count(p: Program) -> Program:
    """``p`` plus a running count and a numerical head summing it over the keys holding the
    query's token (the classifier reads both)."""
    rng = np.random.default_rng(0)
    v = dict(p.variables)
    v["running_count"] = Variable("running_count", "numerical", tuple(range(1, p.max_len + 1)))
    v["num_attn_9_0_outputs"] = Variable("num_attn_9_0_outputs", "numerical",
                                         numerical_range(v["running_count"], p.max_len))
    head = Head("num_attn_9_0", "numerical", "tokens", "tokens", "running_count",
                "num_attn_9_0_outputs", np.arange(v["tokens"].size), "closest")
    feats = (*p.classifier.features, "running_count", "num_attn_9_0_outputs")
    weights = {**p.classifier.weights, **{f: rng.normal(size=(1, len(p.classifier.classes)))
                                          for f in feats[-2:]}}
    clf = ir.Classifier(p.classifier.classes, feats, weights, p.classifier.bias)
    return Program(p.name, v, [RunningCount("running_count", "running_count"), *p.modules, head],
                   clf, causal=p.causal, bos=p.bos, eos=p.eos, pad=p.pad)


@pytest.mark.parametrize("merged", [False, True])
def test_running_counts_are_sound(monkeypatch, merged):
    if merged:
        monkeypatch.setattr(reach, "BUDGET", 0)
    for p in (reverse_program(vocab=5, max_len=6), random_program(3, vocab=3, max_len=6)):
        p = _with_running_count(p)
        sets = reach.value_sets(p)
        assert_sound(p, sets)
        first = sets.contexts.index((None, 0) if merged else (p.max_len, 0))
        assert sets.masks["running_count"][first].tolist() == [True] + [False] * (p.max_len - 1)

"""The prefix and running counts and the five experts against per-sequence loops, and the
fixed-expert rule against enumeration."""

import numpy as np

from tpcore.backend import asarray, to_host
from tpcore.counts import expert_features, fixed_expert, prefix_counts, running_counts
from tpcore.models.counting import SparseExpertCountingNetwork


def _loop_features(tokens, pad, v):
    """Per-sequence loops over the definitions in the module docstring."""
    b, n = tokens.shape
    prefix = np.zeros((b, n, v))
    running = np.zeros((b, n))
    experts = np.zeros((5, b, n))
    for s in range(b):
        seq = [int(t) for t, p in zip(tokens[s], pad[s]) if not p]
        hist = [seq.count(u) for u in range(v)]
        for t, x in enumerate(seq):
            for u in range(v):
                prefix[s, t, u] = seq[:t].count(u)
            running[s, t] = seq[: t + 1].count(x)
            experts[:, s, t] = (len(seq), hist[x], hist[x] == max(hist), hist[x] == 1,
                                hist[x] / len(seq))
    return prefix, running, experts


def test_features_match_loops(rng):
    tokens = rng.integers(1, 5, (4, 7))
    pad = np.zeros((4, 7), bool)
    pad[1, 5:], pad[2, 2:] = True, True
    tokens[pad] = 0
    want_p, want_r, want_e = _loop_features(tokens, pad, 5)
    got_p = prefix_counts(asarray(tokens), 5, asarray(pad), "float64")
    np.testing.assert_array_equal(to_host(got_p), want_p)
    got_r = running_counts(asarray(tokens), 5, asarray(pad), "float64")
    np.testing.assert_array_equal(to_host(got_r), want_r)
    h, e = expert_features(asarray(tokens), 5, asarray(pad), "float64")
    np.testing.assert_allclose(to_host(e), want_e)
    np.testing.assert_array_equal(to_host(h.sum(axis=1)), (~pad).sum(axis=1))


def test_fixed_expert_matches_enumeration():
    """The vertex rule agrees with the gate's argmax over every histogram of L content tokens."""
    import itertools

    content, framing = [2, 3, 4], {1: 1}
    found = set()
    for seed in range(12):
        net = SparseExpertCountingNetwork(5, 0, np.random.default_rng(seed), 3.0, "float64")
        net.w.data[:, content] *= 8.0  # make input-dependent gates common
        for length in range(1, 5):
            choices = set()
            for c in itertools.product(range(length + 1), repeat=len(content)):
                if sum(c) != length:
                    continue
                h = np.zeros(5)
                h[1], h[content] = 1, c
                choices.add(int(net.gate_logits(asarray(h[None])).argmax()))
            want = choices.pop() if len(choices) == 1 else None
            assert fixed_expert(*net.host_gate(), framing, content, length) == want
            found.add(want is None)
    assert found == {True, False}  # both kinds of gate were exercised

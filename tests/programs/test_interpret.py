"""The array reference and the numba kernel agree, and both follow the documented semantics."""

from __future__ import annotations

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.programs import interpret as it
from tpcore.programs.examples import random_inputs, random_program, reverse_program
from tpcore.programs.ir import Classifier, Head, Program

pytestmark = pytest.mark.host_only(
    "the program interpreter: NumPy reference and numba kernel on host arrays")


@pytest.mark.parametrize("rule", ["closest", "published"])
def test_reverse_program_reverses(rule):
    p = reverse_program(vocab=8, max_len=10, rule=rule)
    rng = np.random.default_rng(0)
    seqs = [[str(x) for x in rng.integers(0, 8, size=rng.integers(1, 9))] for _ in range(50)]
    for engine in it.ENGINES:
        out = it.predict(p, [["<s>", *s, "</s>"] for s in seqs], engine=engine)
        assert out == [["<s>", *s[::-1], "</s>"] for s in seqs]


@pytest.mark.parametrize("seed", range(8))
def test_kernel_matches_reference(seed):
    p = random_program(seed, layers=2 + seed % 2, causal=seed % 2 == 1)
    ids, lengths = random_inputs(p, 400, seed)
    ref = it.run_ids(p, ids, lengths, "numpy")
    fast = it.run_ids(p, ids, lengths, "numba")
    np.testing.assert_array_equal(ref, fast)
    assert (ref[np.arange(p.max_len)[None] >= lengths[:, None]] == -1).all()


def _one_head(rule: str, pred: list[int], causal: bool = False) -> Program:
    """tokens a/b/c; one head whose output (the attended position) is the only feature."""
    from tpcore.programs.examples import base_variables
    from tpcore.programs.ir import Variable

    v = base_variables(3, 6)
    v["attn_0_0_outputs"] = Variable("attn_0_0_outputs", "categorical", v["positions"].values)
    head = Head("attn_0_0", "categorical", "tokens", "tokens", "positions", "attn_0_0_outputs",
                np.asarray(pred, dtype=np.int64), rule)
    classes = tuple(str(i) for i in range(6))
    clf = Classifier(classes, ("attn_0_0_outputs",), {"attn_0_0_outputs": np.eye(6)},
                     np.zeros(6))
    return Program("one", v, [head], clf, causal=causal, passthrough=False)


def _brute(rule: str, pred: list[int], toks: list[int], causal: bool) -> list[int]:
    """The rule written out directly from its definition."""
    out = []
    for i, q in enumerate(toks):
        keys = range(i + 1) if causal else range(len(toks))
        m = [j for j in keys if pred[q] >= 0 and toks[j] == pred[q]]
        if not m:
            out.append(0)
        elif rule == "closest":
            others = [j for j in m if j != i] or m
            out.append(min(others, key=lambda j: (abs(i - j), j)))
        else:
            out.append(min(m, key=lambda j: (len(m) if j == i else abs(i - j), j)))
    return out


@pytest.mark.parametrize("rule", ["closest", "published"])
@pytest.mark.parametrize("causal", [False, True])
def test_select_closest_rules_match_their_definitions(rule, causal):
    rng = np.random.default_rng(1)
    for trial in range(40):
        pred = rng.integers(-1, 6, size=6).tolist()
        p = _one_head(rule, pred, causal)
        n = int(rng.integers(1, 7))
        toks = rng.integers(0, 6, size=n).tolist()
        ids = np.asarray([toks])
        for engine in it.ENGINES:
            got = it.run_ids(p, ids, np.asarray([n]), engine)[0].tolist()
            assert got == _brute(rule, pred, toks, causal), (trial, engine)


def test_rules_differ_where_the_spec_says():
    # the query at position 2 matches itself and the key at 4: the model's rule takes the other
    # key (the query itself only as a last resort); the published helper ranks the query as
    # distance len(matches) = 2, tied with key 4, and the first minimum (2) wins.
    pred = [0, -1, -1, -1, -1, -1]  # token 0 matches token 0
    toks = [1, 1, 0, 1, 0, 1]
    ids, n = np.asarray([toks]), np.asarray([6])
    closest = it.run_ids(_one_head("closest", pred), ids, n, "numpy")[0]
    published = it.run_ids(_one_head("published", pred), ids, n, "numpy")[0]
    assert closest[2] == 4 and published[2] == 2


def test_numerical_head_counts():
    # selector width of equal tokens (the hist program's head)
    from tpcore.programs.examples import base_variables
    from tpcore.programs.ir import Variable, numerical_range

    v = base_variables(4, 8)
    out = "num_attn_0_0_outputs"
    v[out] = Variable(out, "numerical", numerical_range(v["ones"], 8))
    head = Head("num_attn_0_0", "numerical", "tokens", "tokens", "ones", out,
                np.arange(v["tokens"].size, dtype=np.int64))
    classes = tuple(str(i) for i in range(9))
    w = np.zeros((1, 9))
    clf = Classifier(classes, (out,), {out: w}, np.zeros(9))
    p = Program("count", v, [head], clf, passthrough=False)
    ids, lengths = random_inputs(p, 50, 3)
    env = it.evaluate(p, ids, lengths)
    for b in range(50):
        n = lengths[b]
        for i in range(n):
            assert env[out][b, i] == (ids[b, :n] == ids[b, i]).sum()


def test_bad_inputs_are_named():
    p = reverse_program()
    with pytest.raises(TpcoreError, match="'x'"):
        it.encode(p, [["<s>", "x"]])
    with pytest.raises(TpcoreError, match="maximum length"):
        it.encode(p, [["1"] * 11])
    with pytest.raises(TpcoreError, match="engine"):
        it.run_ids(p, *it.encode(p, [["<s>", "</s>"]]), engine="cuda")


def test_unframed_inputs_are_refused_naming_the_framing():
    p = reverse_program()
    assert it.predict(p, [p.frame(["1", "2"])]) == [["<s>", "2", "1", "</s>"]]
    for seq, what in ((["1", "2"], "start with '<s>'"), (["<s>", "1", "2"], "end with '</s>'")):
        with pytest.raises(TpcoreError, match=f"sequence 1 does not {what}.*Program.frame"):
            it.predict(p, [p.frame(["1"]), seq])


def test_masked_classes_are_never_predicted():
    p = random_program(0)
    assert p.classifier.masked == (0,)
    p.classifier.bias[0] = 1e6
    ids, lengths = random_inputs(p, 200, 0)
    for engine in it.ENGINES:
        pred = it.run_ids(p, ids, lengths, engine)
        assert (pred != 0).all()
    p.classifier.masked = ()
    content = it.run_ids(p, ids, lengths, "numba")[lengths > 2, 1]  # position 1 is not </s>
    assert (content == 0).all()


def test_threaded_kernel_matches_single_thread():
    from tpcore.kernels.programs import run_compiled

    p = random_program(4, layers=2)
    ids, lengths = random_inputs(p, 1000, 4)
    compiled = it.compile_program(p)
    np.testing.assert_array_equal(run_compiled(compiled, ids, lengths, threads=2),
                                  run_compiled(compiled, ids, lengths))


def test_numerical_values_that_are_not_consecutive():
    # widen every numerical head's value set with a non-integer value: the kernel then looks
    # values up by binary search instead of a direct index, and must still match the reference
    from tpcore.programs import ir

    d = ir.to_dict(random_program(5, num_mlps=2))
    for name in d["numerical_values"]:
        d["numerical_values"][name] = [*d["numerical_values"][name], 1000.5]
    for m in d["modules"]:
        if m["type"] == "mlp" and m["kind"] == "numerical":
            rng = np.random.default_rng(0)
            sizes = [len(d["numerical_values"].get(x, [1])) for x in m["inputs"]]
            m["table"] = rng.choice(m["output_values"], size=int(np.prod(sizes))).tolist()
    p = ir.from_dict(d)
    ids, lengths = random_inputs(p, 300, 5)
    np.testing.assert_array_equal(it.run_ids(p, ids, lengths, "numpy"),
                                  it.run_ids(p, ids, lengths, "numba"))


def test_run_tokens_frames_and_unframes_one_input():
    p = reverse_program()
    assert it.run_tokens(p, ["1", "2", "3"]) == ["3", "2", "1"]
    assert it.run_tokens(p, ["<s>", "1", "2", "</s>"]) == ["2", "1"]   # framed already
    for bad in ("9", "<pad>"):
        with pytest.raises(TpcoreError, match=f"token '{bad}' \\(position 1\\) is not in the "
                                              "vocabulary of program 'reverse': \\['0', "):
            it.run_tokens(p, ["1", bad])

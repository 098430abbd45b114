"""The Dyck circuit finder (tpcore.analysis.dyck_circuit) on hand-built Dyck-2 programs: one
that holds the paper's circuit, one whose head looks elsewhere, one without brackets."""

import numpy as np
import pytest

from tpcore.analysis import dyck_circuit as D
from tpcore.errors import TpcoreError
from tpcore.programs import ir

pytestmark = pytest.mark.host_only("program IR and its NumPy interpreter")

TOKENS = ("<s>", "(", ")", "{", "}")
N = 9  # <s> and 8 brackets


def _program(offset: int = 1, flag_matched: bool = False, tokens=TOKENS) -> ir.Program:
    """A previous-token head (each position reads the token ``offset`` back), an MLP over the
    token and that one flagging ``(}`` and ``{)`` (and ``()`` too with ``flag_matched``), read
    by a second head that finds an earlier flag, and a classifier predicting F at a flag."""
    v = {"tokens": ir.Variable("tokens", "categorical", tokens),
         "positions": ir.Variable("positions", "categorical", tuple(range(N))),
         "ones": ir.Variable("ones", "numerical", (1,))}
    v["attn_0_0_outputs"] = ir.Variable("attn_0_0_outputs", "categorical", tokens)
    v["mlp_0_0_outputs"] = ir.Variable("mlp_0_0_outputs", "categorical", (0, 1))
    v["attn_1_0_outputs"] = ir.Variable("attn_1_0_outputs", "categorical", (0, 1))
    back = np.array([max(q - offset, 0) for q in range(N)])
    table = np.zeros((len(tokens), len(tokens)), dtype=np.int64)  # [token, previous token]
    t = {x: i for i, x in enumerate(tokens)}
    if "{" in t:
        table[t["}"], t["("]] = table[t[")"], t["{"]] = 1
        if flag_matched:
            table[t[")"], t["("]] = 1
    mods = [ir.Head("attn_0_0", "categorical", "positions", "positions", "tokens",
                    "attn_0_0_outputs", back),
            ir.Mlp("mlp_0_0", "categorical", ("tokens", "attn_0_0_outputs"), "mlp_0_0_outputs",
                   table, 0),
            ir.Head("attn_1_0", "categorical", "positions", "mlp_0_0_outputs", "mlp_0_0_outputs",
                    "attn_1_0_outputs", np.ones(N, dtype=np.int64))]
    classes = ("T", "P", "F")
    weights = {"mlp_0_0_outputs": np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 5.0]]),
               "attn_1_0_outputs": np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 2.0]])}
    clf = ir.Classifier(classes, tuple(weights), weights, np.zeros(3))
    return ir.Program("dyck2", v, mods, clf, causal=True, bos="<s>")


def test_the_circuit_is_found_from_the_tables():
    p = _program()
    c = D.find(p)
    assert c.previous_heads == ["attn_0_0"]
    [flag] = c.flags
    assert (flag.mlp, flag.head, flag.values) == ("mlp_0_0", "attn_0_0", [1])
    assert sorted(flag.pairs) == [("(", "}"), ("{", ")")]
    [reader] = flag.readers
    assert reader["module"] == "attn_1_0"
    assert reader["queries_matching_a_flag"] == [N, N]
    text = D.report(p, c)
    assert "previous-token heads: attn_0_0" in text and "(}, {)" in text


def test_the_check_measures_the_flag_where_the_first_error_is_a_mismatched_pair():
    p = _program()
    checked = D.check(p, D.find(p), samples=3000, seed=1)
    assert checked["mismatches"] > 100 and checked["matches"] > 100
    assert checked["flags"]["mlp_0_0"] == {"raised_at_mismatch": 1.0, "raised_at_match": 0.0}
    assert checked["predicts_F_at_mismatch"] == 1.0
    # the second head finds the nearest earlier flag, so F holds from the mismatch on
    assert checked["predicts_F_after_mismatch"] == 1.0
    assert "raises its flag at 1.0000" in D.report(p, D.find(p), checked)


def test_no_circuit_where_the_head_looks_elsewhere_or_the_flag_covers_a_match():
    assert D.find(_program(offset=2)).previous_heads == []
    c = D.find(_program(flag_matched=True))
    assert c.previous_heads == ["attn_0_0"] and c.flags == []
    assert "no MLP over (token, previous token)" in D.report(_program(flag_matched=True), c)


@pytest.mark.parametrize("tokens", [("<s>", "a", "b", "c", "d"), ("<s>", "(", ")", "a", "b")])
def test_a_program_without_two_bracket_types_is_refused_in_one_line(tokens):
    with pytest.raises(TpcoreError, match=r"expected a Dyck program of two or more"):
        D.find(_program(tokens=tokens))


def test_too_many_samples_are_refused_before_any_work():
    p = _program()
    with pytest.raises(TpcoreError, match=r"samples 1000001: expected 1 to 1,000,000"):
        D.check(p, D.find(p), samples=D.MAX_SAMPLES + 1)


def test_the_command_prints_the_circuit_and_its_check(tmp_path, capsys):
    import json

    from tpcore.cli import main

    path = tmp_path / "dyck2.json"
    ir.save(_program(), path)
    assert main(["program", "circuit", str(path), "--samples", "500", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["previous_heads"] == ["attn_0_0"] and out["flags"][0]["values"] == [1]
    assert out["check"]["flags"]["mlp_0_0"]["raised_at_mismatch"] == 1.0
    assert main(["program", "circuit", str(path), "--samples", "500"]) == 0
    assert "flag: mlp_0_0 reads tokens and attn_0_0" in capsys.readouterr().out

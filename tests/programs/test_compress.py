"""Compressed generated programs: the same predictions as the program on every framed input
(run in a child process), and shorter for the reasons the plan gives."""

from __future__ import annotations

import numpy as np
import pytest

from tpcore.programs import compress
from tpcore.programs import interpret as it
from tpcore.programs.examples import all_inputs, base_variables, random_program, reverse_program
from tpcore.programs.generated import run_generated
from tpcore.programs.ir import Classifier, Head, Mlp, Program, Variable, numerical_range
from tpcore.programs.source import reader, weights_csv, writer

pytestmark = pytest.mark.host_only("code generation; generated programs run in child processes")


def every_input(p: Program) -> list[list[str]]:
    return [p.frame([]), *all_inputs(p)]


def assert_same_everywhere(p: Program, tmp_path) -> None:
    """The compressed program, run in a child process, and the program it imports back as
    predict what the interpreter predicts on every framed input."""
    inputs = every_input(p)
    want = it.predict(p, inputs, "numba")
    assert run_generated(p, inputs) == want
    path, _ = writer.write(p, tmp_path / f"{p.name}.py")
    assert it.predict(reader.parse_file(path), inputs, "numba") == want


def _silenced(p: Program, features: tuple[str, ...], same: tuple[str, ...] = ()) -> Program:
    """``p`` with zero classifier rows for ``features`` and one row repeated for ``same``."""
    c = p.classifier
    weights = dict(c.weights)
    for f in features:
        weights[f] = np.zeros_like(weights[f])
    for f in same:
        weights[f] = np.repeat(weights[f][:1], len(weights[f]), axis=0)
    return Program(p.name, p.variables, p.modules,
                   Classifier(c.classes, c.features, weights, c.bias, c.masked),
                   causal=p.causal, bos=p.bos, eos=p.eos, pad=p.pad)


@pytest.mark.parametrize("seed", range(6))
def test_random_programs_agree_on_every_input(tmp_path, seed):
    p = random_program(seed, vocab=3, max_len=6, layers=3, causal=seed % 2 == 1)
    if seed >= 3:  # most features silenced: much of the program is dead
        feats = [f for f in p.classifier.features if not f.startswith(("tok", "pos"))]
        p = _silenced(p, tuple(feats[::2]), tuple(feats[1::4]))
    assert_same_everywhere(p, tmp_path)
    assert writer.line_counts(p)["pruned"] <= writer.line_counts(p)["full"]


def _hist_like() -> Program:
    """attn_0_0 attends to <s> (its output is always position 0); mlp_0_0 reads attn_0_0 and
    the tokens; num_attn_0_0 counts the query's token; mlp_0_1 reads nothing the classifier
    uses; num_mlp_0_0 thresholds the count."""
    v = base_variables(4, 8)
    tok = v["tokens"]
    v["attn_0_0_outputs"] = Variable("attn_0_0_outputs", "categorical", v["positions"].values)
    bos = np.full(tok.size, tok.index("<s>"), dtype=np.int64)
    bos[tok.index("<s>")] = -1
    modules: list[Head | Mlp] = [Head("attn_0_0", "categorical", "tokens", "tokens", "positions",
                                      "attn_0_0_outputs", bos)]
    v["num_attn_0_0_outputs"] = Variable("num_attn_0_0_outputs", "numerical",
                                         numerical_range(v["ones"], 8))
    modules.append(Head("num_attn_0_0", "numerical", "tokens", "tokens", "ones",
                        "num_attn_0_0_outputs", np.arange(tok.size, dtype=np.int64)))
    for name, inputs, table in (
            ("mlp_0_0", ("attn_0_0_outputs", "tokens"),
             np.add.outer(np.arange(8), np.arange(tok.size)) % 3),
            ("mlp_0_1", ("positions", "positions"), np.arange(64).reshape(8, 8) % 5)):
        v[f"{name}_outputs"] = Variable(f"{name}_outputs", "categorical", tuple(range(5)))
        modules.append(Mlp(name, "categorical", inputs, f"{name}_outputs", table, 0))
    count = v["num_attn_0_0_outputs"]
    v["num_mlp_0_0_outputs"] = Variable("num_mlp_0_0_outputs", "categorical", (0, 1, 2))
    modules.append(Mlp("num_mlp_0_0", "numerical", ("num_attn_0_0_outputs",) * 2,
                       "num_mlp_0_0_outputs",
                       np.diag(np.digitize(count.values, [2.5, 4.5])).astype(np.int64)
                       + np.zeros((count.size, count.size), dtype=np.int64), 0))
    feats = ("tokens", "attn_0_0_outputs", "mlp_0_0_outputs", "mlp_0_1_outputs",
             "num_mlp_0_0_outputs")
    rng = np.random.default_rng(0)
    weights = {f: rng.normal(size=(v[f].size, 3)) for f in feats}
    weights["mlp_0_1_outputs"][:] = weights["mlp_0_1_outputs"][0]  # equal rows
    return Program("hist_like", v, modules,
                   Classifier(("a", "b", "c"), feats, weights, np.zeros(3)), bos="<s>",
                   pad="<pad>")


def test_plan_keeps_what_can_change_a_prediction(tmp_path):
    p = _hist_like()
    pl = compress.plan(p)
    # attn_0_0 is always 0: a literal, and mlp_0_0 then depends on the tokens alone
    assert pl.constant["attn_0_0_outputs"] == 0 and "attn_0_0" not in pl.written
    assert pl.mlps["mlp_0_0"].inputs == ("tokens",)
    # mlp_0_1's rows are equal: one of its values, and its module is not written
    assert "mlp_0_1" not in pl.written and "mlp_0_1_outputs" in pl.constant
    # the numerical MLP reads its count once, as thresholds
    assert pl.mlps["num_mlp_0_0"].inputs == ("num_attn_0_0_outputs",)
    text = writer.source(p)
    assert "attn_0_0_outputs = [0] * len(tokens)" in text
    assert "def mlp_0_0(token):" in text and "def predicate_0_0" not in text
    assert "if num_attn_0_0_output <= 2:" in text and "if num_attn_0_0_output <= 4:" in text
    assert_same_everywhere(p, tmp_path)


def test_zero_features_leave_the_sum_and_their_modules_go(tmp_path):
    p = _silenced(_hist_like(), ("num_mlp_0_0_outputs",))
    pl = compress.plan(p)
    assert "num_mlp_0_0_outputs" not in pl.features
    assert not {"num_mlp_0_0", "num_attn_0_0"} & pl.written
    text = writer.source(p)
    assert "num_attn_0_0" not in text and "num_mlp_0_0" not in text
    assert "num_mlp_0_0_outputs" not in weights_csv.write(p, features=pl.features, reach=pl.reach)
    assert_same_everywhere(p, tmp_path)


@pytest.mark.parametrize("inputs, table", [
    (("num_attn_0_0_outputs",) * 2, [[1, 2, 0], [2, 0, 1], [0, 1, 2]]),
    (("ones", "num_attn_0_0_outputs"), [[1, 1, 1]]),  # ignores the count, but not its default
])
def test_sums_outside_the_listed_values_keep_the_default(tmp_path, inputs, table):
    p = _hist_like()
    v = dict(p.variables)
    count = "num_attn_0_0_outputs"
    v[count] = Variable(count, "numerical", (0, 1, 2))  # sums reach 6
    modules = [m if m.name != "num_mlp_0_0" else
               Mlp(m.name, "numerical", inputs, m.output, np.asarray(table, dtype=np.int64), 2)
               for m in p.modules]
    q = Program(p.name, v, modules, p.classifier, bos=p.bos, pad=p.pad)
    pl = compress.plan(q)
    assert count in pl.sets.outside and pl.mlps["num_mlp_0_0"].inputs[-1] == count
    assert_same_everywhere(q, tmp_path)


def test_queries_that_look_for_their_own_value_share_a_branch(tmp_path):
    p = reverse_program(vocab=3, max_len=7)
    text = writer.source(p)
    assert "return position == mlp_0_0_output" in text  # the head reading length - position
    assert text.count("return position ==") == 1
    assert_same_everywhere(p, tmp_path)

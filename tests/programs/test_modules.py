"""Each module kind's own facts (:mod:`tpcore.programs.modules`): the values of the counting
kinds, the words that describe every kind, the copy reading other variables and the kernel
operands."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.programs import interpret as it
from tpcore.programs import ir, modules
from tpcore.programs.examples import reverse_program
from tpcore.programs.ir import ExpertCount, Head, Mlp, PrefixCount, RunningCount, Variable

pytestmark = pytest.mark.host_only("the program IR's module kinds are host-side data")


def _program() -> ir.Program:
    """The reverse program (vocabulary 3, length 5) with a prefix count, a running count, an
    expert gate that always picks ``token_count`` and a numerical head over the prefix count."""
    p = reverse_program(vocab=3, max_len=5)
    v = dict(p.variables)
    bias = np.full(5, -10.0)
    bias[1] = 10.0
    gate = ExpertCount("experts", "expert_count", np.zeros((5, v["tokens"].size)), bias,
                       "float64")
    v["prefix_count_1"] = Variable("prefix_count_1", "numerical", tuple(range(5)))
    v["running_count"] = Variable("running_count", "numerical", tuple(range(1, 6)))
    v["expert_count"] = Variable("expert_count", "numerical", tuple(range(6)))
    v["num_out"] = Variable("num_out", "numerical", ir.numerical_range(v["prefix_count_1"], 5))
    head = Head("num_attn_2_0", "numerical", "tokens", "positions", "prefix_count_1", "num_out",
                np.arange(v["tokens"].size) % 5)
    return dataclasses.replace(p, variables=v, modules=[
        PrefixCount("prefix_count_1", "1", "prefix_count_1"),
        RunningCount("running_count", "running_count"), gate, *p.modules, head])


PROGRAM = _program()


def test_the_package_is_the_namespace_of_the_ir():
    assert set(modules.MODULE_TYPES) == {"head", "mlp", "prefix_count", "running_count",
                                         "expert_count"}
    for name in ("Head", "Mlp", "PrefixCount", "RunningCount", "ExpertCount", "Classifier",
                 "count_values", "expert_rule", "expert_values"):
        assert getattr(modules, name) is getattr(ir, name)


def test_counting_kinds_give_the_values_of_their_output():
    p = PROGRAM
    framing = (p.tokens, p.bos, p.eos, p.pad, p.max_len)
    for name in ("prefix_count_1", "running_count", "expert_count"):
        m = p.producer(name)
        assert m.values(*framing) == p.variables[name].values
        assert ir.count_values(m, *framing) == m.values(*framing)
    assert p.module("experts").values(*framing) == tuple(range(6))  # counts up to 5 tokens


def test_expert_values_check_the_gate_first():
    gate = ExpertCount("experts", "out", np.zeros((5, 2)), np.zeros(5))
    with pytest.raises(TpcoreError, match="weights must have shape"):
        gate.values(PROGRAM.tokens, "<s>", "</s>", "<pad>", 5)


def test_values_found_by_the_evaluation_are_listed():
    p = PROGRAM
    ids, lengths = it.encode(p, [p.frame(list(x)) for x in ("", "0", "110", "212")])
    env = it.evaluate(p, ids, lengths)
    for name in ("prefix_count_1", "running_count", "expert_count"):
        seen = {float(x) for b, n in enumerate(lengths) for x in env[name][b, :n]}
        assert seen <= set(p.variables[name].values), name


def test_each_kind_describes_itself():
    p = PROGRAM
    words = {m.name: (m.summary(), m.describe()) for m in p.modules}
    assert words == {
        "prefix_count_1": ("count of '1'", "count of '1' before each position (tokens)"),
        "running_count": ("running count of the own token",
                          "count of each position's own token up to it (tokens)"),
        "experts": ("counting expert", "the counting expert the gate picks (tokens)"),
        "attn_0_0": ("categorical head, closest",
                     "select_closest(key=tokens, query=tokens), value=positions [closest]"),
        "mlp_0_0": ("categorical MLP", "lookup(attn_0_0_outputs, positions)"),
        "attn_1_0": ("categorical head, closest", "select_closest(key=positions, "
                     "query=mlp_0_0_outputs), value=tokens [closest]"),
        "num_attn_2_0": ("numerical head",
                         "select+aggregate_sum(key=positions, query=tokens), "
                         "value=prefix_count_1"),
    }


def test_with_reads_renames_what_a_kind_reads():
    p = PROGRAM
    head = p.module("attn_1_0").with_reads(["q", "k", "v"])
    assert isinstance(head, Head) and head.reads == ("q", "k", "v")
    assert p.module("attn_1_0").reads == ("mlp_0_0_outputs", "positions", "tokens")
    mlp = p.module("mlp_0_0").with_reads(["a", "b"])
    assert isinstance(mlp, Mlp) and mlp.inputs == ("a", "b")
    for name in ("prefix_count_1", "running_count", "experts"):
        m = p.module(name)
        assert m.with_reads(["tokens"]) == m and m.with_reads(["tokens"]) is not m
        with pytest.raises(TpcoreError, match="reads only the tokens"):
            m.with_reads(["positions"])


def test_kernel_operands_of_each_kind():
    p = PROGRAM
    c = it.compile_program(p)
    ops = {m.name: row for m, row in zip(p.modules, c["ops"].tolist())}
    out = {m.name: row[4] for m, row in zip(p.modules, c["ops"].tolist())}
    assert ops["prefix_count_1"][:4] == [PrefixCount.opcode, p.tokens.index("1"), -1, -1]
    assert ops["running_count"][:4] == [RunningCount.opcode, -1, -1, -1]
    assert ops["experts"][:4] == [ExpertCount.opcode, 0, -1, -1]
    assert ops["experts"][6:] == [p.tokens.size, 0]  # divides in float64
    assert np.array_equal(c["fparams"], np.r_[np.zeros(5 * p.tokens.size), p.module(
        "experts").bias])
    head = p.module("attn_1_0")
    assert ops["attn_1_0"][0] == head.opcode and ops["attn_1_0"][7] == 0  # closest
    assert ops["attn_1_0"][1:4] == [out["mlp_0_0"], 1, 0]  # slots: tokens 0, positions 1
    start = ops["attn_1_0"][5]
    assert np.array_equal(c["params"][start: start + head.predicate.size], head.predicate)
    mlp = p.module("mlp_0_0")
    assert ops["mlp_0_0"][1] == out["attn_0_0"] and ops["mlp_0_0"][3] == mlp.default
    assert ops["mlp_0_0"][6:] == [p.max_len, 0]
    start = ops["mlp_0_0"][5]
    assert np.array_equal(c["params"][start: start + mlp.table.size], mlp.table.ravel())
    assert it.predict(p, [p.frame(["1", "0"])], "numba") == it.predict(
        p, [p.frame(["1", "0"])], "numpy")

"""The expert gate (SparseExpertCountingNetwork) as a program module: the discrete model, the
NumPy reference, the numba kernel and the generated program agree at every target position of
a generated task split, for fixed and input-dependent gates; JSON round trip and validation."""

import struct

import numpy as np
import pytest

from tpcore.backend import asarray, to_host
from tpcore.errors import TpcoreError
from tpcore.models import extract
from tpcore.models.counting import CountingConfig, CountingProgramModel, variant_flags
from tpcore.pipelines.fidelity import agreement
from tpcore.programs import interpret as it
from tpcore.programs import ir
from tpcore.programs.source import library, writer
from tpcore.tasks.registry import make_task

TASK = make_task("hist", vocab_size=6, max_len=8, n_samples=600, seed=0)
A, B, C, D = (TASK.vocab.index(t) for t in "abcd")
GATES = {  # name: (W entries {(expert, token id): weight}, b)
    "token_count": ({}, [0, 1, 0, 0, 0]),
    "relative_frequency": ({}, [0, 0, 0, 0, 1]),
    # scores (2.5, #a, #c, #d, #b): total_count when none of a-d occurs 3 times or more, else
    # the expert of the most frequent of them (the first expert on ties): each of the five wins
    "input": ({(1, A): 1.0, (2, C): 1.0, (3, D): 1.0, (4, B): 1.0}, [2.5, 0, 0, 0, 0]),
    # token_count and relative_frequency always tie: the first wins, but no rule is fixed
    "tie": ({}, [0, 1, 0, 0, 1]),
}


def _model(variant: str, gate: str, causal: bool = False, seed: int = 0,
           head_reads: str | None = None) -> CountingProgramModel:
    """A 2-layer model with the expert gate after layer 0, set to ``GATES[gate]``; layer 1's
    numerical MLP reads ``expert_count`` and the numerical head's output, and its head sums
    ``head_reads`` (``expert_count`` when it can only be an integer, else ``ones``)."""
    cfg = CountingConfig(vocab_size=len(TASK.vocab), max_len=TASK.max_len,
                         n_classes=len(TASK.classes), n_layers=2, n_cat_heads=1, n_num_heads=1,
                         n_cat_mlps=1, n_num_mlps=1, d_mlp=8, causal=causal, seed=seed,
                         **variant_flags(variant))
    model = CountingProgramModel(cfg)
    net = model.expert_network
    entries, bias = GATES[gate]
    net.w.data[:] = 0.0
    for ix, x in entries.items():
        net.w.data[ix] = x
    net.b.data[:] = asarray(bias)
    head_reads = head_reads or ("expert_count" if gate == "token_count" else "ones")
    num = model.variable_names("numerical")
    layer = model.layers[1]
    for gates, names in ((layer.value_gates, [head_reads]),
                         (layer.num_mlp_gates, ["expert_count", "num_attn_1_0_outputs"])):
        gates.data[:] = 0.0
        for row, name in enumerate(names):
            gates.data[row, num.index(name)] = 1.0
    layer.num_w1.data *= 30.0  # MLP outputs that change between close relative frequencies
    return model


def _extract(model: CountingProgramModel) -> ir.Program:
    return extract.extract(model, TASK.vocab, TASK.classes, name="hist", bos="<s>",
                           eos=TASK.eos, pad="<pad>")


def _assert_same_stream(model: CountingProgramModel, prog: ir.Program,
                        split: dict[str, np.ndarray]) -> None:
    """Every program variable equals the discrete model's stream at every non-pad position."""
    tokens, pad = split["tokens"], split["pad"]
    model.forward(tokens, pad)
    x, xn = to_host(model.cache["x"]), to_host(model.cache["xn"])
    env = it.evaluate(prog, tokens, (~pad).sum(axis=1))
    for spec in model.variables:
        if spec.kind == "categorical":
            want = x[spec.slot].argmax(-1)
        else:
            want = xn[spec.slot].astype(np.float64)
        np.testing.assert_array_equal(env[spec.name][~pad], want[~pad], err_msg=spec.name)


@pytest.mark.parametrize("gate", list(GATES))
@pytest.mark.parametrize("variant, causal", [("experts", False), ("both", True)])
def test_untrained_models_are_programs(variant, causal, gate):
    model = _model(variant, gate, causal, seed=1)
    prog = _extract(model)
    split = TASK.splits["test"]
    _assert_same_stream(model, prog, split)
    got = agreement(model, prog, split)
    assert (got["numpy"], got["numba"], got["generated"]) == (1.0, 1.0, 1.0)
    assert got["generated_sequences"] == len(split["tokens"])
    source = writer.source(prog)
    rule = ir.expert_rule(prog.module("experts"), prog.tokens, "<s>", None, "<pad>", 8)
    choices = set(model.expert_network.choice(asarray(split["tokens"]),
                                              asarray(split["pad"])).tolist())
    if gate in ("token_count", "relative_frequency"):
        assert set(rule.values()) == {gate} and "gate_score" not in source
        code = {"token_count": "expert_count = [hist[tokens[t]] for t in range(len(tokens))]",
                "relative_frequency": "float32(hist[tokens[t]] / len(tokens)) for t in range"}
        assert code[gate] in source
    else:
        assert None in rule.values() and "gate_score(*gate[e], hist.values())" in source
        assert choices == ({0, 1, 2, 3, 4} if gate == "input" else {1})


@pytest.mark.parametrize("variant, seed", [("experts", 2), ("both", 0)])
def test_random_untrained_models_are_programs(variant, seed):
    """As initialised (gate, reads and MLPs random; the gate depends on the input)."""
    cfg = CountingConfig(vocab_size=len(TASK.vocab), max_len=TASK.max_len,
                         n_classes=len(TASK.classes), n_layers=2, n_cat_heads=1, n_num_heads=1,
                         n_cat_mlps=1, n_num_mlps=1, d_mlp=8, seed=seed, **variant_flags(variant))
    model = CountingProgramModel(cfg)
    prog = _extract(model)
    _assert_same_stream(model, prog, TASK.splits["test"])
    got = agreement(model, prog, TASK.splits["test"])
    assert (got["numpy"], got["numba"], got["generated"]) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize("causal", [False, True])
def test_briefly_trained_model_is_its_program(tmp_path, causal):
    """A few training steps of the ``both`` variant (gate, heads and MLPs all move), decompiled
    as ``tpcore learn`` does it; the gate depends on the input."""
    from tpcore.pipelines.decompile import decompile
    from tpcore.pipelines.learn import LearnConfig, train

    cfg = LearnConfig(task="hist", n_layers=2, n_cat_heads=1, n_num_heads=1, n_cat_mlps=1,
                      n_num_mlps=1, d_mlp=8, epochs=3, batch_size=100, eval_every=0, seed=2)
    model = _model("both", "input", causal, seed=2)
    before = _extract(model).module("experts")
    model, _ = train(cfg, TASK, model=model)
    assert decompile(model, TASK, tmp_path)["fidelity"] == 1.0
    after = ir.load(tmp_path / "program.json")
    assert not np.array_equal(after.module("experts").weights, before.weights)
    got = agreement(model, after, TASK.splits["test"])
    assert (got["numpy"], got["numba"], got["generated"]) == (1.0, 1.0, 1.0)
    test = TASK.splits["test"]
    choices = model.expert_network.choice(asarray(test["tokens"]), asarray(test["pad"]))
    assert len(set(choices.tolist())) > 1


def test_json_round_trip_and_validation(tmp_path):
    from tpcore.programs.describe import dependency_text

    prog = _extract(_model("both", "input"))
    ir.save(prog, tmp_path / "p.json")
    back = ir.load(tmp_path / "p.json")
    assert ir.to_dict(back) == ir.to_dict(prog)
    np.testing.assert_array_equal(back.module("experts").weights, prog.module("experts").weights)
    assert back.variables["expert_count"] == prog.variables["expert_count"]
    split = TASK.splits["val"]
    lengths = (~split["pad"]).sum(axis=1)
    np.testing.assert_array_equal(it.run_ids(back, split["tokens"], lengths),
                                  it.run_ids(prog, split["tokens"], lengths))
    assert "expert_count" in dependency_text(prog) and "gate picks" in dependency_text(prog)

    def broken(edit) -> ir.Program:
        d = ir.to_dict(prog)
        edit(next(m for m in d["modules"] if m["type"] == "expert_count"))
        return ir.from_dict(d)

    with pytest.raises(TpcoreError, match="experts.*missing field 'c'"):
        broken(lambda m: m["weights"]["seen_once"].pop("c"))
    with pytest.raises(TpcoreError, match="experts.*dtype 'float16'"):
        broken(lambda m: m.update(dtype="float16"))
    with pytest.raises(TpcoreError, match="experts.*finite"):
        broken(lambda m: m["bias"].update(total_count=float("nan")))
    v = dict(prog.variables)
    v["expert_count"] = ir.Variable("expert_count", "numerical", tuple(range(9)))
    with pytest.raises(TpcoreError, match="experts.*experts its gate can pick"):
        ir.Program("p", v, prog.modules, prog.classifier, bos="<s>", pad="<pad>")


def test_numerical_mlp_enumerates_relative_frequencies():
    """The gate always picks relative_frequency: expert_count's values are the float32
    fractions a / n (n <= 8), the numerical MLP reading it is tabulated on each, and its output
    equals the model's (which changes between neighbouring fractions)."""
    model = _model("experts", "relative_frequency", seed=3)
    prog = _extract(model)
    fractions = {float(np.float32(a) / np.float32(n)) for n in range(1, 9) for a in range(1, n + 1)}
    assert set(prog.variables["expert_count"].values) == fractions
    assert float(np.float32(1) / np.float32(3)) in fractions and 1 / 3 not in fractions
    mlp = prog.module("num_mlp_1_0")
    assert mlp.inputs == ("expert_count", "num_attn_1_0_outputs")
    assert mlp.table.shape[0] == len(fractions)
    split = TASK.splits["test"]
    _assert_same_stream(model, prog, split)
    env = it.evaluate(prog, split["tokens"], (~split["pad"]).sum(axis=1))
    assert len(set(env["num_mlp_1_0_outputs"][~split["pad"]].tolist())) >= 3
    got = agreement(model, prog, split)
    assert (got["numpy"], got["numba"], got["generated"]) == (1.0, 1.0, 1.0)


def test_sums_of_relative_frequencies_are_refused():
    model = _model("experts", "input", head_reads="expert_count")
    with pytest.raises(TpcoreError, match="num_attn_1_0.*non-integer variable 'expert_count'"):
        _extract(model)


def test_discrete_program_carries_the_gate():
    model = _model("experts", "input")
    dp = model.discrete()
    assert ir.to_dict(_extract(dp)) == ir.to_dict(_extract(model))
    dp.extensions.clear()
    with pytest.raises(TpcoreError, match="expert_count.*weights are missing"):
        _extract(dp)


def test_float32_helper_matches_float32_division():
    """The generated programs round ``a / n`` (float64) to float32; that equals dividing in
    float32 for every ``1 <= a <= n <= 64`` (the numba kernel's longest input)."""
    ns = {"struct": struct}
    exec(library.FLOAT32, ns)  # the helper text written into generated programs
    for n in range(1, 65):
        for a in range(1, n + 1):
            assert ns["float32"](a / n) == float(np.float32(a) / np.float32(n))

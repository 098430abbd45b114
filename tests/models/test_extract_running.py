"""The running count (the counting release's PrefixSumCounts) as a program module: the discrete
model, the NumPy reference, the numba kernel and the generated program agree at every target
position; the JSON form and the generated line read back, and tampered forms are refused."""

import json

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.models import extract
from tpcore.models.counting import CountingConfig, CountingProgramModel, variant_flags
from tpcore.pipelines.fidelity import agreement
from tpcore.programs import interpret as it
from tpcore.programs import ir
from tpcore.programs.source import grammar, reader, writer
from tpcore.tasks.registry import make_task

TASK = make_task("hist", vocab_size=6, max_len=8, n_samples=600, seed=0)


def _program(causal: bool, seed: int = 3) -> tuple[CountingProgramModel, ir.Program]:
    """A 2-layer model whose layer-0 numerical head sums the running count and whose layer-0
    numerical MLP reads it; extracted."""
    cfg = CountingConfig(vocab_size=len(TASK.vocab), max_len=TASK.max_len,
                         n_classes=len(TASK.classes), n_layers=2, n_cat_heads=1, n_num_heads=1,
                         n_cat_mlps=1, n_num_mlps=1, d_mlp=8, causal=causal, seed=seed,
                         **variant_flags("running"))
    model = CountingProgramModel(cfg)
    num = model.variable_names("numerical")
    layer = model.layers[0]
    layer.value_gates.data[:] = 0.0
    layer.value_gates.data[0, num.index("running_count")] = 1.0
    layer.num_mlp_gates.data[:] = 0.0
    layer.num_mlp_gates.data[:, num.index("running_count")] = 1.0
    prog = extract.extract(model, TASK.vocab, TASK.classes, name="hist", bos="<s>",
                           eos=TASK.eos, pad="<pad>")
    return model, prog


@pytest.mark.host_only("numba kernel and generated code")
@pytest.mark.parametrize("causal", [False, True])
def test_model_reference_kernel_and_generated_program_agree(causal):
    model, prog = _program(causal)
    m = prog.module("running_count")
    assert isinstance(m, ir.RunningCount)
    assert prog.variables["running_count"].values == tuple(range(1, TASK.max_len + 1))
    split = TASK.splits["test"]
    env = it.evaluate(prog, split["tokens"], (~split["pad"]).sum(axis=1))
    assert env["running_count"][~split["pad"]].min() == 1  # every real token counts itself
    got = agreement(model, prog, split)
    assert (got["numpy"], got["numba"], got["generated"]) == (1.0, 1.0, 1.0)
    line = "running_count = [tokens[:i + 1].count(tokens[i]) for i in range(len(tokens))]"
    assert line in writer.source(prog)


@pytest.mark.host_only("generated code")
def test_generated_program_and_json_read_back(tmp_path):
    _, prog = _program(False)
    path, _ = writer.write(prog, tmp_path / "hist.py")
    back = reader.parse_file(path)
    assert isinstance(back.module("running_count"), ir.RunningCount)
    again = ir.from_dict(json.loads(json.dumps(ir.to_dict(prog))))
    ids, lengths = TASK.splits["test"]["tokens"], (~TASK.splits["test"]["pad"]).sum(axis=1)
    want = it.run_ids(prog, ids, lengths, "numpy")
    for q in (back, again):
        np.testing.assert_array_equal(it.run_ids(q, ids, lengths, "numpy"), want)


@pytest.mark.parametrize("field, value, message", [
    ("output", "ones", "ones.*defined twice"),
    ("output", 5, "'output' must be a string"),
])
def test_tampered_json_is_refused(field, value, message):
    _, prog = _program(False)
    d = ir.to_dict(prog)
    entry = next(m for m in d["modules"] if m["type"] == "running_count")
    entry[field] = value
    with pytest.raises(TpcoreError, match=message):
        ir.from_dict(d)


@pytest.mark.host_only("generated code")
@pytest.mark.parametrize("line", [
    "running_count = [tokens[:i + 1].count(__import__('os')) for i in range(len(tokens))]",
    "running_count = [tokens[:i].count(tokens[i]) for i in range(len(tokens))]",
])
def test_altered_running_count_lines_are_refused(tmp_path, line):
    _, prog = _program(False)
    path, _ = writer.write(prog, tmp_path / "hist.py")
    good = "running_count = [tokens[:i + 1].count(tokens[i]) for i in range(len(tokens))]"
    path.write_text(path.read_text().replace(good, line))
    with pytest.raises(grammar.ProgramSyntaxError, match="running_count must be"):
        reader.parse_file(path)

"""IR validation and the JSON round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.programs import interpret as it
from tpcore.programs import ir
from tpcore.programs.examples import random_inputs, random_program, reverse_program

pytestmark = pytest.mark.host_only("the program IR and its JSON form are host data")


@pytest.mark.parametrize("seed", range(4))
def test_json_round_trip_preserves_programs(tmp_path, seed):
    p = random_program(seed, causal=seed % 2 == 1)
    ir.save(p, tmp_path / "p.json")
    q = ir.load(tmp_path / "p.json")
    assert ir.to_dict(q) == ir.to_dict(p)
    ids, lengths = random_inputs(p, 200, seed)
    np.testing.assert_array_equal(it.run_ids(p, ids, lengths, "numpy"),
                                  it.run_ids(q, ids, lengths, "numpy"))


def test_json_keeps_label_types(tmp_path):
    p = reverse_program()
    ir.save(p, tmp_path / "r.json")
    d = json.loads((tmp_path / "r.json").read_text())
    head = next(m for m in d["modules"] if m["name"] == "attn_1_0")
    assert all(isinstance(q, int) and isinstance(k, int) for q, k in head["predicate"])
    assert d["inputs"]["tokens"]["values"][3] == "0"


def _dict() -> dict:
    return ir.to_dict(reverse_program())


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["modules"][0].update(query="nowhere"), "nowhere"),
    (lambda d: d["modules"][0].update(rule="nearest"), "rule 'nearest'"),
    (lambda d: d["modules"][2]["predicate"].append([99, 0]), "99"),
    (lambda d: d["modules"][1]["table"].pop(), "entries"),
    (lambda d: d["classifier"]["weights"]["attn_1_0_outputs"].pop(), "shape"),
    (lambda d: d["modules"].reverse(), "not defined before"),
    (lambda d: d.update(format="other"), "format"),
    (lambda d: d["modules"][0].update(name="x; import os"), "identifier"),
    (lambda d: d.update(bos="<bos>"), "<bos>"),
])
def test_invalid_programs_are_rejected_with_a_reason(edit, message):
    d = _dict()
    edit(d)
    with pytest.raises(TpcoreError, match=message):
        ir.from_dict(d)


def test_load_names_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TpcoreError, match="bad.json"):
        ir.load(bad)
    d = _dict()
    del d["classifier"]
    (tmp_path / "missing.json").write_text(json.dumps(d))
    with pytest.raises(TpcoreError, match="missing.json.*classifier"):
        ir.load(tmp_path / "missing.json")


def test_numerical_range_follows_the_paper_bound():
    ones = ir.Variable("ones", "numerical", (1,))
    assert ir.numerical_range(ones, 8) == tuple(range(9))
    counts = ir.Variable("c", "numerical", tuple(range(9)))
    assert ir.numerical_range(counts, 8)[-1] == 64


@pytest.mark.parametrize("mtype", ["conv", ["head"], None])
def test_unknown_module_types_name_the_known_ones(mtype):
    d = _dict()
    d["modules"][0]["type"] = mtype
    with pytest.raises(TpcoreError, match="expected 'head', 'mlp', 'prefix_count', "
                                          "'running_count' or 'expert_count'"):
        ir.from_dict(d)

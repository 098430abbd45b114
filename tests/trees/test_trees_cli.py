import json

import pytest

from tpcore.cli import main


def test_trees_sample_and_bp(capsys, tmp_path):
    assert main(["trees", "sample", "--n", "4", "--l", "3", "--k", "1", "--seed", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and all(len(x.split("\t")[1].split()) == 8 for x in lines)
    assert main(["trees", "sample", "--n", "5", "--l", "2", "--out", str(tmp_path / "t.npz")]) == 0
    assert (tmp_path / "t.npz").exists()
    assert main(["trees", "bp", "--l", "2", "0 1 ? 3"]) == 0
    out = capsys.readouterr().out
    assert "leaf 2 marginal" in out and "log Z" in out


@pytest.mark.parametrize("argv", [["trees", "bp", "--l", "2", "0 1 5 3"],
                                  ["trees", "bp", "--l", "3", "0 1 2 3"],
                                  ["trees", "sample", "--k", "7"]])
def test_trees_bad_input_exits_2(argv, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("tpcore: error:")


def test_reproduce_bp_table_small(tmp_path):
    assert main(["reproduce", "bp-table", "--samples", "2000", "--out", str(tmp_path)]) == 0
    out = json.loads((tmp_path / "bp_table.json").read_text())
    acc = {(r["k_data"], r["k_bp"]): r for r in out["rows"]}
    assert len(acc) == 25 and acc[0, 0]["root_acc"] == 1.0
    for k in range(5):  # matched BP is Bayes-optimal: best of its row (up to sampling noise)
        for key in ("root_acc", "mlm_acc"):
            assert acc[k, k][key] >= max(acc[k, kp][key] for kp in range(5)) - 0.02
    assert "BP_4" in (tmp_path / "bp_table.md").read_text()

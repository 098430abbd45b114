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
    assert main(["trees", "bp", "0 1 ? 3"]) == 0          # the depth read from the leaves
    assert out.endswith(capsys.readouterr().out)


@pytest.mark.parametrize("argv", [["trees", "bp", "--l", "2", "0 1 5 3"],
                                  ["trees", "bp", "--l", "3", "0 1 2 3"],
                                  ["trees", "sample", "--k", "7"]])
def test_trees_bad_input_exits_2(argv, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("tpcore: error:")

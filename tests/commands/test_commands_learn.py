"""`tpcore learn` / `tpcore sweep` on the command line: the summary, bad input."""

import pytest

from tpcore.cli import main


def test_cli_learn_runs_and_prints_summary(tmp_path, capsys):
    rc = main(["learn", "hist", "--layers", "1", "--cat-heads", "1", "--num-heads", "1",
               "--cat-mlps", "1", "--num-mlps", "1", "--epochs", "1", "--n-samples", "400",
               "--batch-size", "128", "--quiet", "--out", str(tmp_path / "h")])
    assert rc == 0
    out = capsys.readouterr().out
    assert "token acc" in out and "test" in out
    assert (tmp_path / "h" / "metrics.json").is_file()


@pytest.mark.parametrize("argv,msg", [
    (["learn", "nope"], "unknown task 'nope'"),
    (["learn", "sort", "--num-heads", "0"], "n_num_mlps=2 needs numerical heads"),
    (["learn", "sort", "--epochs", "0"], "argument --epochs: expected an integer >= 1, got '0'"),
    (["sweep", "sort", "--heads", "0"], "argument --heads: expected an integer >= 1"),
])
def test_bad_options_fail_before_training(argv, msg, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1

"""`tpcore learn` / `tpcore sweep`: run directories, bad input, resuming, Dask."""

import json

import pytest

from tpcore.cli import main
from tpcore.pipelines.learn import LearnConfig, learn
from tpcore.pipelines.sweep import execute, grid, sweep

TINY = dict(task="induction", n_layers=2, n_cat_heads=1, n_num_heads=0, n_cat_mlps=0,
            n_num_mlps=0, epochs=2, batch_size=64, eval_every=1, n_samples=300)


def test_learn_writes_run_directory(tmp_path):
    metrics = learn(LearnConfig(**TINY), tmp_path / "run")
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["config"]["n_cat_heads"] == 1 and saved["steps"] == 2 * 3
    for split in ("train", "val", "test"):
        assert 0.0 <= saved[split]["acc"] <= 1.0 and "seq_acc" in saved[split]
    assert (tmp_path / "run" / "model.npz").is_file()
    if "path" in metrics["program"]:  # decompiled: the program agrees with the model
        assert metrics["program"]["fidelity"] == 1.0


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


def test_sweep_resumes(tmp_path, monkeypatch):
    configs = grid(LearnConfig(**TINY), layers=[1], heads=[1], mlps=[1], seeds=[0, 1])
    for c in configs:
        c.n_num_heads, c.n_num_mlps, c.n_cat_mlps = 0, 0, 0
    result = sweep(configs, tmp_path, jobs=2)
    assert len(result["runs"]) == 2 and (tmp_path / "sweep.md").is_file()
    assert result["selected"]["val_acc"] == max(r["val_acc"] for r in result["runs"])

    def boom(*args, **kwargs):
        raise AssertionError("a finished run was repeated")

    monkeypatch.setattr("tpcore.pipelines.learn.learn", boom)
    again = execute(configs, tmp_path)
    assert [r["test_acc"] for r in again] == [r["test_acc"] for r in result["runs"]]


def test_sweep_on_dask_local_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    configs = grid(LearnConfig(**TINY), layers=[1], heads=[1], mlps=[1], seeds=[0, 1])
    for c in configs:
        c.n_num_heads, c.n_num_mlps, c.n_cat_mlps = 0, 0, 0
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        rows = execute(configs, tmp_path, scheduler=cluster)
    assert [r["seed"] for r in rows] == [0, 1]
    assert all((tmp_path / r["run"] / "metrics.json").is_file() for r in rows)


def test_reproduce_table1_smoke(tmp_path, capsys):
    rc = main(["reproduce", "table1", "--budget", "smoke", "--tasks", "induction", "hist",
               "--out", str(tmp_path)])
    assert rc == 0
    saved = json.loads((tmp_path / "table1.json").read_text())
    assert [r["task"] for r in saved["tasks"]] == ["hist", "induction"]  # in TASKS order
    assert "| hist |" in (tmp_path / "table1.md").read_text()
    assert "paper" in capsys.readouterr().out
    rc = main(["reproduce", "table1", "--budget", "smoke", "--tasks", "sort", "--out",
               str(tmp_path)])  # another task joins the table; the others' rows stay
    saved = json.loads((tmp_path / "table1.json").read_text())
    assert [r["task"] for r in saved["tasks"]] == ["hist", "sort", "induction"]
    assert len(saved["commands"]) == 2 and "--tasks sort" in saved["commands"][1]


def test_table1_seeds_replace_the_budgets():
    from tpcore.experiments.table1 import budget, configs_for

    assert [c.seed for c in configs_for("sort", budget("medium"))] == [0, 1, 2]
    assert [c.seed for c in configs_for("sort", budget("medium"), seeds=[4, 7])] == [4, 7]
    assert [c.seed for c in configs_for("induction", budget("small"), seeds=[3])] == [3]
    assert len(configs_for("hist", budget("paper"), seeds=[0])) == 8  # the grid, one seed


def test_reproduce_table1_refuses_runs_of_other_epochs(tmp_path, capsys):
    args = ["reproduce", "table1", "--budget", "smoke", "--tasks", "hist", "--out", str(tmp_path)]
    assert main(args) == 0
    assert main(args + ["--epochs", "3"]) == 2
    assert "epochs: 2 recorded, 3 requested" in capsys.readouterr().err
    assert main(args + ["--epochs", "3", "--overwrite"]) == 0
    saved = json.loads((tmp_path / "table1.json").read_text())
    assert saved["tasks"][0]["selected"]["epochs"] == 3

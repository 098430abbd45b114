"""`tpcore reproduce table1`: the smoke budget, seeds, tasks joining the table, runs of other
settings refused."""

import json

from tpcore.cli import main


def test_reproduce_table1_smoke(tmp_path, capsys):
    rc = main(["reproduce", "table1", "--budget", "smoke", "--tasks", "induction", "hist",
               "--out", str(tmp_path)])
    assert rc == 0
    saved = json.loads((tmp_path / "table1.json").read_text())
    assert [r["task"] for r in saved["tasks"]] == ["hist", "induction"]  # in TASKS order
    assert "| hist |" in (tmp_path / "table1.md").read_text()
    assert "paper" in capsys.readouterr().out
    for row in saved["tasks"]:  # the success rate: runs within a point of the paper
        runs = json.loads((tmp_path / "runs" / row["task"] / "sweep.json").read_text())["runs"]
        assert row["success"] == sum(100 * r["test_acc"] >= row["paper"] - 1 for r in runs)
        assert f"| {row['success']} of {row['runs']} |" in (tmp_path / "table1.md").read_text()
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


def test_table1_defaults_budget_trains_what_learn_trains():
    from tpcore.experiments.table1 import budget, configs_for
    from tpcore.pipelines.learn import task_config

    for task in ("induction", "sort"):
        runs = configs_for(task, budget("defaults"), seeds=[100, 101])
        assert runs == [task_config(task, epochs=250, seed=s) for s in (100, 101)]
    assert configs_for("induction", budget("medium"))[0].n_cat_heads == 1  # the paper's model


def test_reproduce_table1_refuses_runs_of_other_epochs(tmp_path, capsys):
    args = ["reproduce", "table1", "--budget", "smoke", "--tasks", "hist", "--out", str(tmp_path)]
    assert main(args) == 0
    assert main(args + ["--epochs", "3"]) == 2
    assert "epochs: 2 recorded, 3 requested" in capsys.readouterr().err
    assert main(args + ["--epochs", "3", "--overwrite"]) == 0
    saved = json.loads((tmp_path / "table1.json").read_text())
    assert saved["tasks"][0]["selected"]["epochs"] == 3


def test_reproduce_table1_halving_finishes_a_third_of_the_seeds(tmp_path, capsys):
    rc = main(["reproduce", "table1", "--budget", "smoke", "--tasks", "induction", "--seeds",
               "0", "1", "2", "--epochs", "3", "--halving", "3", "--out", str(tmp_path)])
    assert rc == 0
    saved = json.loads((tmp_path / "table1.json").read_text())
    row = saved["tasks"][0]
    assert row["runs"] == 3 and row["halving"]["runs"] == [3, 1]
    assert row["halving"]["epochs"] == [1, 3] and row["halving"]["epochs_trained"] == 5
    assert saved["commands"][0].endswith(f"--epochs 3 --seeds 0 1 2 --halving 3 --out {tmp_path}")
    sweep = json.loads((tmp_path / "runs" / "induction" / "sweep.json").read_text())
    assert row["selected"]["run"] == sweep["halving"]["rungs"][0]["survivors"][0]
    # the success rate counts the runs that finished, and the row keeps the task's wall time
    assert row["finished"] == 1 and f"| {row['success']} of 1 |" in (
        tmp_path / "table1.md").read_text()
    assert row["wall_seconds"] == sweep["wall_seconds"] > 0
    assert saved["seconds"] == row["wall_seconds"]

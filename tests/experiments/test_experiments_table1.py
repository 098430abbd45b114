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

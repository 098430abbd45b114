"""`tpcore reproduce table3`: categorical-only grids, the smoke budget beside the paper's
numbers, faithful programs, reruns that reuse the runs, halving, tasks outside Table 3."""

import json

import pytest

from tpcore.cli import main
from tpcore.experiments import table3
from tpcore.pipelines import learn as program_train
from tpcore.pipelines.decompile import load_program
from tpcore.pipelines.learn import fidelity
from tpcore.pipelines.sweep import run_name


@pytest.mark.host_only("configurations: no arrays")
@pytest.mark.parametrize("name", sorted(table3.BUDGETS))
def test_table3_grids_have_no_numerical_modules(name):
    for task in table3.TASKS:
        configs = table3.configs_for(task, table3.budget(name))
        assert configs and all(c.n_num_heads == c.n_num_mlps == 0 for c in configs)
        assert all(c.n_cat_heads > 0 and c.n_cat_mlps > 0 for c in configs)
    medium = table3.configs_for("dyck2", table3.budget("medium"))
    assert [run_name(c) for c in medium] == [f"L3_H4+0_M2+0_s{s}" for s in (0, 1, 2)]
    paper = table3.configs_for("sort", table3.budget("paper"), seed=10)
    assert len(paper) == 40 and {c.seed for c in paper} == set(range(10, 15))
    assert {(c.n_layers, c.n_cat_heads, c.n_cat_mlps) for c in paper} == {
        (n, h, m) for n in (2, 3) for h in (4, 8) for m in (2, 4)}


def test_reproduce_table3_smoke_beside_the_paper_and_reused(tmp_path, capsys, monkeypatch):
    args = ["reproduce", "table3", "--budget", "smoke", "--tasks", "sort", "hist", "--out",
            str(tmp_path)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    saved = json.loads((tmp_path / "table3.json").read_text())
    assert [r["task"] for r in saved["tasks"]] == ["hist", "sort"]  # in TASKS order
    md = (tmp_path / "table3.md").read_text()
    assert md == printed
    assert ("| hist | 8 | 2, 2, 2, 0 | 3, 8, 4 | 1 architecture x 1 seed, 2 epochs, all to the "
            "end |") in md  # the selected L, H, M beside Table 3's, and the protocol
    assert "| 99.99 |" in md and "| 83.20 |" in md  # Table 3's accuracies beside ours
    for row in saved["tasks"]:
        run = tmp_path / "runs" / row["task"] / row["selected"]["run"]
        assert row["selected"]["run"] == "L2_H2+0_M2+0_s0" and row["paper"] == table3.PAPER[
            row["task"]]
        config = json.loads((run / "metrics.json").read_text())["config"]
        assert config["n_num_heads"] == config["n_num_mlps"] == 0
        assert {v.kind for n, v in load_program(run).variables.items() if n != "ones"} == {
            "categorical"}
    agree = fidelity(tmp_path / "runs" / "sort" / "L2_H2+0_M2+0_s0")  # the whole test split
    assert (agree["numpy"], agree["numba"], agree["generated"]) == (1.0, 1.0, 1.0)
    assert agree["generated_sequences"] == agree["sequences"]

    def no_training(*a, **k):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(program_train, "train", no_training)
    assert main(args) == 0  # a rerun reads the runs back
    again = json.loads((tmp_path / "table3.json").read_text())
    assert [r["selected"] for r in again["tasks"]] == [r["selected"] for r in saved["tasks"]]
    assert again["commands"] == [f"tpcore reproduce table3 --budget smoke --tasks sort hist "
                                 f"--out {tmp_path}"]


def test_reproduce_table3_halving_says_its_protocol(tmp_path):
    rc = main(["reproduce", "table3", "--budget", "smoke", "--tasks", "sort", "--seeds", "0",
               "1", "2", "--epochs", "3", "--halving", "3", "--out", str(tmp_path)])
    assert rc == 0
    row = json.loads((tmp_path / "table3.json").read_text())["tasks"][0]
    assert row["halving"]["runs"] == [3, 1] and row["finished"] == 1
    assert ("| 1 architecture x 3 seeds, 3 epochs, halving 3: 3/1 runs |"
            in (tmp_path / "table3.md").read_text())


@pytest.mark.host_only("refused before any work: no arrays")
def test_reproduce_table3_refuses_tasks_outside_the_table(tmp_path, capsys):
    assert main(["reproduce", "table3", "--budget", "smoke", "--tasks", "in-context", "--out",
                 str(tmp_path)]) == 2
    assert "unknown task of Table 3 'induction'" in capsys.readouterr().err
    assert not (tmp_path / "table3.json").exists()

"""`tpcore learn` / `tpcore sweep` on the command line: the summary, bad input."""

import json

import pytest

import tpcore
from tpcore.cli import main
from tpcore.pipelines.learn import TASK_RECIPES, LearnConfig, task_config


def test_cli_learn_runs_and_prints_summary(tmp_path, capsys):
    rc = main(["learn", "hist", "--layers", "1", "--cat-heads", "1", "--num-heads", "1",
               "--cat-mlps", "1", "--num-mlps", "1", "--epochs", "1", "--n-samples", "400",
               "--batch-size", "128", "--quiet", "--out", str(tmp_path / "h")])
    assert rc == 0
    out = capsys.readouterr().out
    assert "token acc" in out and "test" in out
    assert (tmp_path / "h" / "metrics.json").is_file()


def test_cli_learn_trains_the_tasks_recipe_unless_told(tmp_path, capsys):
    """The in-context task trains its own recipe by default (2 layers of one categorical head,
    grown from 4 heads per layer, the best of 16 candidates); options given on the command line
    win, a run too short for the selection trains one candidate without growing, and the API
    builds the same configurations."""
    small = ["--n-samples", "200", "--batch-size", "64", "--quiet", "--json"]
    assert TASK_RECIPES["induction"] == dict(n_layers=2, n_cat_heads=1, n_num_heads=0,
                                             n_cat_mlps=0, n_num_mlps=0, grow=4, candidates=16,
                                             select_after=10)
    assert main(["learn", "in-context", *small, "--epochs", "2", "--select-after", "1",
                 "--out", str(tmp_path / "a")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {k: out["config"][k] for k in TASK_RECIPES["induction"]} == \
        {**TASK_RECIPES["induction"], "select_after": 1}
    assert main(["learn", "induction", *small, "--epochs", "1", "--cat-heads", "2",
                 "--layers", "3", "--out", str(tmp_path / "b")]) == 0
    config = json.loads(capsys.readouterr().out)["config"]
    assert (config["n_layers"], config["n_cat_heads"], config["n_cat_mlps"]) == (3, 2, 0)
    assert (config["candidates"], config["grow"]) == (1, 0)  # 1 epoch: one candidate
    assert task_config("hist") == LearnConfig(task="hist")
    assert TASK_RECIPES["double_hist"] == dict(n_cat_mlps=1, n_num_mlps=1, candidates=6,
                                               select_after=100)
    assert (task_config("double-hist").candidates, task_config("double_hist", epochs=100)
            .candidates, task_config("double_hist", epochs=100).n_cat_mlps) == (6, 1, 1)
    assert (task_config("induction", epochs=10).candidates,
            task_config("induction", epochs=10).grow) == (1, 0)
    assert (task_config("induction", epochs=11).candidates,
            task_config("induction", epochs=11).grow) == (16, 4)
    assert main(["learn", "hist", *small, "--epochs", "1", "--gate-tau", "3",
                 "--out", str(tmp_path / "d")]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["gate_tau"] == 3.0
    run = tpcore.learn("in-context", tmp_path / "c", epochs=1, n_samples=200, batch_size=64)
    assert run.config == task_config("induction", epochs=1, n_samples=200, batch_size=64)


def test_cli_learn_grows_then_prunes(tmp_path, capsys):
    argv = ["learn", "induction", "--n-samples", "200", "--batch-size", "64", "--quiet",
            "--epochs", "2", "--select-after", "1", "--candidates", "1", "--cat-heads", "1",
            "--grow", "2", "--out", str(tmp_path / "g")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "grown from 2 heads per layer" in out and "kept heads [[" in out
    assert main([*argv, "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["reused"] and run["config"]["grow"] == 2 and run["grown"]["kept"]
    assert (tmp_path / "g" / "grown.json").is_file()


@pytest.mark.parametrize("argv,msg", [
    (["learn", "nope"], "unknown task 'nope'"),
    (["learn", "sort", "--num-heads", "0"], "n_num_mlps=2 needs numerical heads"),
    (["learn", "sort", "--epochs", "0"], "argument --epochs: expected an integer >= 1, got '0'"),
    (["sweep", "sort", "--heads", "0"], "argument --heads: expected an integer >= 1"),
    (["sweep", "sort", "--halving", "1"], "successive halving needs eta >= 2"),
    (["sweep", "sort", "--halving", "3", "--rungs", "0"], "argument --rungs: expected an "
                                                          "integer >= 1"),
    (["sweep", "sort", "--halving", "3", "--eval-every", "0"], "eval_every >= 1"),
    (["learn", "sort", "--tau", "0.01", "3"], "0 < tau_end <= tau_start"),
    (["learn", "sort", "--gate-tau", "0"], "argument --gate-tau: expected a finite number > 0"),
    (["learn", "sort", "--tau", "3", "0"], "argument --tau: expected a finite number > 0"),
    (["learn", "sort", "--grow", "2"], "grow=2 trains a wider model first and keeps "
                                       "n_cat_heads=4"),
    (["learn", "sort", "--lr-schedule", "linear"], "argument --lr-schedule: unknown choice "
                                                   "'linear'"),
])
def test_bad_options_fail_before_training(argv, msg, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1


def test_cli_sweep_halving_prints_rungs_and_json_has_them(tmp_path, capsys):
    argv = ["sweep", "hist", "--layers", "1", "--heads", "2", "--mlps", "2", "--seeds", "0",
            "1", "2", "--epochs", "3", "--eval-every", "1", "--n-samples", "200",
            "--batch-size", "64", "--halving", "3", "--jobs", "1", "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| rung | epochs |" in out and "rung at 1 epochs: 3 runs" in out
    assert "halving trained 5 of the full grid's 9 epochs (56%)" in out
    assert main([*argv, "--json"]) == 0   # the rerun reads every rung back
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert "1 go on" in err
    assert [len(r["survivors"]) for r in doc["halving"]["rungs"]] == [1]
    assert doc["halving"]["epochs"] == [1, 3] and doc["wall_seconds"] >= 0
    assert [r["run"] for r in doc["runs"]] == doc["halving"]["rungs"][0]["survivors"]



def test_cli_sweep_categorical_only_trains_no_numerical_module(tmp_path, capsys):
    argv = ["sweep", "sort", "--layers", "1", "--heads", "3", "--mlps", "1", "--seeds", "0",
            "--categorical-only", "--epochs", "1", "--n-samples", "200", "--batch-size", "64",
            "--jobs", "1", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert "| L1_H3+0_M1+0_s0 * | 1 | 3 | 1 |" in capsys.readouterr().out

def _solution(tmp_path, size):
    from tpcore.experiments.table5 import solution
    from tpcore.programs import ir
    from tpcore.tasks.registry import make_task

    task = make_task("reverse", size, size, 200, 0, 1)
    path = tmp_path / f"solution{size}.json"
    ir.save(solution(task.vocab, task.classes, task.max_len), path)
    return path


SMALL_REVERSE = ["--layers", "2", "--cat-heads", "1", "--num-heads", "0", "--cat-mlps", "1",
                 "--num-mlps", "0", "--epochs", "1", "--n-samples", "200", "--vocab-size", "8",
                 "--max-len", "8", "--quiet"]


def test_cli_learn_init_from_a_program(tmp_path, capsys):
    rc = main(["learn", "reverse", *SMALL_REVERSE, "--init-from", str(_solution(tmp_path, 8)),
               "--init-parts", "attn_0_0.read,attn_0_0.predicate", "--json",
               "--out", str(tmp_path / "r")])
    assert rc == 0
    import json

    config = json.loads(capsys.readouterr().out)["config"]
    assert config["init_parts"] == "attn_0_0.read,attn_0_0.predicate"


@pytest.mark.parametrize("size,parts,msg", [
    (10, "read", "token 'f' of the program is not in the task's vocabulary"),
    (8, "attn_2_0.read", "init part 'attn_2_0': the program has no such module"),
    (8, "gates", "init part 'gates': expected one of read, predicate, classifier"),
])
def test_cli_learn_init_from_a_program_that_does_not_fit(tmp_path, capsys, size, parts, msg):
    out = tmp_path / "r"
    rc = main(["learn", "reverse", *SMALL_REVERSE, "--init-from",
               str(_solution(tmp_path, size)), "--init-parts", parts, "--out", str(out)])
    assert rc == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".r")]

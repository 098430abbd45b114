"""Hierarchy runs trained in chunks: a run paused at a checkpoint and resumed in a later call is
the run trained in one go, bit for bit; ``tpcore reproduce hierarchy --hours`` pauses and the
same command resumes, the results file gaining finished runs only."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tpcore.cli import main
from tpcore.errors import TpcoreError
from tpcore.experiments.against_bp import TreeRun, train_against_bp
from tpcore.experiments.hierarchy import BUDGETS
from tpcore.io import read_text, write_json

TINY = dict(BUDGETS["tiny"].sizes)


def quiet(line: str) -> None:
    pass


def without_timings(record: dict) -> str:
    """The record as JSON text, its wall-clock timings left out (NaN compares equal here)."""
    timed = {"train_seconds", "seconds_per_step"}
    history = [{k: v for k, v in h.items() if k not in timed} for h in record["history"]]
    return json.dumps({**{k: v for k, v in record.items() if k not in timed},
                       "history": history}, sort_keys=True)


@pytest.mark.parametrize("task, dropout", [("root", 0.0), ("mlm", 0.0), ("root", 0.2)])
def test_run_paused_anywhere_resumes_to_the_same_run(task, dropout, tmp_path):
    """``hours=0`` stops after one step (at a checkpoint when one comes first); calls resume
    from checkpoints and from steps between them, and the run ends as one trained at once."""
    run = TreeRun(task=task, dropout=dropout, **dict(TINY, steps=12))
    whole = train_against_bp(run, log=quiet, save_to=tmp_path / "whole")
    assert [h["step"] for h in whole["history"]] == [1, 3, 12]
    partial = tmp_path / ".chunked.partial"
    for step in range(1, 6):  # checkpoints 1 and 3, steps 2, 4 and 5 between them
        paused = train_against_bp(run, log=quiet, save_to=tmp_path / "chunked", hours=0)
        assert paused == {"run": run.__dict__,
                          "paused": {"step": step, "steps": run.steps, "state": str(partial)}}
        assert (partial / "run.json").is_file() and not (tmp_path / "chunked.npz").exists()
    chunked = train_against_bp(run, log=quiet, save_to=tmp_path / "chunked")
    assert without_timings(chunked) == without_timings(whole)
    with np.load(tmp_path / "whole.npz") as a, np.load(tmp_path / "chunked.npz") as b:
        assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)
    assert not partial.exists()


def test_paused_run_of_other_settings_is_refused(tmp_path):
    run = TreeRun(task="root", **TINY)
    train_against_bp(run, log=quiet, save_to=tmp_path / "run", hours=0)
    other = TreeRun(task="root", **dict(TINY, lr=1e-3))
    with pytest.raises(TpcoreError) as err:
        train_against_bp(other, log=quiet, save_to=tmp_path / "run")
    message = str(err.value)
    assert str(tmp_path / ".run.partial" / "run.json") in message
    assert "run.lr: 0.003 recorded, 0.001 requested" in message and "\n" not in message


def test_reproduce_hierarchy_in_chunks(tmp_path, monkeypatch, capsys):
    """``--hours`` pauses and says so; the same command resumes the run, a longer one finishes
    it, and the run is then kept; the results file holds finished runs only, of the
    ``--k-train`` asked for."""
    monkeypatch.chdir(tmp_path)  # the models and paused states go under runs/
    args = ["reproduce", "hierarchy", "--budget", "tiny", "--parts", "root", "--k-train", "1",
            "--hours", "1e-9", "--out", "out"]
    results = tmp_path / "out" / "hierarchy_tiny.json.gz"
    for step in (1, 2):  # the tiny budget's first checkpoint, then one step
        assert main(args) == 0
        last = capsys.readouterr().out.strip().splitlines()[-1]
        assert last == (f"paused the root run k_train=1 at step {step} of 60 (its state is in "
                        "runs/hierarchy/.tiny_root_k1_seed0.partial); the same command again "
                        "resumes it")
        assert not results.exists()
    assert main([*args[:-4], "--hours", "1", "--out", "out"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("wrote ")
    out = json.loads(read_text(results, "results"))
    assert [(r["run"]["task"], r["run"]["k_train"]) for r in out["runs"]] == [("root", 1)]
    command = "tpcore reproduce hierarchy --budget tiny --parts root --seed 0 --k-train 1 --hours"
    assert out["commands"] == [f"{command} 1"]  # the results file begins with a finished run
    assert not (tmp_path / "runs" / "hierarchy" / ".tiny_root_k1_seed0.partial").exists()
    assert main(args) == 0  # finished: kept, not trained again
    assert "step" not in capsys.readouterr().out
    assert json.loads(read_text(results, "results")) == out


@pytest.mark.parametrize("option, expected", [
    (["--k-train", "0", "3"], "--k-train 3: expected k_train values in 0..2"),
    (["--hours", "-1"], "argument --hours: expected a finite number > 0, got '-1'")])
def test_reproduce_hierarchy_refuses_bad_chunks(option, expected, tmp_path, capsys):
    assert main(["reproduce", "hierarchy", "--budget", "tiny", "--parts", "root", *option,
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and expected in err
    assert not (tmp_path / "out").exists()


def test_two_calls_side_by_side_keep_each_others_runs(tmp_path, monkeypatch):
    """Two calls on one --out, each training its own k_train, the second finishing while the first
    trains: the results file ends with both runs and both commands."""
    from tpcore.experiments import hierarchy

    monkeypatch.chdir(tmp_path)
    args = ["reproduce", "hierarchy", "--budget", "tiny", "--parts", "root", "--out", "out"]
    train = hierarchy.train_against_bp

    def alongside(run, *a, **kw):
        if run.k_train == 1:  # another call starts and finishes while this one trains k_train 1
            monkeypatch.setattr(hierarchy, "train_against_bp", train)
            assert main([*args, "--k-train", "0"]) == 0
        return train(run, *a, **kw)

    monkeypatch.setattr(hierarchy, "train_against_bp", alongside)
    assert main([*args, "--k-train", "1"]) == 0
    out = json.loads(read_text(tmp_path / "out" / "hierarchy_tiny.json.gz", "results"))
    assert sorted(r["run"]["k_train"] for r in out["runs"]) == [0, 1]
    assert len(out["commands"]) == 2
    assert "k_train = 0" in (tmp_path / "out" / "hierarchy_tiny.md").read_text()


def test_a_call_keeps_what_another_stored_while_it_trained(tmp_path, monkeypatch):
    """A call that read the results file before another call stored a part's results (the
    probes, say) writes them back as the other call left them, not as it first read them."""
    from tpcore.experiments import hierarchy

    monkeypatch.chdir(tmp_path)
    args = ["reproduce", "hierarchy", "--budget", "tiny", "--parts", "root", "--out", "out"]
    path = tmp_path / "out" / "hierarchy_tiny.json.gz"
    assert main([*args, "--k-train", "0"]) == 0
    write_json(path, {**json.loads(read_text(path, "results")), "other_part": "stale"})
    train = hierarchy.train_against_bp

    def alongside(run, *a, **kw):  # another call stores its part while this one trains
        write_json(path, {**json.loads(read_text(path, "results")), "other_part": "fresh"})
        return train(run, *a, **kw)

    monkeypatch.setattr(hierarchy, "train_against_bp", alongside)
    assert main([*args, "--k-train", "1"]) == 0
    out = json.loads(read_text(path, "results"))
    assert out["other_part"] == "fresh"
    assert sorted(r["run"]["k_train"] for r in out["runs"]) == [0, 1]

"""tpcore rebuild: a run trained again from its record (in its folder or packed into a
runs.json.gz) repeats it exactly on the machine it names; the comparison lists what differs;
bad input is one line."""

import json
import shutil
from pathlib import Path

import pytest

from tpcore.cli import main
from tpcore.cpu import training_machine
from tpcore.pipelines.learn import learn, recorded_config
from tpcore.pipelines.rebuild import differences, report

ROOT = Path(__file__).resolve().parents[2]
TABLE1_RUN = ROOT / "results" / "table1" / "runs" / "induction" / "L2_H1+0_M0+0_s0"
"""A Table 1 run (the paper's in-context model, 250 epochs, seed 0): its settings, the cheapest
to retrain, make the rebuilt run."""

RECORD = {"steps": 10, "steps_per_epoch": 2, "selected_at_step": 8,
          "history": [{"step": 2, "loss": 1.5, "acc": 0.5}, {"step": 4, "loss": 1.25, "acc": 0.75}],
          "train": {"loss": 1.0, "acc": 0.5}, "val": {"loss": 1.0, "acc": 0.5},
          "test": {"loss": 1.0, "acc": 0.5, "seq_acc": 0.25},
          "program": {"lines": 40, "fidelity": 1.0, "path": "a/prog.py"},
          "train_seconds": 3.0, "wall_seconds": 4.0}


def test_differences_list_each_value_not_repeated():
    assert differences(RECORD, json.loads(json.dumps(RECORD))) == []
    timing = {**RECORD, "train_seconds": 9.0, "program": {**RECORD["program"], "path": "b"}}
    assert differences(RECORD, timing) == []  # timings and paths are not compared
    other = json.loads(json.dumps(RECORD))
    other["test"]["acc"] = 0.5 + 2**-30
    other["history"][1]["loss"] = 1.0
    other["program"]["lines"] = 41
    assert differences(RECORD, other) == [
        {"key": "history[1].loss", "recorded": 1.25, "rebuilt": 1.0},
        {"key": "test.acc", "recorded": 0.5, "rebuilt": 0.5 + 2**-30},
        {"key": "program.lines", "recorded": 40, "rebuilt": 41}]
    shorter = {**RECORD, "history": RECORD["history"][:1]}
    assert [d["key"] for d in differences(RECORD, shorter)] == ["history"]


def test_report_names_the_machines_and_each_difference():
    made = training_machine(1)
    result = {"run": "r", "out": "o", "identical": False, "compared": ["test"],
              "differences": [{"key": "test.acc", "recorded": 0.5, "rebuilt": 0.25}],
              "recorded_on": None, "rebuilt_on": made, "same_machine": False}
    text = report(result)
    assert text.splitlines()[0] == "rebuilt r into o: 1 recorded value not repeated (test)"
    assert "recorded on: not recorded" in text and f"cpu {made['cpu']}" in text
    assert "within seed noise" in text and "  test.acc: recorded 0.5, rebuilt 0.25" in text


@pytest.mark.host_only("trains a run on NumPy to compare it bit for bit")
def test_a_run_is_rebuilt_exactly_on_its_machine(tmp_path, capsys):
    cfg = recorded_config(json.loads((TABLE1_RUN / "metrics.json").read_text()), "record")
    cfg.epochs = 20  # the committed run's settings, a tenth as long
    recorded = learn(cfg, tmp_path / "run", quiet=True, threads=1)
    assert recorded["machine"] == training_machine(1)
    assert main(["rebuild", str(tmp_path / "run"), "--out", str(tmp_path / "again"), "--quiet",
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["identical"] and result["same_machine"] and result["differences"] == []
    assert (tmp_path / "again" / "model.npz").is_file()
    # the same folder again: the finished rebuild is reused, and a changed record is caught,
    # here a record packed into a study's runs.json.gz whose run folder is gone
    changed = tmp_path / "study" / "sweep" / "changed"
    changed.mkdir(parents=True)
    recorded["test"]["acc"] += 0.001
    (changed / "metrics.json").write_text(json.dumps(recorded))
    assert main(["pack", str(tmp_path / "study")]) == 0
    shutil.rmtree(changed)
    assert main(["rebuild", str(changed), "--out", str(tmp_path / "again")]) == 1
    out = capsys.readouterr().out
    assert "1 recorded value not repeated" in out and "  test.acc: recorded" in out


def test_bad_input_is_one_line(tmp_path, capsys):
    assert main(["rebuild", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "metrics.json" in err
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(TABLE1_RUN / "metrics.json", run / "metrics.json")
    assert main(["rebuild", str(run), "--out", str(run)]) == 2
    assert "is the recorded run itself" in capsys.readouterr().err
    (run / "metrics.json").write_text(json.dumps({"config": {"task": "nope"}}))
    assert main(["rebuild", str(run), "--out", str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "nope" in err
    assert not (tmp_path / "y").exists()

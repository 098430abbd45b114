"""The d_model 300 sorting runs and parts trained in chunks, on tiny budgets: the wide variants'
settings and models; a part paused at evaluations and resumed by later calls is the part trained
in one go, bit for bit; ``tpcore reproduce sorting --hours`` pauses and the same command
resumes, the results gaining finished parts only; a paused state of other settings and a bad
``--hours`` are refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tpcore.cli import main
from tpcore.errors import TpcoreError
from tpcore.experiments import sorting
from tpcore.experiments.against_bp import PAUSED_REMEDY
from tpcore.experiments.budget import scaled
from tpcore.experiments.sorting import WIDE, run, run_config
from tpcore.experiments.sorting_evidence import QK_RUN
from tpcore.models import load
from tpcore.tasks.sorting import TASKS, batches

BUDGET = 0.0005
"""5 steps, the learning rate dropping after the 4th, an evaluation after every step."""
TIMED = {"train_seconds", "seconds_per_step", "train_cpu_seconds", "seconds"}


def without_timings(row: dict) -> str:
    """A result row as JSON text, its wall-clock and CPU timings left out."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in TIMED}
        return value
    return json.dumps(strip(row), sort_keys=True)


@pytest.mark.parametrize("task", ["causal", "distinct", "bidirectional"])
def test_batches_from_a_start_go_on_where_the_sequence_was(task):
    whole = batches(TASKS[task], 16, 3)
    [next(whole) for _ in range(3)]
    later = next(batches(TASKS[task], 16, 3, start=3))
    expected = next(whole)
    assert later.keys() == expected.keys()
    assert all(np.array_equal(later[k], expected[k]) for k in later)


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """Both wide parts trained in one go, with the clipping each step used."""
    out = tmp_path_factory.mktemp("sorting_wide")
    clips = []
    step = sorting.supervised_step

    def spy(model, batch, ctx, clip=None):
        clips.append(clip)
        return step(model, batch, ctx, clip=clip)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sorting, "supervised_step", spy)
        mp.setenv("TPCORE_CUDA_GRAPHS", "0")  # a captured step calls the spy only twice
        summary = run(scaled(BUDGET), out, 0, tasks=WIDE)
    return out, {r["task"]: r for r in summary["rows"]}, clips


def test_wide_parts_are_the_bidirectional_model_300_wide_with_and_without_clipping(wide):
    out, rows, clips = wide
    assert WIDE == ("bidirectional_d300", "bidirectional_unclipped_d300")
    assert clips == [0.02] * 5 + [None] * 5
    markdown = (out / "sorting.md").read_text()
    for name, clip in zip(WIDE, (0.02, None)):
        row = rows[name]
        assert (row["d_model"], row["clip"], row["steps"], row["lr_drop"]) == (300, clip, 5, 4)
        assert row["parameters"] == 371710  # 13*300 + 12*300 + 4*(300*300+300) + 300*10+10
        assert row["random"]["n"] == row["hard"]["n"] == 4000 and row["search"]["n"] == 1000
        config = json.loads((out / f"{name}_result.json").read_text())["record"]["config"]
        assert config == run_config(name, BUDGET, 0)
        assert (config["d_model"], config["clip"], config["trains"]) == (300, clip,
                                                                         "bidirectional")
        assert load(out / f"{name}.npz").config.d_model == 300
        assert f"| {name} | 300 | 371710 | 5 |" in markdown
        circuits = (out / f"{name}_circuits.md").read_text()
        assert circuits.startswith(f"# Circuits of the {name} sorting model (d_model 300)")
    assert run_config("bidirectional", 1.0, 0)["d_model"] == 56


def test_part_paused_and_resumed_is_the_part_trained_in_one_go(wide, tmp_path, monkeypatch):
    out, rows, _ = wide
    monkeypatch.setenv("TPCORE_CUDA_GRAPHS", "0")  # as the part trained in one go
    name = WIDE[0]
    partial = tmp_path / f".{name}.partial"
    for step in (1, 2):  # hours=0: each call pauses at the first evaluation it trains
        paused = run(scaled(BUDGET), tmp_path, 0, tasks=(name,), hours=0)
        assert paused["paused"] == (f"paused {name} at step {step} of 5 (its state is in "
                                    f"{partial}); the same command again resumes it")
        assert paused["rows"] == [] and not (tmp_path / f"{name}_result.json").exists()
        assert (partial / "run.json").is_file() and not (tmp_path / f"{name}.npz").exists()
    done = run(scaled(BUDGET), tmp_path, 0, tasks=(name,))
    assert "paused" not in done and not partial.exists()
    assert without_timings(done["rows"][0]) == without_timings(rows[name])
    with np.load(out / f"{name}.npz") as a, np.load(tmp_path / f"{name}.npz") as b:
        assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)


def test_qk_part_paused_keeps_its_snapshots(tmp_path):
    whole = run(scaled(BUDGET), tmp_path / "whole", 0, tasks=(QK_RUN,))["qk_training"]
    chunked = tmp_path / "chunked"
    for step in (1, 2, 3):
        paused = run(scaled(BUDGET), chunked, 0, tasks=(QK_RUN,), hours=0)
        assert paused["paused"].startswith(f"paused {QK_RUN} at step {step} of 4 ")
        kept = json.loads((chunked / f".{QK_RUN}.partial" / "part.json").read_text())
        assert len(kept["snapshots"]) == step and kept["train_cpu_seconds"] > 0
    done = run(scaled(BUDGET), chunked, 0, tasks=(QK_RUN,))["qk_training"]
    assert [c["step"] for c in done["checkpoints"]] == [1, 2, 4]
    assert without_timings(done) == without_timings(whole)
    assert (json.loads((chunked / f"{QK_RUN}_result.json").read_text())["checkpoints"]
            == json.loads((tmp_path / "whole" / f"{QK_RUN}_result.json").read_text())
            ["checkpoints"])


def test_paused_part_of_other_settings_is_refused(tmp_path, monkeypatch, capsys):
    name = WIDE[1]
    run(scaled(0.0002), tmp_path, 0, tasks=(name,), hours=0)  # 2 steps: paused after 1
    capsys.readouterr()  # that run's progress
    monkeypatch.setattr(sorting, "train", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(TpcoreError) as err:
        run(scaled(BUDGET), tmp_path, 0, tasks=(name,))
    message = str(err.value)
    assert str(tmp_path / f".{name}.partial" / "run.json") in message and "\n" not in message
    assert "config.steps: 2 recorded, 5 requested" in message
    assert message.endswith(PAUSED_REMEDY)
    assert main(["reproduce", "sorting", "--tasks", name, "--budget", str(BUDGET), "--out",
                 str(tmp_path)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1

    def started(*args, **kwargs):
        raise RuntimeError(f"trained afresh from {kwargs['resume']}")

    monkeypatch.setattr(sorting, "train", started)
    with pytest.raises(RuntimeError, match="trained afresh from None"):
        run(scaled(BUDGET), tmp_path, 0, tasks=(name,), overwrite=True)


def test_reproduce_sorting_in_chunks(tmp_path, capsys):
    """``--hours`` pauses a part at an evaluation, and starts no part once the time is spent;
    the same command goes on each time until both parts are done, then keeps them."""
    out = tmp_path / "out"
    args = ["reproduce", "sorting", "--tasks", "bidirectional,bidirectional_unclipped",
            "--budget", "0.0002", "--hours", "1e-9", "--out", str(out)]
    expected = [("paused bidirectional at step 1 of 2 (its state is in "
                 f"{out}/.bidirectional.partial)", []),
                ("paused after 1e-09 h, before starting bidirectional_unclipped",
                 ["bidirectional"]),
                ("paused bidirectional_unclipped at step 1 of 2 (its state is in "
                 f"{out}/.bidirectional_unclipped.partial)", ["bidirectional"])]
    for line, finished in expected:
        assert main(args) == 0
        assert capsys.readouterr().out.strip().splitlines()[-1] == (
            f"{line}; the same command again resumes it")
        rows = json.loads((out / "sorting.json").read_text())["rows"]
        assert [r["task"] for r in rows] == finished
    assert main(args) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith(f"wrote {out}/")
    rows = json.loads((out / "sorting.json").read_text())["rows"]
    assert [(r["task"], r["d_model"]) for r in rows] == [("bidirectional", 56),
                                                          ("bidirectional_unclipped", 56)]
    assert not list(out.glob(".*.partial"))
    assert main(args) == 0  # finished: kept, not trained again
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith(f"wrote {out}/")
    assert json.loads((out / "sorting.json").read_text())["rows"] == rows


@pytest.mark.parametrize("hours", ["-1", "0", "nan"])
def test_reproduce_sorting_refuses_bad_hours(hours, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["reproduce", "sorting", "--tasks", "bidirectional", "--hours", hours,
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"argument --hours: expected a finite number > 0, got '{hours}'" in err
    with pytest.raises(TpcoreError, match=r"--hours -1: expected a number of hours >= 0"):
        run(scaled(BUDGET), out, 0, tasks=("bidirectional",), hours=-1)
    assert not out.exists()

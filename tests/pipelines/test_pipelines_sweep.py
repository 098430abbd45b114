"""Successive halving in sweeps: rung lengths, ranking, survivors, resuming, exactness; sweeps
going on from packed run records."""

import gzip
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tpcore.pipelines.learn
from tpcore.errors import TpcoreError
from tpcore.pipelines.learn import LearnConfig, learn, paused_dir
from tpcore.pipelines.records import RECORDS, pack
from tpcore.pipelines.sweep import (
    grid,
    halve,
    halving_cost,
    rank,
    run_name,
    rung_epochs,
    selected_at,
    sweep,
)

TINY = dict(task="induction", n_layers=2, n_cat_heads=1, n_num_heads=0, n_cat_mlps=0,
            n_num_mlps=0, batch_size=64, eval_every=1, n_samples=300)
MEASURED = ("train_seconds", "ms_per_step", "ms_per_step_by_tenth", "peak_rss_mb", "wall_seconds",
            "program")


def test_grid_splits_heads_and_mlps_or_keeps_them_categorical():
    base = LearnConfig(task="sort")
    split = grid(base, [2], [5], [3], [0])
    assert [run_name(c) for c in split] == ["L2_H3+2_M2+1_s0"]
    only = grid(base, [2, 3], [4], [2], [0, 1], categorical_only=True)
    assert [run_name(c) for c in only] == ["L2_H4+0_M2+0_s0", "L2_H4+0_M2+0_s1",
                                            "L3_H4+0_M2+0_s0", "L3_H4+0_M2+0_s1"]


@pytest.mark.parametrize("epochs,every,eta,rungs,expected", [
    (250, 10, 3, 3, [30, 80, 250]),     # the paper budget: 250/9 and 250/3 on evaluations
    (250, 10, 3, 4, [10, 30, 80, 250]),
    (9, 1, 3, 3, [1, 3, 9]),
    (2, 1, 3, 3, [1, 2]),               # a rung no shorter than the next is dropped
    (250, 10, 2, 1, [250]),
])
def test_rung_epochs(epochs, every, eta, rungs, expected):
    assert rung_epochs(epochs, every, eta, rungs) == expected


@pytest.mark.parametrize("eta,rungs,every", [(1, 3, 1), (3, 0, 1), (3, 3, 0)])
def test_rung_epochs_refuses_what_cannot_halve(eta, rungs, every):
    with pytest.raises(TpcoreError, match="successive halving needs eta >= 2"):
        rung_epochs(10, every, eta, rungs)


def test_selection_at_a_step_is_the_loops():
    history = [{"step": 3, "acc": 0.5, "loss": 1.0}, {"step": 6, "acc": 0.7, "loss": 0.9},
               {"step": 9, "acc": 0.7, "loss": 0.8}, {"step": 12, "acc": 0.9, "loss": 0.1}]
    assert selected_at(history, 2) is None
    assert selected_at(history, 8)["step"] == 6
    assert selected_at(history, 11)["step"] == 9        # the latest among equals
    assert selected_at(history, 100)["step"] == 12


def test_rank_by_accuracy_then_loss_then_order():
    def row(name, acc, loss):
        return {"run": name, "steps_per_epoch": 2,
                "history": [{"step": 2, "acc": acc, "loss": loss},
                            {"step": 4, "acc": 1.0, "loss": 0.0}]}

    rows = [row("a", 0.5, 1.0), row("b", 0.8, 2.0), row("c", 0.8, 1.5), row("d", 0.5, 1.0)]
    assert [s["run"] for s in rank(rows, 1)] == ["c", "b", "a", "d"]
    assert rank(rows, 1)[0] == {"run": "c", "val_acc": 0.8, "val_loss": 1.5, "at_epoch": 1}
    with pytest.raises(TpcoreError, match="no validation evaluation by epoch 0"):
        rank(rows, 0)


def _fake_learn(calls):
    """A learn that trains nothing: run seed s scores s/10 at every epoch (seed 4 also 0.3, but
    with a lower loss than seed 3 until epoch 3, where seed 4 falls back), recording its
    calls."""
    def fake(cfg, out, quiet=True, overwrite=False, threads=None, pause_after=None):
        calls.append((cfg.seed, pause_after))
        acc = {4: 0.3}.get(cfg.seed, cfg.seed / 10)
        history = [{"step": 2 * e, "acc": acc if (cfg.seed != 4 or e < 3) else 0.0,
                    "loss": 1.0 - 0.1 * (cfg.seed == 4)} for e in range(1, pause_after + 1)]
        return {"steps": 2 * pause_after, "steps_per_epoch": 2, "history": history,
                "train_seconds": 0.0}
    return fake


def test_halving_continues_the_best_third_of_each_rung(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr("tpcore.pipelines.learn.learn", _fake_learn(calls))
    configs = [LearnConfig(**TINY, epochs=9, seed=s) for s in range(7)]
    finals, record = halve(configs, tmp_path, eta=3, rungs=3)
    assert record["epochs"] == [1, 3, 9] and record["configs"] == 7
    first, second = record["rungs"]
    # rung 0 at epoch 1: 6 > 5 > 4 (0.3, lower loss than 3) = 3 > ...; ceil(7/3) = 3 kept
    assert [s["run"][-2:] for s in first["runs"][:4]] == ["s6", "s5", "s4", "s3"]
    assert first["survivors"] == [run_name(configs[s]) for s in (4, 5, 6)]
    # rung 1 at epoch 3 ranks by the selection then: seed 4 still holds its epoch-2 model
    assert second["survivors"] == [run_name(configs[6])]
    assert [c.seed for c in finals] == [6]
    assert sorted(calls) == sorted([(s, 1) for s in range(7)] + [(s, 3) for s in (4, 5, 6)])
    assert halving_cost(record) == {"epochs_trained": 7 * 1 + 3 * 2 + 1 * 6,
                                    "epochs_full_grid": 63, "fraction": 19 / 63}


def test_halving_stops_ranking_when_one_run_is_left(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr("tpcore.pipelines.learn.learn", _fake_learn(calls))
    finals, record = halve([LearnConfig(**TINY, epochs=9, seed=s) for s in range(3)], tmp_path)
    assert [c.seed for c in finals] == [2] and len(record["rungs"]) == 1
    assert sorted(calls) == [(0, 1), (1, 1), (2, 1)]
    assert halving_cost(record)["epochs_trained"] == 3 * 1 + 1 * 8


def test_halving_refuses_runs_of_other_lengths(tmp_path):
    configs = [LearnConfig(**TINY, epochs=9, seed=0), LearnConfig(**TINY, epochs=6, seed=1)]
    with pytest.raises(TpcoreError, match="one epochs and eval_every for every run"):
        halve(configs, tmp_path)


def test_halving_sweep_in_two_processes_finishes_the_best_as_a_full_run_would(tmp_path):
    configs = grid(LearnConfig(**TINY, epochs=9), layers=[2], heads=[1], mlps=[1],
                   seeds=range(6))
    for c in configs:
        c.n_num_heads, c.n_num_mlps, c.n_cat_mlps = 0, 0, 0
    result = sweep(configs, tmp_path / "s", jobs=2, halving=3)
    rungs = result["halving"]["rungs"]
    assert [len(r["runs"]) for r in rungs] == [6, 2] and len(rungs[1]["survivors"]) == 1
    assert [r["run"] for r in result["runs"]] == rungs[1]["survivors"]
    assert result["halving"]["epochs_trained"] == 6 * 1 + 2 * 2 + 1 * 6
    saved = json.loads((tmp_path / "s" / "sweep.json").read_text())
    assert saved["halving"]["rungs"][0]["survivors"] == rungs[0]["survivors"]
    # the cut runs keep their state and how far they got; the finished one keeps none
    cut = [s["run"] for s in rungs[0]["runs"] if s["run"] not in rungs[0]["survivors"]]
    assert all(json.loads((paused_dir(tmp_path / "s" / r) / "paused.json").read_text())
               ["epochs"] == 1 for r in cut)
    best = result["selected"]["run"]
    assert not paused_dir(tmp_path / "s" / best).exists()
    # the survivor, paused twice on the way, is the run trained without pauses
    cfg = next(c for c in configs if run_name(c) == best)
    alone = learn(cfg, tmp_path / "alone")
    done = json.loads((tmp_path / "s" / best / "metrics.json").read_text())
    assert {k: v for k, v in done.items() if k not in MEASURED} == \
        {k: v for k, v in alone.items() if k not in MEASURED + ("reused",)}
    with np.load(tmp_path / "s" / best / "model.npz") as a, \
            np.load(tmp_path / "alone" / "model.npz") as b:
        assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)


def test_a_rerun_retrains_no_rung_already_done(tmp_path, monkeypatch):
    configs = [LearnConfig(**TINY, epochs=9, seed=s) for s in range(4)]
    for c in configs:  # rung 0 done before an interruption
        learn(c, tmp_path / run_name(c), pause_after=1)
    trained = []
    fit_run = tpcore.pipelines.learn.fit_run

    def spy(cfg, task, model, quiet, checkpoint, threads, resume, pause_after=None, **kw):
        trained.append((cfg.seed, resume.step if resume else 0, pause_after))
        return fit_run(cfg, task, model, quiet, checkpoint, threads, resume, pause_after, **kw)

    monkeypatch.setattr("tpcore.pipelines.learn.fit_run", spy)
    first = sweep(configs, tmp_path, halving=3)
    survivors = first["halving"]["rungs"][0]["survivors"]
    assert len(survivors) == 2 and len(trained) == 2 + 1
    assert all(step == 3 and until == 3 for _, step, until in trained[:2])   # from epoch 1
    trained.clear()
    again = sweep(configs, tmp_path, halving=3)
    assert trained == [] and again["selected"] == first["selected"]
    assert again["halving"]["rungs"][0]["runs"] == first["halving"]["rungs"][0]["runs"]


def test_a_sweep_widened_after_packing_trains_only_its_new_runs(tmp_path, monkeypatch):
    study = tmp_path / "study"
    configs = [LearnConfig(**TINY, epochs=2, seed=s) for s in range(3)]
    first = sweep(configs[:2], study / "runs" / "induction")
    pack(study)
    shutil.rmtree(study / "runs")  # what a results folder keeps: the records, not the folders
    trained = []
    real = tpcore.pipelines.learn.learn

    def spy(cfg, out, **kw):
        trained.append(cfg.seed)
        return real(cfg, out, **kw)

    monkeypatch.setattr("tpcore.pipelines.learn.learn", spy)
    wider = sweep(configs, study / "runs" / "induction")
    assert trained == [2]
    assert wider["runs"][:2] == first["runs"]  # the packed runs' rows, read back
    assert not (study / "runs" / "induction" / run_name(configs[0])).exists()
    assert wider["selected"] == max(wider["runs"], key=lambda r: r["val_acc"])


def test_a_packed_run_of_other_settings_is_refused_or_with_overwrite_trained(tmp_path):
    study = tmp_path / "study"
    cfg = LearnConfig(**TINY, epochs=2, seed=0)
    sweep([cfg], study / "runs")
    pack(study)
    shutil.rmtree(study / "runs")
    other = LearnConfig(**{**TINY, "n_samples": 200}, epochs=2, seed=0)
    assert run_name(other) == run_name(cfg)
    with pytest.raises(TpcoreError, match="runs.json.gz: run 'runs/.*' was made with other "
                                          "settings.*n_samples"):
        sweep([other], study / "runs")
    assert not (study / "runs" / run_name(cfg)).exists()
    done = sweep([other], study / "runs", overwrite=True)
    assert (study / "runs" / run_name(cfg) / "metrics.json").is_file() and done["runs"]


def test_halving_reads_a_packed_finished_run_instead_of_training_it(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr("tpcore.pipelines.learn.learn", _fake_learn(calls))
    configs = [LearnConfig(**TINY, epochs=9, seed=s) for s in range(7)]
    finished = _fake_learn([])(configs[6], None, pause_after=9)
    record = {**finished, "task": "induction", "config": configs[6].settings()}
    runs = {f"sweep/{run_name(configs[6])}": record}
    (tmp_path / "sweep").mkdir()
    with gzip.open(tmp_path / RECORDS, "wt") as f:
        json.dump({"format": "tpcore-runs", "version": 1, "runs": runs}, f)
    finals, rec = halve(configs, tmp_path / "sweep", eta=3, rungs=3)
    assert [c.seed for c in finals] == [6]  # the packed run, ranked by its history
    assert sorted(calls) == sorted([(s, 1) for s in range(6)] + [(s, 3) for s in (4, 5)])


@pytest.mark.skipif(not Path("/proc/self").exists() or shutil.which("pgrep") is None,
                    reason="finds the workers through /proc and pgrep")
def test_local_workers_end_when_the_sweep_process_is_killed(tmp_path):
    """A sweep killed by a signal its workers do not get must not leave them training."""
    script = ("import time\nfrom tpcore.pipelines.sweep import run_all\n"
              "if __name__ == '__main__':\n"
              "    run_all(time.sleep, [(60,), (60,)], jobs=2)\n")
    (tmp_path / "sweep_parent.py").write_text(script)
    parent = subprocess.Popen([sys.executable, str(tmp_path / "sweep_parent.py")])
    try:
        workers: list[int] = []
        deadline = time.monotonic() + 60
        while len(workers) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
            found = subprocess.run(["pgrep", "-P", str(parent.pid)], capture_output=True,
                                   text=True).stdout.split()
            workers = [int(p) for p in found
                       if "spawn_main" in Path(f"/proc/{p}/cmdline").read_text(errors="ignore")]
        assert len(workers) == 2, "the sweep did not start its two workers"
        time.sleep(3)  # the workers are past their initialiser, sleeping in their task
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 15
    while any(Path(f"/proc/{p}").exists() for p in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = [p for p in workers if Path(f"/proc/{p}").exists()
             and "spawn_main" in Path(f"/proc/{p}/cmdline").read_text(errors="ignore")]
    assert not alive, f"workers {alive} outlived the sweep"

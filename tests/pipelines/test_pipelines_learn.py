"""learn and sweep: run directories, resuming (sweeps on Dask: test_pipelines_dask.py)."""

import json

import numpy as np
import pytest

import tpcore.graphs
from tpcore.cli import main
from tpcore.cpu import blas_threads
from tpcore.errors import TpcoreError
from tpcore.models import load
from tpcore.models.counting import CountingProgramModel
from tpcore.pipelines.learn import LearnConfig, build_model, fit_run, learn, make_data, paused_dir
from tpcore.pipelines.sweep import execute, grid, sweep
from tpcore.programs import ir

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


TIMES = ("train_seconds", "ms_per_step", "ms_per_step_by_tenth", "peak_rss_mb", "wall_seconds",
         "program", "reused")
"""Metrics that are measured, not computed (and the program's path, which names the folder)."""


def test_a_paused_learn_run_finishes_as_if_it_never_paused(tmp_path, monkeypatch):
    cfg = LearnConfig(**{**TINY, "epochs": 4})
    whole = learn(cfg, tmp_path / "whole")
    first = learn(cfg, tmp_path / "run", pause_after=1)
    assert first["paused"] and first["epochs"] == 1 and first["steps"] == 3
    assert first["val"] == whole["history"][0] and not (tmp_path / "run").exists()
    assert (paused_dir(tmp_path / "run") / "run.json").is_file()
    assert learn(cfg, tmp_path / "run", pause_after=3)["epochs"] == 3

    def boom(*args, **kwargs):
        raise AssertionError("a paused run that got that far was trained again")

    monkeypatch.setattr("tpcore.pipelines.learn.fit_run", boom)
    assert learn(cfg, tmp_path / "run", pause_after=2)["epochs"] == 3
    monkeypatch.undo()
    done = learn(cfg, tmp_path / "run")
    assert not paused_dir(tmp_path / "run").exists()
    assert {k: v for k, v in done.items() if k not in TIMES} == \
        {k: v for k, v in whole.items() if k not in TIMES}
    with np.load(tmp_path / "whole" / "model.npz") as a, \
            np.load(tmp_path / "run" / "model.npz") as b:
        assert all(np.array_equal(a[k], b[k]) for k in a.files)


def test_the_best_candidate_finishes_as_its_seed_alone_would(tmp_path):
    """Candidates of seed 2 are seeds 6, 7 and 8; the one kept had the best validation
    accuracy after select_after epochs, and its run is the run of its seed, bit for bit."""
    cfg = LearnConfig(**{**TINY, "epochs": 3, "seed": 2, "candidates": 3, "select_after": 1})
    best = learn(cfg, tmp_path / "best")
    cands = best["candidates"]
    assert [c["seed"] for c in cands] == [6, 7, 8] and best["config"]["candidates"] == 3
    accs = [c["val_acc"] for c in cands]
    assert best["seed"] == cands[accs.index(max(accs))]["seed"]
    alone = learn(LearnConfig(**{**TINY, "epochs": 3, "seed": best["seed"]}), tmp_path / "one")
    assert alone["history"][0]["acc"] == max(accs)
    assert {k: v for k, v in best.items() if k not in (*TIMES, "candidates", "config")} == \
        {k: v for k, v in alone.items() if k not in (*TIMES, "config")}
    assert best["train_seconds"] >= sum(c["train_seconds"] for c in cands)  # all counted
    with np.load(tmp_path / "best" / "model.npz") as a, \
            np.load(tmp_path / "one" / "model.npz") as b:
        assert all(np.array_equal(a[k], b[k]) for k in a.files)
    assert LearnConfig(**TINY).settings()["candidates"] == 1  # every field is recorded
    with pytest.raises(TpcoreError, match="cannot pause"):
        learn(cfg, tmp_path / "paused", pause_after=1)


@pytest.mark.parametrize("fields", [dict(candidates=0), dict(candidates=2, select_after=2),
                                    dict(candidates=2, select_after=0)])
def test_candidate_settings_that_cannot_work_are_refused(fields):
    with pytest.raises(TpcoreError, match="candidates"):
        LearnConfig(**{**TINY, **fields}).check()


def test_a_paused_run_of_other_settings_is_refused_unless_overwrite(tmp_path):
    learn(LearnConfig(**{**TINY, "epochs": 3}), tmp_path / "run", pause_after=1)
    other = LearnConfig(**{**TINY, "epochs": 4})
    with pytest.raises(TpcoreError, match="epochs: 3 recorded, 4 requested"):
        learn(other, tmp_path / "run", pause_after=2)
    assert learn(other, tmp_path / "run", pause_after=2, overwrite=True)["epochs"] == 2


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
    # a rerun reusing every run adds its own wall time to the sweep's, which it keeps
    rerun = sweep(configs, tmp_path)
    assert rerun["wall_seconds"] >= result["wall_seconds"] > 0


def test_learn_runs_on_its_threads_and_leaves_the_count_as_it_found_it(tmp_path, monkeypatch):
    if blas_threads(3) is None:
        pytest.skip("NumPy has no OpenBLAS here")
    seen = []
    fit = tpcore.train.fit

    def spy(*args, **kwargs):
        seen.append(blas_threads(1))
        blas_threads(seen[-1])
        return fit(*args, **kwargs)

    monkeypatch.setattr("tpcore.pipelines.learn.fit", spy)
    try:
        learn(LearnConfig(**TINY), tmp_path / "run", threads=2)
        assert seen == [2] and blas_threads(1) == 3
    finally:
        blas_threads(1)


def test_learn_with_prefix_counts_decompiles_the_counting_modules(tmp_path, capsys):
    cfg = LearnConfig(**{**TINY, "task": "hist", "counting": "prefix", "n_num_heads": 1})
    metrics = learn(cfg, tmp_path / "run")
    assert metrics["config"]["counting"] == "prefix" and metrics["program"]["fidelity"] == 1.0
    assert isinstance(load(tmp_path / "run" / "model.npz"), CountingProgramModel)
    program = ir.load(tmp_path / "run" / "program.json")
    assert any(type(m).__name__ == "PrefixCount" for m in program.modules)
    assert LearnConfig(**TINY).settings()["counting"] == "none"  # every field is recorded
    with pytest.raises(ValueError, match="unknown counting variant 'many'"):
        LearnConfig(counting="many").check()
    assert main(["learn", "hist", "--counting", "prefix", "--layers", "2", "--cat-heads", "1",
                 "--num-heads", "1", "--cat-mlps", "0", "--num-mlps", "0", "--epochs", "2",
                 "--batch-size", "64", "--eval-every", "1", "--n-samples", "300", "--out",
                 str(tmp_path / "run"), "--quiet"]) == 0
    assert "reused the finished run" in capsys.readouterr().out


def test_learn_with_running_counts_decompiles_them(tmp_path):
    cfg = LearnConfig(**{**TINY, "task": "hist", "counting": "running", "n_num_heads": 1})
    metrics = learn(cfg, tmp_path / "run")
    assert metrics["config"]["counting"] == "running" and metrics["program"]["fidelity"] == 1.0
    program = ir.load(tmp_path / "run" / "program.json")
    assert [type(m).__name__ for m in program.modules].count("RunningCount") == 1


def test_grad_clip_bounds_every_step_of_a_learn_run(tmp_path, monkeypatch):
    """``grad_clip`` reaches the loop: every step's global gradient norm is clipped to it."""
    norms = []

    def clip(params, max_norm):
        norms.append(max_norm)
        return real(params, max_norm)

    real = tpcore.graphs.clip_grad_norm
    monkeypatch.setattr(tpcore.graphs, "clip_grad_norm", clip)
    monkeypatch.setenv("TPCORE_CUDA_GRAPHS", "0")  # a captured step calls clip only twice
    metrics = learn(LearnConfig(**{**TINY, "grad_clip": 0.5}), tmp_path / "run")
    assert norms == [0.5] * metrics["steps"]
    assert LearnConfig(**{**TINY, "grad_clip": 0.5}).settings()["grad_clip"] == 0.5
    assert LearnConfig(**TINY).settings()["grad_clip"] == 0.0  # every field is recorded
    with pytest.raises(TpcoreError, match="grad_clip"):
        LearnConfig(**{**TINY, "grad_clip": float("nan")}).check()


def test_the_learning_rate_schedule_is_the_runs():
    """``lr_schedule="cosine"`` sets each step's rate to ``lr * (1 + cos(pi * step / steps)) /
    2`` (9 steps here; the run pauses after 6), ``constant`` keeps ``lr``."""
    cfg = LearnConfig(**{**TINY, "epochs": 3, "lr_schedule": "cosine"})
    task = make_data(cfg)
    paused = fit_run(cfg, task, build_model(cfg, task), pause_after=2).paused
    step = paused.step - 1  # the rate of the last step taken
    assert paused.optimizer["lr"] == pytest.approx(cfg.lr * (1 + np.cos(np.pi * step / 9)) / 2)
    flat = LearnConfig(**{**TINY, "epochs": 3})
    assert fit_run(flat, task, build_model(flat, task), pause_after=2).paused.optimizer["lr"] \
        == cfg.lr
    assert cfg.settings()["lr_schedule"] == "cosine"
    assert flat.settings()["lr_schedule"] == "constant"
    with pytest.raises(TpcoreError, match="unknown lr_schedule 'linear'"):
        LearnConfig(lr_schedule="linear").check()


def test_a_finished_run_without_its_model_is_refused_in_one_line(tmp_path):
    """A run folder whose metrics say finished but whose model files are gone (copied without
    them, or deleted) is not reported as a run: the error names the missing files, and
    ``overwrite`` trains it again."""
    cfg = LearnConfig(**TINY)
    learn(cfg, tmp_path / "run")
    (tmp_path / "run" / "model.npz").unlink()
    with pytest.raises(TpcoreError, match=r"not its model \(model.npz missing\); pass "
                                          r"--overwrite"):
        learn(cfg, tmp_path / "run")
    assert learn(cfg, tmp_path / "run", overwrite=True)["reused"] is False
    assert (tmp_path / "run" / "model.npz").is_file()


def test_gate_tau_reaches_the_model_and_the_record():
    """``gate_tau`` is built into the model's configuration; a run records it only when it is
    not the paper's 1, and a bad value is refused by name."""
    cfg = LearnConfig(**{**TINY, "gate_tau": 3.0})
    assert build_model(cfg, make_data(cfg)).config.gate_tau == 3.0
    assert cfg.settings()["gate_tau"] == 3.0 and LearnConfig().settings()["gate_tau"] == 1.0
    with pytest.raises(TpcoreError, match="gate_tau must be a finite number > 0, got -1"):
        LearnConfig(gate_tau=-1.0).check()


def test_a_grown_run_starts_from_the_best_pruning_of_its_wider_program(tmp_path, monkeypatch):
    """The wider model trains as its own run would; each start of the narrow model has, as its
    discrete choices, the read gates and predicates of one pruning of the wider program."""
    from tpcore.models.extract import extract
    from tpcore.programs.prune import head_choices, keep_heads

    cfg = LearnConfig(**{**TINY, "epochs": 3, "select_after": 1, "grow": 2})
    starts_seen = []
    real = tpcore.pipelines.learn._best_start

    def spy(starts, task, *args):
        if starts[0][0].n_cat_heads == 1:
            starts_seen.extend((make(), task) for _, make in starts)
        return real(starts, task, *args)

    monkeypatch.setattr("tpcore.pipelines.learn._best_start", spy)
    grown = learn(cfg, tmp_path / "run")
    monkeypatch.undo()
    wide = learn(LearnConfig(**{**TINY, "epochs": 3, "n_cat_heads": 2}), tmp_path / "wide")
    assert grown["grown"]["test"] == wide["test"] and grown["grown"]["seed"] == wide["seed"]
    program = ir.load(tmp_path / "run" / "grown.json")
    assert [m.name for m in program.modules] == [m.name for m in ir.load(
        tmp_path / "wide" / "program.json").modules]
    choices = head_choices(program, 1)
    assert [c["heads"] for c in grown["grown"]["heads"]] == [[list(h) for h in c] for c in choices]
    assert len(starts_seen) == len(choices)
    for (model, task), choice in zip(starts_seen, choices):
        want = keep_heads(program, choice)
        got = extract(model, task)
        for m in want.modules:
            g = got.module(m.name)
            found = m.predicate >= 0  # queries that match nothing keep their random start
            assert g.reads == m.reads and np.array_equal(g.predicate[found], m.predicate[found])
    accs = [c["val_acc"] for c in grown["grown"]["heads"]]
    assert grown["grown"]["kept"] == grown["grown"]["heads"][accs.index(max(accs))]["heads"]
    assert grown["config"]["grow"] == 2
    assert load(tmp_path / "run" / "model.npz").config.n_cat_heads == 1
    assert grown["train_seconds"] > grown["grown"]["train_seconds"]
    assert LearnConfig(**TINY).settings()["grow"] == 0  # every field is recorded
    with pytest.raises(TpcoreError, match="cannot pause"):
        learn(cfg, tmp_path / "paused", pause_after=1)


@pytest.mark.parametrize("fields, match", [
    (dict(grow=1, select_after=1), "expected 1 <= n_cat_heads < grow"),
    (dict(grow=2, select_after=1, n_cat_heads=0), "expected 1 <= n_cat_heads < grow"),
    (dict(grow=2), "expected 1 <= select_after < epochs=2"),
    (dict(grow=-1), "grow must be >= 0"),
    (dict(grow=2, select_after=1, init_from="p.json", init_parts="read"),
     "cannot also start from"),
])
def test_grow_settings_that_cannot_work_are_refused(fields, match):
    with pytest.raises(TpcoreError, match=match):
        LearnConfig(**{**TINY, **fields}).check()

"""Run directories (:mod:`tpcore.rundir`): the out dir is checked before any work, runs are
written as a unit, reused only for their own configuration, and files respect the umask."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tpcore.cli import main
from tpcore.commands.reproduce import EXPERIMENTS
from tpcore.errors import TpcoreError
from tpcore.io import remove_stale_temps, write_text
from tpcore.pipelines import learn as program_train
from tpcore.pipelines import sweep as program_sweep
from tpcore.pipelines.learn import LearnConfig, learn
from tpcore.rundir import RECORD, SCHEMA, RunDir, cached, check_out_dir

TINY = dict(task="sort", n_layers=1, n_cat_heads=1, n_num_heads=1, n_cat_mlps=1, n_num_mlps=1,
            epochs=1, batch_size=64, eval_every=1, n_samples=200)


def _no_work(*args, **kwargs):
    raise AssertionError("work started")


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# ---------------------------------------------------------------- the out dir is checked first

def test_unwritable_out_dir_is_refused_before_training(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setattr(program_train, "make_data", _no_work)
    monkeypatch.setattr(program_train, "train", _no_work)
    with pytest.raises(TpcoreError, match="Not a directory") as err:
        learn(LearnConfig(**TINY), tmp_path / "file" / "sub" / "run")
    assert str(tmp_path / "file" / "sub") in str(err.value)
    with pytest.raises(TpcoreError, match="it is a file"):
        check_out_dir(tmp_path / "file")


def test_cli_refuses_unwritable_out_in_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "file").write_text("x")
    monkeypatch.setattr(program_train, "make_data", _no_work)
    for out in (tmp_path / "file" / "sub", Path("/proc/tpcore-test/run")):
        if out.parts[1] == "proc" and not Path("/proc/self").is_dir():
            continue
        assert main(["learn", "sort", "--epochs", "1", "--quiet", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "cannot write to output directory" in err


def _experiments():
    e = EXPERIMENTS
    table1, program_lengths, counting, sorting = (e["table1"], e["program-lengths"],
                                                  e["counting"], e["sorting"])
    bp_table, grammar_learning, hierarchy = (e["bp-table"], e["grammar-learning"],
                                             e["hierarchy"])
    looped, fleq, ner_demo, classify_demo = (e["looped"], e["fleq"], e["ner-demo"],
                                             e["classify-demo"])
    table5, published_programs, compiled = (e["table5"], e["published-programs"],
                                            e["compiled-programs"])
    table3, fig10 = e["table3"], e["fig10"]
    configs = program_sweep.grid(LearnConfig(**TINY), [1], [2], [2], [0])
    return {  # name: (call with the out dir, (module, attribute) that would start the work)
        "table1": (lambda out: table1.run(table1.budget("smoke"), out, 0, tasks=("hist",)),
                   (program_train, "train")),
        "table3": (lambda out: table3.run(table3.budget("smoke"), out, 0, tasks=("sort",)),
                   (program_train, "train")),
        "fig10": (lambda out: fig10.run(fig10.budget("smoke"), out, 0, tasks=("sort",)),
                  (program_train, "train")),
        "sweep": (lambda out: program_sweep.sweep(configs, out), (program_train, "train")),
        "program-lengths": (lambda out: program_lengths.run(program_lengths.budget("small"), out,
                                                            0, run_dirs=["x"]),
                            (program_lengths, "measure")),
        "counting": (lambda out: counting.run(counting.budget("smoke"), out, 0),
                     (counting, "train_run")),
        "sorting": (lambda out: sorting.run(sorting.budget(0.01), out, 0), (sorting, "train")),
        "bp-table": (lambda out: bp_table.run(bp_table.budget("small"), out, 0),
                     (bp_table, "sample_trees")),
        "grammar-learning": (lambda out: grammar_learning.run(grammar_learning.budget("tiny"),
                                                              out, 0),
                             (grammar_learning, "sample_trees")),
        "hierarchy": (lambda out: hierarchy.run(hierarchy.budget("tiny"), out, 0),
                      (hierarchy, "train_against_bp")),
        "looped": (lambda out: looped.run(looped.budget("small"), out, 0), (looped, "lam_sweep")),
        "fleq": (lambda out: fleq.run(fleq.budget("small"), out, 0), (fleq, "matmul_study")),
        "ner-demo": (lambda out: ner_demo.run(ner_demo.budget(1.0), out, 0),
                     (ner_demo, "prepare_ner")),
        "classify-demo": (lambda out: classify_demo.run(classify_demo.budget(1.0), out, 0),
                          (classify_demo, "prepare_classification")),
        "table5": (lambda out: table5.run(table5.budget("smoke"), out, 0), (table5, "learn")),
        "published-programs": (lambda out: published_programs.run(
            published_programs.budget("smoke"), out, 0, programs="x"),
            (published_programs, "measure")),
        "compiled-programs": (lambda out: compiled.run(compiled.budget("smoke"), out, 0),
                              (compiled, "measure")),
    }


@pytest.mark.parametrize("name", ["sweep", *EXPERIMENTS])
def test_every_experiment_checks_its_out_dir_first(name, tmp_path, monkeypatch):
    run, (module, work) = _experiments()[name]
    monkeypatch.setattr(module, work, _no_work)
    (tmp_path / "file").write_text("x")
    with pytest.raises(TpcoreError, match="cannot write to output directory"):
        run(tmp_path / "file" / "out")


def test_read_only_out_dir_is_refused(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("this user writes to read-only directories (root)")
        monkeypatch.setattr(program_train, "make_data", _no_work)
        with pytest.raises(TpcoreError, match="Permission denied"):
            learn(LearnConfig(**TINY), ro / "run")
        with pytest.raises(TpcoreError, match="Permission denied"):
            check_out_dir(ro)
    finally:
        ro.chmod(0o755)


# ---------------------------------------------------------------- a run is written as a unit

def test_failed_run_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), RunDir(tmp_path / "run", {"a": 1}).build() as tmp:
        (tmp / "model.npz").write_text("half")
        raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []


_KILLED = """
import os, signal, sys
from tpcore.io import atomic_path
from tpcore.rundir import RunDir
with RunDir(sys.argv[1], {"a": 1}).build() as tmp, atomic_path(tmp / "model.npz") as f:
    with atomic_path(os.path.join(os.path.dirname(sys.argv[1]), "table.json")):
        os.kill(os.getpid(), signal.SIGKILL)
"""


def test_killed_run_leaves_no_temporaries_after_the_next_start(tmp_path):
    proc = subprocess.run([sys.executable, "-c", _KILLED, str(tmp_path / "run")])
    assert proc.returncode == -signal.SIGKILL
    left = _temps(tmp_path)
    assert len(left) == 2 and left[0].startswith(".run.") and left[1].startswith(".table.json.")
    assert not (tmp_path / "run").exists()
    run = RunDir(tmp_path / "run", {"a": 1})  # the next start
    assert not run.finished and _temps(tmp_path) == []


def test_temporaries_of_running_processes_and_other_machines_are_kept(tmp_path):
    from tpcore.io import _HOST

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    mine = tmp_path / f".run.{_HOST}-{os.getpid()}-0123abcd.tmp"
    other = tmp_path / f".run.x{_HOST}-{dead}-0123abcd.tmp"
    stale = tmp_path / f".run.{_HOST}-{dead}-0123abcd.tmp"
    for p in (mine, other, stale):
        p.mkdir()
    assert remove_stale_temps(tmp_path) == [stale]
    assert _temps(tmp_path) == sorted([mine.name, other.name])


def test_rerun_with_other_settings_is_refused_and_overwrite_replaces_it_whole(tmp_path):
    with RunDir(tmp_path / "run", {"task": "sort", "epochs": 2}).build() as tmp:
        write_text(tmp / "program" / "sort.py", "old")
    with pytest.raises(TpcoreError, match=r"task: \"sort\" recorded, \"reverse\" requested\); "
                                          r"pass --overwrite"):
        RunDir(tmp_path / "run", {"task": "reverse", "epochs": 2})
    run = RunDir(tmp_path / "run", {"task": "reverse", "epochs": 2}, overwrite=True)
    assert not run.finished
    with run.build() as tmp:
        write_text(tmp / "program" / "reverse.py", "new")
    assert sorted(p.name for p in (tmp_path / "run" / "program").iterdir()) == ["reverse.py"]
    assert json.loads((tmp_path / "run" / RECORD).read_text())["config"]["task"] == "reverse"
    assert RunDir(tmp_path / "run", {"task": "reverse", "epochs": 2}).finished
    assert _temps(tmp_path) == []


def test_a_folder_that_holds_no_run_is_never_replaced(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(TpcoreError, match="holds files but no finished run"):
        RunDir(tmp_path / "mine", {"a": 1}, overwrite=True)
    (tmp_path / "empty").mkdir()
    with RunDir(tmp_path / "empty", {"a": 1}).build() as tmp:
        (tmp / "x").write_text("x")
    assert (tmp_path / "empty" / "x").is_file()


def test_learn_reuses_identical_settings_and_refuses_others(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    first = learn(LearnConfig(**TINY), out)
    assert not first["reused"] and first["program"]["path"] == str(out / "program" / "sort.py")
    monkeypatch.setattr(program_train, "train", _no_work)
    again = learn(LearnConfig(**TINY), out)
    assert again["reused"] and again["test"] == first["test"]
    argv = ["learn", "sort", "--layers", "1", "--cat-heads", "1", "--num-heads", "1",
            "--cat-mlps", "1", "--num-mlps", "1", "--epochs", "1", "--batch-size", "64",
            "--eval-every", "1", "--n-samples", "200", "--quiet", "--out", str(out)]
    assert main(argv) == 0 and "reused the finished run" in capsys.readouterr().out
    epochs = argv.index("--epochs") + 1
    assert main([*argv[:epochs], "2", *argv[epochs + 1:]]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "epochs: 1 recorded, 2 requested" in err


def test_learn_overwrite_replaces_the_whole_run(tmp_path):
    out = tmp_path / "run"
    learn(LearnConfig(**TINY), out)
    with pytest.raises(TpcoreError, match="task: \"sort\" recorded, \"reverse\" requested"):
        learn(LearnConfig(**{**TINY, "task": "reverse"}), out)
    learn(LearnConfig(**{**TINY, "task": "reverse"}), out, overwrite=True)
    assert [p.name for p in (out / "program").glob("*.py")] == ["reverse.py"]
    assert json.loads((out / "metrics.json").read_text())["task"] == "reverse"


@pytest.mark.parametrize("rec", [{"config": {}}, {"schema": 0, "config": {}}, [], "x"])
def test_a_run_recorded_by_another_tpcore_is_refused_or_overwritten(tmp_path, monkeypatch, rec):
    """A run.json of another record version (or none, or not a record) is never reused: one
    line names the run, the version and the remedy; overwrite trains the run again."""
    out = tmp_path / "run"
    learn(LearnConfig(**TINY), out)
    (out / RECORD).write_text(json.dumps(rec))
    with monkeypatch.context() as m:
        m.setattr(program_train, "train", _no_work)
        with pytest.raises(TpcoreError, match=r"^the run in .* was written by another tpcore "
                           r"\(record (no version|version 0), this one reads version 1\); "
                           "pass --overwrite"):
            learn(LearnConfig(**TINY), out)
    assert not learn(LearnConfig(**TINY), out, overwrite=True)["reused"]
    assert json.loads((out / RECORD).read_text())["schema"] == SCHEMA


# ---------------------------------------------------------------- sweeps resume their own runs

def test_sweep_does_not_reuse_runs_of_other_epochs(tmp_path, monkeypatch):
    two = program_sweep.grid(LearnConfig(**{**TINY, "epochs": 2}), [1], [2], [2], [0, 1])
    rows = program_sweep.execute(two, tmp_path)
    assert [r["epochs"] for r in rows] == [2, 2]
    four = program_sweep.grid(LearnConfig(**{**TINY, "epochs": 4}), [1], [2], [2], [0, 1])
    with monkeypatch.context() as m:
        m.setattr(program_train, "train", _no_work)
        with pytest.raises(TpcoreError, match="epochs: 2 recorded, 4 requested"):
            program_sweep.execute(four, tmp_path)
    rows = program_sweep.sweep(four, tmp_path, overwrite=True)["runs"]
    assert [r["epochs"] for r in rows] == [4, 4]
    monkeypatch.setattr(program_train, "train", _no_work)  # identical settings: reused
    assert [r["epochs"] for r in program_sweep.execute(four, tmp_path)] == [4, 4]
    assert [r["epochs"] for r in program_sweep.execute(four, tmp_path, overwrite=True)] == [4, 4]


# ---------------------------------------------------------------- cached single-file results

def test_cached_result_is_reused_only_for_its_configuration(tmp_path):
    path = tmp_path / "runs" / "a.json"
    assert cached(path, {"n": 1}, lambda: {"acc": 0.5})["acc"] == 0.5
    assert cached(path, {"n": 1}, _no_work)["acc"] == 0.5
    with pytest.raises(TpcoreError, match="n: 1 recorded, 2 requested"):
        cached(path, {"n": 2}, _no_work)
    assert cached(path, {"n": 2}, lambda: {"acc": 0.7}, overwrite=True)["acc"] == 0.7
    saved = json.loads(path.read_text())
    assert saved["record"]["config"] == {"n": 2} and len(saved["record"]["config_sha256"]) == 64


def test_cached_result_without_a_current_record(tmp_path):
    path = tmp_path / "old.json"
    for old in ({"acc": 0.5, "n": 1}, {"acc": 0.5, "record": {"config": {"n": 1}}}):
        path.write_text(json.dumps(old))
        with pytest.raises(TpcoreError, match="was written by another tpcore"):
            cached(path, {"n": 1}, _no_work)
        assert cached(path, {"n": 1}, lambda: {"acc": 0.7}, overwrite=True)["acc"] == 0.7
        assert json.loads(path.read_text())["record"]["schema"] == SCHEMA


# ---------------------------------------------------------------- permissions follow the umask

@pytest.mark.parametrize("umask,file_mode,dir_mode", [(0o022, 0o644, 0o755),
                                                      (0o077, 0o600, 0o700)])
def test_written_files_respect_the_umask(tmp_path, umask, file_mode, dir_mode):
    old = os.umask(umask)
    try:
        write_text(tmp_path / "a.txt", "x")
        with RunDir(tmp_path / "run", {"a": 1}).build() as tmp:
            write_text(tmp / "b.txt", "y")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == file_mode
    assert (tmp_path / "run" / "b.txt").stat().st_mode & 0o777 == file_mode
    assert (tmp_path / "run" / RECORD).stat().st_mode & 0o777 == file_mode
    assert (tmp_path / "run").stat().st_mode & 0o777 == dir_mode


def test_a_write_error_without_a_file_name_names_the_target(tmp_path, monkeypatch):
    import errno

    import tpcore.io

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tpcore.io.os, "replace", full_disk)
    with pytest.raises(OSError) as info:
        write_text(tmp_path / "metrics.json", "{}")
    assert info.value.filename == str(tmp_path / "metrics.json")
    assert list(tmp_path.iterdir()) == []


def test_out_dot_writes_the_run_into_the_empty_current_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["learn", "sort", "--epochs", "1", "--n-samples", "200", "--layers", "1",
                 "--quiet", "--out", "."]) == 0
    assert (tmp_path / RECORD).is_file() and (tmp_path / "program" / "sort.py").is_file()

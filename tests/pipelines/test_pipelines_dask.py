"""Sweeps on a Dask cluster of worker processes: the same runs as a local sweep, bit for bit;
a worker killed mid-sweep loses no run and trains none twice; a scheduler that does not answer
and a worker without tpcore are one line each, before anything is written.

The workers run :data:`SPY` as they start: it marks each training start in a folder and, when
the test asks for it with a file there, kills its own worker once, either while a run is being
written or after a run has finished but before its row is returned."""

import dataclasses
import json
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from tpcore.cli import main
from tpcore.errors import TpcoreError
from tpcore.pipelines.learn import LearnConfig
from tpcore.pipelines.sweep import grid, run_names, sweep

distributed = pytest.importorskip("distributed")

TINY = dict(task="induction", n_layers=2, n_cat_heads=1, n_num_heads=0, n_cat_mlps=0,
            n_num_mlps=0, epochs=2, batch_size=64, eval_every=1, n_samples=300)
CONFIGS = grid(LearnConfig(**TINY), layers=[1, 2], heads=[1], mlps=[0], seeds=[0, 1])
NAMES = run_names(CONFIGS)
MEASURED = ("train_seconds", "ms_per_step", "ms_per_step_by_tenth", "peak_rss_mb", "wall_seconds",
            "program")
"""Fields that are measured, not computed (and the program's path, which names the folder)."""

SPY = '''
import os
import signal
import uuid
from pathlib import Path

import tpcore.pipelines.learn as learn
import tpcore.pipelines.sweep as sweep

MARKS = Path(os.environ["TPCORE_TEST_MARKS"])
if not hasattr(learn, "unspied"):  # a worker may run its preloads again
    learn.unspied = learn.fit_run, learn.save, sweep.summarise
fit_run, save, summarise = learn.unspied
current = [""]


def die_once(when, run):
    """Kill this worker at once if the test's file ``when`` is still there (taking it)."""
    try:
        os.rename(MARKS / when, MARKS / f"{when} {run}")
    except FileNotFoundError:
        return
    os.kill(os.getpid(), signal.SIGKILL)


def counted_fit_run(cfg, *args, **kwargs):
    current[0] = sweep.run_name(cfg)
    (MARKS / f"start {current[0]} {uuid.uuid4().hex}").touch()
    return fit_run(cfg, *args, **kwargs)


def save_then_die(*args, **kwargs):  # the run's temporary folder holds its model, no more
    saved = save(*args, **kwargs)
    die_once("die-writing", current[0])
    return saved


def summarise_then_die(path):  # the run is finished, its row not yet returned
    row = summarise(path)
    die_once("die-reporting", path.name)
    return row


learn.fit_run, learn.save = counted_fit_run, save_then_die
sweep.summarise = summarise_then_die
'''
HIDE_TPCORE = '''
import sys


class HideTpcore:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "tpcore":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


sys.meta_path.insert(0, HideTpcore())
'''
"""A worker preload that makes tpcore unimportable, as on a worker where it is not installed."""


@contextmanager
def cluster(folder: Path, preload: str = SPY, workers: int = 2):
    """A ``LocalCluster`` of ``workers`` single-threaded worker processes, each running
    ``preload`` as it starts (again when restarted), ``folder/marks`` their marks folder."""
    (folder / "marks").mkdir()
    (folder / "preload.py").write_text(preload)
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None, preload=[str(folder / "preload.py")],
                                  env={"TPCORE_TEST_MARKS": str(folder / "marks")}) as c:
        yield c


def computed(value):
    """``value`` without its :data:`MEASURED` fields, at any depth."""
    if isinstance(value, dict):
        return {k: computed(v) for k, v in value.items() if k not in MEASURED}
    if isinstance(value, list):
        return [computed(v) for v in value]
    return value


def assert_same_sweeps(a: Path, b: Path, result_a: dict, result_b: dict) -> None:
    """Two sweeps agree in their results and in every run directory's metrics and model, bit
    for bit, measured fields aside; their folders list the same entries."""
    assert computed(result_a) == computed(result_b)
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    for row in result_a["runs"]:
        run_a, run_b = a / row["run"], b / row["run"]
        assert computed(json.loads((run_a / "metrics.json").read_text())) == \
            computed(json.loads((run_b / "metrics.json").read_text()))
        assert (run_a / "model.json").read_text() == (run_b / "model.json").read_text()
        with np.load(run_a / "model.npz") as x, np.load(run_b / "model.npz") as y:
            assert x.files == y.files and all(np.array_equal(x[k], y[k]) for k in x.files)


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The sweep of :data:`CONFIGS` in this process: its folder and result."""
    out = tmp_path_factory.mktemp("local")
    return out, sweep(CONFIGS, out, jobs=1)


@pytest.mark.host_only("runs worker processes of host NumPy")
def test_a_sweep_on_a_cluster_is_the_local_sweep(tmp_path, local, monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # where the workers start
    with cluster(tmp_path) as c:
        monkeypatch.chdir(tmp_path)
        result = sweep(CONFIGS, Path("out"), scheduler=c.scheduler_address)
    assert_same_sweeps(tmp_path / "out", local[0], result, local[1])
    assert not any((tmp_path / "elsewhere").iterdir())
    starts = Counter(p.name.split()[1] for p in (tmp_path / "marks").glob("start *"))
    assert starts == Counter(NAMES)  # every run trained on a worker, once


@pytest.mark.host_only("runs worker processes of host NumPy")
def test_killed_workers_lose_no_run_and_train_none_twice(tmp_path, local):
    with cluster(tmp_path) as c:
        for when in ("die-writing", "die-reporting"):
            (tmp_path / "marks" / when).touch()
        result = sweep(CONFIGS, tmp_path / "out", scheduler=c)
    marks = tmp_path / "marks"
    [rewritten] = [p.name.split()[1] for p in marks.glob("die-writing *")]
    [reported] = [p.name.split()[1] for p in marks.glob("die-reporting *")]
    starts = Counter(p.name.split()[1] for p in marks.glob("start *"))
    # the run whose worker died while writing it is trained again; the one whose worker died
    # after it finished is read back, not trained again
    assert starts == Counter(NAMES) + Counter([rewritten]) and reported in NAMES
    # no run lost, nothing half-written left beside the runs
    assert_same_sweeps(tmp_path / "out", local[0], result, local[1])
    assert all((tmp_path / "out" / name / "run.json").is_file() for name in NAMES)


@pytest.mark.host_only("runs worker processes of host NumPy")
def test_a_halving_sweep_on_a_cluster_is_the_local_one(tmp_path):
    configs = [dataclasses.replace(c, epochs=4) for c in CONFIGS]  # rungs at 2 and 4 epochs
    here = sweep(configs, tmp_path / "local", halving=2, rungs=2)
    with cluster(tmp_path) as c:
        there = sweep(configs, tmp_path / "out", scheduler=c, halving=2, rungs=2)
    assert [r["epochs"] for r in there["halving"]["rungs"]] == [2]
    assert len(there["runs"]) == 2
    assert_same_sweeps(tmp_path / "out", tmp_path / "local", there, here)
    starts = Counter(p.name.split()[1] for p in (tmp_path / "marks").glob("start *"))
    assert starts == Counter(NAMES) + Counter(r["run"] for r in there["runs"])


def sweep_argv(out: Path, scheduler: str) -> list[str]:
    """``tpcore sweep`` of one tiny run on ``scheduler`` into ``out``."""
    return ["sweep", "induction", "--layers", "1", "--heads", "1", "--mlps", "1", "--seeds",
            "0", "--epochs", "1", "--quiet", "--out", str(out), "--scheduler", scheduler]


def one_line_error(capsys, argv: list[str]) -> str:
    """Run ``tpcore ARGV``; assert exit 2 and one ``tpcore: error:`` line; return it."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("tpcore: error: "), err
    return err


def test_a_scheduler_that_does_not_answer_is_one_line(tmp_path, capsys):
    start = time.perf_counter()
    line = one_line_error(capsys, sweep_argv(tmp_path / "out", "tcp://127.0.0.1:1"))
    assert time.perf_counter() - start < 10
    assert "no Dask scheduler answers at 'tcp://127.0.0.1:1' within 5 s" in line
    assert not (tmp_path / "out").exists()


def test_a_worker_without_tpcore_is_one_line(tmp_path, capsys):
    with cluster(tmp_path, HIDE_TPCORE, workers=1) as c:
        [worker] = c.scheduler_info["workers"]
        with pytest.raises(TpcoreError, match=f"Dask worker {worker} cannot import tpcore "
                                              r"\(No module named 'tpcore'\)"):
            sweep(CONFIGS, tmp_path / "out", scheduler=c)
        line = one_line_error(capsys, sweep_argv(tmp_path / "out", c.scheduler_address))
    assert f"Dask worker {worker} cannot import tpcore (No module named 'tpcore')" in line
    assert not (tmp_path / "out").exists()


def test_without_the_dask_extra_the_scheduler_names_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(TpcoreError, match=r"distributed is needed for --scheduler: "
                                          r"pip install 'tpcore\[dask\]'"):
        sweep(CONFIGS, tmp_path / "out", scheduler="tcp://127.0.0.1:8786")
    assert not (tmp_path / "out").exists()

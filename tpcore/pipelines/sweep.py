"""Grid sweeps of Transformer Programs: local processes or a Dask cluster, resumable.

A sweep is a list of :class:`~tpcore.pipelines.learn.LearnConfig`; each run writes its own
directory ``<out>/<run name>`` through :func:`~tpcore.pipelines.learn.learn`, as a unit
with its configuration recorded (:mod:`tpcore.rundir`), so rerunning a sweep reuses the finished
runs of the same configuration. A run directory holding another configuration (say, another
``epochs``) is refused before anything is trained, unless ``overwrite`` retrains it.

The paper's grid: layers {2, 3} x heads {4, 8} x MLPs {2, 4} x 5 seeds, heads and MLPs split
evenly between categorical and numerical (its Table 3: all categorical). Selection: best
validation token accuracy.

*Successive halving* (``sweep(..., halving=ETA, rungs=R)``, :func:`halve`) spends less: rung 0
trains every configuration for the first ``1/ETA^(R-1)`` of its epochs (rounded to a multiple of
``eval_every``, where an evaluation falls), ranks them by the validation token accuracy of the
discrete model selected so far (ties: lower validation loss, then configuration order), and
continues the best ``1/ETA`` (rounded up) to the next rung, ``ETA`` times as long, and so on; the
last rung (or the first that leaves a single run) trains the survivors to the end and writes
ordinary run directories. Schedules are those of the whole run, and a continued run resumes
from its paused state (:func:`tpcore.pipelines.learn.learn` ``pause_after``), so a survivor
ends exactly as it would have without the pauses. The runs a rung cuts keep their paused
state, and ``sweep.json`` records how far each got and its score per rung; a rerun retrains
nothing that a rung already did.

A sweep can so be run in chunks: stopped, then the same command again. The wall time it
reports, per rung and in all, is every chunk's together (:mod:`tpcore.pipelines.wall_clock`).
Where a run's folder is gone but its record is packed into a ``runs.json.gz`` above it
(``tpcore pack``: committed results keep the records, not the folders), the record stands for
the finished run, so a sweep widened later (more seeds) trains only the new runs; the wall
time then counts the runs trained since the folders went.

On a Dask cluster (:func:`dask_client`) the sweep first makes sure that the scheduler answers and
that its workers import tpcore, before it writes anything. A run whose worker dies is run again
on another: a run directory is written whole or not at all, and a run that finished before its
worker died is read back, not trained again.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import math
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tpcore.cpu import THREADS_VARIABLE
from tpcore.errors import TpcoreError, missing_package
from tpcore.io import json_value, read_text, write_json, write_text
from tpcore.pipelines import learn
from tpcore.pipelines.learn import LearnConfig, paused_dir, run_dir
from tpcore.pipelines.records import packed_record
from tpcore.pipelines.wall_clock import WallClock
from tpcore.rundir import RunDir, check_config, check_out_dir

PAPER_GRID = {"layers": (2, 3), "heads": (4, 8), "mlps": (2, 4), "seeds": (0, 1, 2, 3, 4)}
CONNECT_SECONDS = 5
"""How long a sweep waits for a Dask scheduler to answer."""
WORKER_IMPORT = "import tpcore.pipelines.sweep"
"""What every Dask worker runs before a run is sent: the import of the runs' entry points."""


def grid(base: LearnConfig, layers: Iterable[int], heads: Iterable[int], mlps: Iterable[int],
         seeds: Iterable[int], categorical_only: bool = False) -> list[LearnConfig]:
    """Every combination; ``heads``/``mlps`` are totals per layer split evenly (categorical gets
    the larger half of an odd count), or, ``categorical_only``, all categorical (no numerical
    heads or MLPs: the paper's Table 3)."""
    out = []
    for n_layers in layers:
        for h in heads:
            for m in mlps:
                num_h, num_m = (0, 0) if categorical_only else (h // 2, m // 2)
                for seed in seeds:
                    out.append(dataclasses.replace(
                        base, n_layers=n_layers, n_cat_heads=h - num_h, n_num_heads=num_h,
                        n_cat_mlps=m - num_m, n_num_mlps=num_m, seed=seed))
    return out


def run_name(cfg: LearnConfig) -> str:
    """Directory name of a run: ``L3_H4+4_M2+2_s0``."""
    return (f"L{cfg.n_layers}_H{cfg.n_cat_heads}+{cfg.n_num_heads}_"
            f"M{cfg.n_cat_mlps}+{cfg.n_num_mlps}_s{cfg.seed}")


def run_names(configs: list[LearnConfig]) -> list[str]:
    """:func:`run_name` of each configuration; two of one name raise a :class:`TpcoreError`."""
    names = [run_name(c) for c in configs]
    if len(set(names)) != len(names):
        raise TpcoreError("sweep has duplicate configurations")
    return names


def run_one(cfg_dict: dict[str, Any], out: str, overwrite: bool = False) -> dict[str, Any]:
    """Worker entry point: train one configuration into ``out`` (a finished run of it is
    reused) and return a one-line summary."""
    learn.learn(LearnConfig(**cfg_dict), Path(out), quiet=True, overwrite=overwrite)
    return summarise(Path(out))


def run_rung(cfg_dict: dict[str, Any], out: str, overwrite: bool, epochs: int
             ) -> dict[str, Any]:
    """Worker entry point of a halving rung: train one configuration for its first ``epochs``
    (resuming its paused state; a run that got that far, or finished, is read back) and return
    ``run``, ``epochs`` reached, ``steps_per_epoch``, ``history`` and ``train_seconds``."""
    m = learn.learn(LearnConfig(**cfg_dict), Path(out), quiet=True, overwrite=overwrite,
                    pause_after=epochs)
    return rung_row(m, Path(out).name)


def rung_row(m: dict[str, Any], run: str) -> dict[str, Any]:
    """What a halving rung keeps of the run ``run`` whose record (paused or finished) is
    ``m``."""
    return {"run": run, "epochs": m["steps"] // m["steps_per_epoch"],
            "steps_per_epoch": m["steps_per_epoch"], "history": m["history"],
            "train_seconds": m["train_seconds"]}


def summarise(path: Path) -> dict[str, Any]:
    """The row a sweep table shows for a finished run directory."""
    return summary(json.loads(read_text(path / "metrics.json", "run metrics")), path.name)


def summary(m: dict[str, Any], run: str) -> dict[str, Any]:
    """The row a sweep table shows for the run named ``run`` whose record is ``m``."""
    c = m["config"]
    return {"run": run, "task": m["task"], "layers": c["n_layers"],
            "heads": c["n_cat_heads"] + c["n_num_heads"],
            "mlps": c["n_cat_mlps"] + c["n_num_mlps"], "seed": c["seed"],
            "epochs": c["epochs"], "val_acc": m["val"]["acc"], "val_loss": m["val"]["loss"],
            "test_acc": m["test"]["acc"],
            "test_seq_acc": m["test"]["seq_acc"], "train_seconds": m["train_seconds"],
            "program_lines": m.get("program", {}).get("lines"),
            "fidelity": m.get("program", {}).get("fidelity")}


def execute(configs: list[LearnConfig], out: Path, jobs: int = 1, scheduler: Any = None,
            on_done: Callable[[dict[str, Any]], None] | None = None, overwrite: bool = False
            ) -> list[dict[str, Any]]:
    """Run ``configs`` into ``out/<run name>``: ``jobs`` local processes, or on the Dask
    ``scheduler`` (:func:`dask_client`). Finished runs of the same configuration are read back,
    not repeated: a run folder, or where the folder is absent, the run's packed record in a
    ``runs.json.gz`` above it (:func:`packed_run`); every run directory and record is checked
    before the first run starts (one of another configuration is refused unless
    ``overwrite``). Returns one summary per run, in ``configs`` order."""
    names = run_names(configs)
    results: dict[str, dict[str, Any]] = {}

    def done(row: dict[str, Any]) -> None:
        results[row["run"]] = row
        if on_done:
            on_done(row)

    with dask_client(scheduler) as client:
        out = sweep_dir(out, client)
        todo = []
        for cfg, name in zip(configs, names):
            if run_dir(cfg, out / name, overwrite).finished:
                done(summarise(out / name))
            elif (packed := packed_run(cfg, out / name, overwrite)) is not None:
                done(summary(packed, name))
            else:
                todo.append((cfg.settings(), str(out / name), overwrite))
        run_all(run_one, todo, jobs, client, done)
    return [results[n] for n in names]


def packed_run(cfg: LearnConfig, path: Path, overwrite: bool = False
               ) -> dict[str, Any] | None:
    """The packed record of a finished run of ``cfg`` bound for ``path`` where no folder is
    there (:func:`tpcore.pipelines.records.packed_record`: a results folder keeps its runs'
    records, not their folders, so a sweep run again on a fresh checkout goes on from the
    records); None where there is none, or with ``overwrite`` one of other settings (trained
    again). One of other settings is otherwise refused, naming the settings that differ."""
    if path.exists():
        return None
    found = packed_record(path)
    if found is None:
        return None
    metrics, where = found  # read_records checked it is a learn run's record
    if metrics["config"] == json_value(cfg.settings()):
        return metrics
    if not overwrite:
        check_config(metrics["config"], cfg.settings(), where)
    return None


@contextmanager
def dask_client(scheduler: Any) -> Iterator[Any]:
    """The ``distributed.Client`` that runs go through: ``scheduler`` itself when it is one;
    else a client of ``scheduler`` (an address such as ``tcp://host:8786``, or a cluster object
    such as a ``LocalCluster``), closed at the end, once the scheduler has answered within
    :data:`CONNECT_SECONDS` and every worker it has can import tpcore (:data:`WORKER_IMPORT`;
    workers that join later are not asked). None when ``scheduler`` is None. A scheduler that
    does not answer, or a worker that cannot import tpcore, raises a :class:`TpcoreError`
    naming it."""
    if scheduler is None:
        yield None
        return
    try:
        from distributed import Client
    except ImportError as exc:
        raise missing_package("distributed", "--scheduler") from exc
    if isinstance(scheduler, Client):
        yield scheduler
        return
    try:
        client = Client(scheduler, timeout=CONNECT_SECONDS)
    except Exception as exc:  # refused, unreachable, or something other than a Dask scheduler
        raise TpcoreError(f"no Dask scheduler answers at {scheduler!r} within "
                          f"{CONNECT_SECONDS} s ({exc})") from exc
    with client:
        imported = client.run(exec, WORKER_IMPORT, on_error="return")
        for worker, error in sorted(imported.items()):
            if error is not None:
                raise TpcoreError(f"Dask worker {worker} cannot import tpcore ({error}); "
                                  "install tpcore in the environment of every worker")
        yield client


def sweep_dir(out: Path, client: Any) -> Path:
    """The folder ``out`` of a sweep, checked (:func:`check_out_dir`); absolute when the runs go
    through a Dask ``client``, whose workers have working directories of their own."""
    out = check_out_dir(out)
    return out.absolute() if client is not None else out


def run_all(worker: Callable[..., dict[str, Any]], todo: list[tuple], jobs: int = 1,
            client: Any = None, done: Callable[[dict[str, Any]], None] = lambda row: None
            ) -> None:
    """Call ``worker(*args)`` for every ``args`` of ``todo`` (a function of this module, so
    that other processes can import it): through the Dask ``client`` when one is given (a run
    whose worker dies is run again on another, as Dask retries a task), else in ``jobs`` local
    processes (in this one when 1); ``done(row)`` takes each result as it comes. Local
    processes are started fresh (``spawn``), so each reads its thread settings as it loads
    NumPy, one thread unless ``TPCORE_THREADS`` says otherwise, and none inherits a copy of
    this process's thread pools (the GNU OpenMP runtime does not survive a fork). They end
    when this process ends, however it ends (:func:`exit_with_parent`)."""
    if client is not None and todo:
        from distributed import as_completed  # the dask extra, there when a client is

        for fut in as_completed([client.submit(worker, *a, pure=False) for a in todo]):
            done(fut.result())
    elif jobs > 1 and len(todo) > 1:
        for var in ("OPENBLAS_NUM_THREADS", THREADS_VARIABLE):
            os.environ.setdefault(var, "1")
        spawn = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(
                max_workers=jobs, mp_context=spawn, initializer=exit_with_parent,
                initargs=(os.getpid(),)) as pool:
            for fut in concurrent.futures.as_completed([pool.submit(worker, *a) for a in todo]):
                done(fut.result())
    else:
        for a in todo:
            done(worker(*a))


def exit_with_parent(parent: int, poll: float = 1.0) -> None:
    """Worker initialiser: a daemon thread ends this process within ``poll`` seconds of its
    parent ``parent`` ending. A sweep stopped by a signal (which its workers do not receive)
    then leaves no worker training on and writing runs that nobody is waiting for; their
    unfinished run folders are temporary ones, never mistaken for runs."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def rung_epochs(epochs: int, eval_every: int, eta: int, rungs: int) -> list[int]:
    """The epochs each rung of successive halving trains to: ``epochs / eta^(rungs-1-r)`` for
    rung ``r``, rounded to a multiple of ``eval_every`` (at least one), so that a rung ends where
    an evaluation falls; rungs that would not be shorter than the next are dropped; the last is
    ``epochs``."""
    if eta < 2 or rungs < 1 or eval_every < 1:
        raise TpcoreError(f"successive halving needs eta >= 2, rungs >= 1 and validation "
                          f"evaluations (eval_every >= 1); got eta={eta}, rungs={rungs}, "
                          f"eval_every={eval_every}")
    out: list[int] = []
    for r in range(rungs - 1):
        e = max(eval_every, round(epochs / eta ** (rungs - 1 - r) / eval_every) * eval_every)
        if e < epochs and (not out or e > out[-1]):
            out.append(e)
    return [*out, epochs]


def selected_at(history: list[dict[str, Any]], step: int) -> dict[str, Any] | None:
    """The evaluation a run's selection holds after ``step`` steps: the best validation
    accuracy among the evaluations up to there, the latest among equals (as
    :func:`tpcore.train.fit` selects); None before the first."""
    best = None
    for h in history:
        if h["step"] <= step and (best is None or h["acc"] >= best["acc"]):
            best = h
    return best


def rank(rows: list[dict[str, Any]], epochs: int) -> list[dict[str, Any]]:
    """The rung scores of ``rows`` (from :func:`run_rung`) after ``epochs``, best first: higher
    validation token accuracy, then lower validation loss, then the order given. Each score is
    ``run``, ``val_acc``, ``val_loss`` and ``at_epoch`` of the evaluation selected by then."""
    scores = []
    for row in rows:
        h = selected_at(row["history"], epochs * row["steps_per_epoch"])
        if h is None:
            raise TpcoreError(f"run {row['run']} has no validation evaluation by epoch {epochs}")
        scores.append({"run": row["run"], "val_acc": h["acc"], "val_loss": h["loss"],
                       "at_epoch": h["step"] // row["steps_per_epoch"]})
    order = sorted(range(len(scores)),
                   key=lambda i: (-scores[i]["val_acc"], scores[i]["val_loss"], i))
    return [scores[i] for i in order]


def halve(configs: list[LearnConfig], out: Path, eta: int = 3, rungs: int = 3, jobs: int = 1,
          scheduler: Any = None, overwrite: bool = False,
          on_rung: Callable[[dict[str, Any]], None] | None = None,
          clock: WallClock | None = None) -> tuple[list[LearnConfig], dict[str, Any]]:
    """The rungs of successive halving before the last (see the module docstring): returns the
    configurations that reach the last rung, in the order given, and the record of the rungs
    (``eta``, ``epochs`` per rung, the number of ``configs``, and per rung its ``epochs``, every
    run's score, the ``survivors`` and its ``wall_seconds``, those of earlier chunks included, as
    ``clock`` keeps them: by default the folder's own). Every run and paused directory is
    checked before the first run starts (one of another configuration is refused unless
    ``overwrite``); ``on_rung(rung)`` takes each rung's record as it ends. ``jobs`` local
    processes, or the Dask ``scheduler`` (:func:`dask_client`), run the runs of a rung."""
    epochs = {(c.epochs, c.eval_every) for c in configs}
    if len(epochs) != 1:
        raise TpcoreError(f"successive halving needs one epochs and eval_every for every run; "
                          f"got {sorted(epochs)}")
    (total, eval_every), = epochs
    schedule = rung_epochs(total, eval_every, eta, rungs)
    names = run_names(configs)
    with dask_client(scheduler) as client:
        out = sweep_dir(out, client)
        for cfg, name in zip(configs, names):
            run_dir(cfg, out / name, overwrite)
            RunDir(paused_dir(out / name), cfg.settings(), overwrite)
        clock = clock or WallClock(out, fresh=overwrite)
        alive = list(configs)
        record: dict[str, Any] = {"eta": eta, "epochs": schedule, "configs": len(configs),
                                  "rungs": []}
        for i, e in enumerate(schedule[:-1]):
            got: list[dict[str, Any]] = []
            phase = f"rung {i}: {e} epochs"
            todo = []
            for c in alive:
                packed = packed_run(c, out / run_name(c), overwrite)
                if packed is None:
                    todo.append((c.settings(), str(out / run_name(c)), overwrite, e))
                else:  # finished: its history holds every rung's score
                    got.append(rung_row(packed, run_name(c)))
            run_all(run_rung, todo, jobs, client, _timed(got.append, clock, phase))
            rows = {row["run"]: row for row in got}
            scores = rank([rows[run_name(c)] for c in alive], e)
            kept = {s["run"] for s in scores[:math.ceil(len(alive) / eta)]}
            alive = [c for c in alive if run_name(c) in kept]
            rung = {"epochs": e, "runs": scores, "survivors": [run_name(c) for c in alive],
                    "wall_seconds": clock.tick(phase)}
            record["rungs"].append(rung)
            if on_rung:
                on_rung(rung)
            if len(alive) == 1:  # nothing left to rank: the survivor finishes
                break
    return alive, record


def _timed(done: Callable[[dict[str, Any]], None], clock: WallClock, phase: str
           ) -> Callable[[dict[str, Any]], None]:
    """``done``, after which ``clock`` ticks for ``phase``."""
    def timed(row: dict[str, Any]) -> None:
        done(row)
        clock.tick(phase)
    return timed


def halving_cost(record: dict[str, Any]) -> dict[str, Any]:
    """Epochs that the rungs of :func:`halve`'s ``record`` train (each run only the epochs of a
    rung beyond the one before), the survivors' to the end included, beside every
    configuration trained to the end."""
    rungs = record["rungs"]
    ends = [r["epochs"] for r in rungs] + [record["epochs"][-1]]
    counts = [len(r["runs"]) for r in rungs] + [len(rungs[-1]["survivors"]) if rungs
                                                 else record["configs"]]
    trained = sum(n * (e - prev) for n, e, prev in zip(counts, ends, [0, *ends]))
    full = record["configs"] * ends[-1]
    return {"epochs_trained": trained, "epochs_full_grid": full, "fraction": trained / full}


def select(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the best validation accuracy (first on ties)."""
    return max(rows, key=lambda r: r["val_acc"])


def rungs_table(record: dict[str, Any]) -> str:
    """Markdown table of the rungs of a halving sweep."""
    lines = ["| rung | epochs | runs | kept | best val acc | seconds |",
             "|---|---|---|---|---|---|"]
    for i, r in enumerate(record["rungs"]):
        lines.append(f"| {i} | {r['epochs']} | {len(r['runs'])} | {len(r['survivors'])} | "
                     f"{100 * r['runs'][0]['val_acc']:.2f} | {r['wall_seconds']:.0f} |")
    return "\n".join(lines)


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown table of sweep rows, the selected run marked with ``*``."""
    best = select(rows)["run"] if rows else None
    lines = ["| run | layers | heads | MLPs | seed | val acc | test acc | test seq acc | "
             "seconds |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mark = " *" if r["run"] == best else ""
        lines.append(f"| {r['run']}{mark} | {r['layers']} | {r['heads']} | {r['mlps']} | "
                     f"{r['seed']} | {100 * r['val_acc']:.2f} | {100 * r['test_acc']:.2f} | "
                     f"{100 * r['test_seq_acc']:.2f} | {r['train_seconds']:.0f} |")
    return "\n".join(lines)


def sweep(configs: list[LearnConfig], out: Path, jobs: int = 1, scheduler: Any = None,
          on_done: Callable | None = None, overwrite: bool = False, halving: int | None = None,
          rungs: int = 3, on_rung: Callable | None = None) -> dict[str, Any]:
    """Run the sweep (:func:`execute`) and write ``sweep.json`` and ``sweep.md`` into ``out``;
    returns the JSON: ``runs`` (the finished runs), the ``selected`` one, ``wall_seconds`` (of
    every sweep into ``out`` so far, stopped ones included: a rerun that reuses finished runs
    adds only its own; ``overwrite`` starts the count again).
    ``halving``: run ``rungs`` rungs of successive halving with that ``eta`` first
    (:func:`halve`); then only the survivors finish, and ``halving`` in the JSON holds the
    rungs and the cost (:func:`halving_cost`). On a Dask ``scheduler`` (:func:`dask_client`)
    one client serves every rung."""
    with dask_client(scheduler) as client:
        out = check_out_dir(out)
        clock = WallClock(out, fresh=overwrite)
        record = None
        if halving is not None:
            configs, record = halve(configs, out, halving, rungs, jobs, client, overwrite,
                                    on_rung, clock)
        rows = execute(configs, out, jobs, client,
                       _timed(on_done or (lambda row: None), clock, "final"), overwrite)
    result: dict[str, Any] = {"task": configs[0].task, "runs": rows, "selected": select(rows)}
    text = table(rows) + "\n"
    if record is not None:
        result["halving"] = {**record, **halving_cost(record)}
        text = rungs_table(record) + "\n\n" + text
    clock.tick("final")
    result["wall_seconds"] = clock.total
    write_json(out / "sweep.json", result)
    write_text(out / "sweep.md", text)
    return result

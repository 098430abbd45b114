"""Grid sweeps of Transformer Programs: local processes or a Dask cluster, resumable.

A sweep is a list of :class:`~tpcore.pipelines.learn.LearnConfig`; each run writes its own
directory ``<out>/<run name>`` through :func:`~tpcore.pipelines.learn.learn`, as a unit
with its configuration recorded (:mod:`tpcore.rundir`), so rerunning a sweep reuses the finished
runs of the same configuration. A run directory holding another configuration (say, another
``epochs``) is refused before anything is trained, unless ``overwrite`` retrains it.

The paper's grid: layers {2, 3} x heads {4, 8} x MLPs {2, 4} x 5 seeds, heads and MLPs split
evenly between categorical and numerical. Selection: best validation token accuracy.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tpcore.errors import TpcoreError
from tpcore.io import write_json, write_text
from tpcore.pipelines import learn
from tpcore.pipelines.learn import LearnConfig, run_dir
from tpcore.rundir import check_out_dir

PAPER_GRID = {"layers": (2, 3), "heads": (4, 8), "mlps": (2, 4), "seeds": (0, 1, 2, 3, 4)}


def grid(base: LearnConfig, layers: Iterable[int], heads: Iterable[int], mlps: Iterable[int],
         seeds: Iterable[int]) -> list[LearnConfig]:
    """Every combination; ``heads``/``mlps`` are totals per layer split evenly (categorical gets
    the larger half of an odd count)."""
    out = []
    for n_layers in layers:
        for h in heads:
            for m in mlps:
                for seed in seeds:
                    out.append(dataclasses.replace(
                        base, n_layers=n_layers, n_cat_heads=h - h // 2, n_num_heads=h // 2,
                        n_cat_mlps=m - m // 2, n_num_mlps=m // 2, seed=seed))
    return out


def run_name(cfg: LearnConfig) -> str:
    """Directory name of a run: ``L3_H4+4_M2+2_s0``."""
    return (f"L{cfg.n_layers}_H{cfg.n_cat_heads}+{cfg.n_num_heads}_"
            f"M{cfg.n_cat_mlps}+{cfg.n_num_mlps}_s{cfg.seed}")


def run_one(cfg_dict: dict[str, Any], out: str, overwrite: bool = False) -> dict[str, Any]:
    """Worker entry point: train one configuration into ``out`` (a finished run of it is
    reused) and return a one-line summary."""
    learn.learn(LearnConfig(**cfg_dict), Path(out), quiet=True, overwrite=overwrite)
    return summarise(Path(out))


def summarise(path: Path) -> dict[str, Any]:
    """The row a sweep table shows for a finished run directory."""
    m = json.loads((path / "metrics.json").read_text())
    c = m["config"]
    return {"run": path.name, "task": m["task"], "layers": c["n_layers"],
            "heads": c["n_cat_heads"] + c["n_num_heads"],
            "mlps": c["n_cat_mlps"] + c["n_num_mlps"], "seed": c["seed"],
            "epochs": c["epochs"], "val_acc": m["val"]["acc"], "test_acc": m["test"]["acc"],
            "test_seq_acc": m["test"]["seq_acc"], "train_seconds": m["train_seconds"],
            "program_lines": m.get("program", {}).get("lines"),
            "fidelity": m.get("program", {}).get("fidelity")}


def execute(configs: list[LearnConfig], out: Path, jobs: int = 1, scheduler: str | None = None,
            on_done: Callable[[dict[str, Any]], None] | None = None, overwrite: bool = False
            ) -> list[dict[str, Any]]:
    """Run ``configs`` into ``out/<run name>``: ``jobs`` local processes, or the Dask scheduler at
    ``scheduler`` (an address, or a ``distributed.Client``/``LocalCluster`` object). Finished
    runs of the same configuration are read back, not repeated; every run directory is checked
    before the first run starts (one of another configuration is refused unless ``overwrite``).
    Returns one summary per run, in ``configs`` order."""
    names = [run_name(c) for c in configs]
    if len(set(names)) != len(names):
        raise TpcoreError("sweep has duplicate configurations")
    out = check_out_dir(out)
    results: dict[str, dict[str, Any]] = {}

    def done(row: dict[str, Any]) -> None:
        results[row["run"]] = row
        if on_done:
            on_done(row)

    todo = []
    for cfg, name in zip(configs, names):
        if run_dir(cfg, out / name, overwrite).finished:
            done(summarise(out / name))
        else:
            todo.append((cfg.settings(), str(out / name), overwrite))
    if scheduler is not None and todo:
        _execute_dask(todo, scheduler, done)
    elif jobs > 1 and len(todo) > 1:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
            for fut in concurrent.futures.as_completed([pool.submit(run_one, *a) for a in todo]):
                done(fut.result())
    else:
        for a in todo:
            done(run_one(*a))
    return [results[n] for n in names]


def _execute_dask(todo: list[tuple], scheduler: Any, done: Callable) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError as exc:
        raise TpcoreError("--scheduler needs dask.distributed: pip install 'dask[distributed]'"
                          ) from exc
    own = not isinstance(scheduler, Client)
    client = Client(scheduler) if own else scheduler
    try:
        futures = [client.submit(run_one, *a, pure=False) for a in todo]
        for fut in as_completed(futures):
            done(fut.result())
    finally:
        if own:
            client.close()


def select(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the best validation accuracy (first on ties)."""
    return max(rows, key=lambda r: r["val_acc"])


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
          on_done: Callable | None = None, overwrite: bool = False) -> dict[str, Any]:
    """Run the sweep (:func:`execute`) and write ``sweep.json`` and ``sweep.md`` into ``out``;
    returns the JSON."""
    rows = execute(configs, out, jobs, scheduler, on_done, overwrite)
    result = {"task": configs[0].task, "runs": rows, "selected": select(rows)}
    write_json(out / "sweep.json", result)
    write_text(out / "sweep.md", table(rows) + "\n")
    return result

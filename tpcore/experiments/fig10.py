"""``tpcore reproduce fig10``: Fig. 10 of "Learning Transformer Programs", Transformer Programs
against standard transformers on the RASP tasks as the vocabulary size |V| and the maximum length
N grow: the settings (|V|, N) = (8, 8), (8, 16) and (16, 16) (:data:`SETTINGS`).

For each task and setting, a Transformer Program and a standard transformer
(:class:`tpcore.models.transformer.Transformer`) learn the same generated data: 20,000 distinct
inputs split 16,000 / 2,000 / 2,000, made once by :func:`tpcore.pipelines.learn.make_data` from
the program run's task settings (``vocab_size``, ``max_len``, ``n_samples``, ``data_seed``,
``min_len``), which each transformer run records, so both models see identical splits. Each
model is the one of its sweep with the best validation token accuracy; the figure compares
their test token accuracy. The programs train as in Table 1 (Adam lr 0.05, batch 512,
temperature 3.0 -> 0.01, one Gumbel sample per step; a sweep per cell,
:func:`tpcore.experiments.table1.sweep_row`); the transformers as Appendix B.2 has them (hidden
size 256, Adam lr 3e-4, batch 50, the epoch of the best validation token accuracy kept;
:func:`tpcore.pipelines.transformer.train_transformer`), with an MLP of width ``4 d_model``
(the paper gives the hidden size only) and one seed per architecture (the paper gives no seed
count for them).

Dyck's vocabulary is its brackets, so |V| does not apply to it, and its tasks are already at
N = 16: (8, 16) and (16, 16) are one cell of Dyck, trained once, and (8, 8) is not run (Dyck-1
has only 2^7 = 128 distinct inputs of that length; :func:`cell_size`).

Budgets (:data:`BUDGETS`; each states its reductions in ``fig10.md``):

- ``smoke``: sort and Dyck-1, tiny models, 2 epochs on 2,000 samples (checks the pipeline);
- ``small``: every task and setting, one seed, no grid: the program at Table 1's selected
  architecture of its task (:data:`tpcore.experiments.table1.PAPER_ARCH`) and a transformer of 2
  layers and 4 heads, 20 epochs each;
- ``paper``: the paper's grids, programs over layers {2, 3} x heads {4, 8} x MLPs {2, 4} x 5
  seeds for 250 epochs, transformers over layers {2, 3} x heads {4, 8} for 100 epochs.

Runs go to ``out/runs/<task>/<cell>/`` (program sweeps) and ``out/transformers/<task>/<cell>/
<run>.json`` (one lean record per transformer run: configuration, metrics, history; no
weights), each reused when its configuration matches (:func:`tpcore.rundir.cached`), so a
repeated command trains only what is missing (a program run also from its record packed into
``out/runs.json.gz`` by ``tpcore pack``, so that ``--seeds 0 1 2`` after a committed seed 0
trains seeds 1 and 2; ``--transformer-seeds 0`` keeps the costly transformers at one seed
meanwhile); rows of other tasks and settings at the same
budget are kept in ``out/fig10.json`` and ``out/fig10.md``, and with matplotlib the figure is
drawn as ``out/fig10.png`` (:func:`figures`).
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from tpcore.analysis.plots import draw_or_note, pyplot, save_png
from tpcore.errors import TpcoreError
from tpcore.experiments.budget import Budget, preset
from tpcore.experiments.options import Option, Reproduction
from tpcore.experiments.table1 import (
    PAPER_ARCH,
    SEEDS,
    SWEEP_OPTIONS,
    chosen_tasks,
    command_line,
    sweep_row,
)
from tpcore.experiments.table3 import protocol
from tpcore.io import read_text, write_json, write_text
from tpcore.pipelines.learn import LearnConfig, make_data
from tpcore.pipelines.sweep import PAPER_GRID, dask_client, grid, run_all, select, sweep_dir
from tpcore.pipelines.transformer import train_transformer
from tpcore.rundir import cached, check_out_dir, saved
from tpcore.tasks.rasp import DYCK
from tpcore.tasks.registry import DEFAULTS

__all__ = ["BUDGETS", "CLI", "DATA_FIELDS", "SETTINGS", "TASKS", "budget", "cell_name",
           "cell_size", "figures", "markdown", "program_configs", "report", "run",
           "train_one", "transformer_configs"]

TASKS = ("reverse", "hist", "double_hist", "sort", "most_freq", "dyck1", "dyck2")
SETTINGS = ((8, 8), (8, 16), (16, 16))
"""Fig. 10's settings, (|V|, N): the paper's small scale, longer inputs, then a larger
vocabulary too (tpcore counts |V| with the special tokens, as the tasks' defaults do)."""
DATA_FIELDS = ("task", "vocab_size", "max_len", "min_len", "n_samples", "data_seed")
"""The :class:`LearnConfig` fields :func:`make_data` reads: a transformer run records these of
its program run, and makes its splits from them."""
_SMOKE_T = dict(epochs=2, n_seeds=1, grid=((2,), (2,)), d_model=32, batch_size=50, lr=3e-4)
_PAPER_T = dict(epochs=100, n_seeds=1, grid=((2, 3), (4, 8)), d_model=256, batch_size=50,
                lr=3e-4)
BUDGETS = {
    "smoke": Budget("smoke", dict(
        tasks=("sort", "dyck1"), epochs=2, n_seeds=1, grid=((2,), (2,), (2,)),
        learn=dict(n_samples=2000, batch_size=256, eval_every=1), transformer=_SMOKE_T,
        reductions="a pipeline check: sort and Dyck-1 only, 2,000 inputs, programs of 2 layers, "
                   "2 heads and 2 MLPs and transformers of 2 layers, 2 heads and d 32, "
                   "2 epochs each")),
    "small": Budget("small", dict(
        tasks=TASKS, epochs=20, n_seeds=1, grid=None, learn={},
        transformer={**_PAPER_T, "epochs": 20, "grid": ((2,), (4,))},
        reductions="no grid search, and the seeds each row's protocol names (one unless "
                   "--seeds gives more): each program at Table 1's selected "
                   "architecture of its task, each transformer of 2 layers, 4 heads and d 256; "
                   "20 epochs each (the paper: programs over layers {2, 3} x heads {4, 8} x "
                   "MLPs {2, 4} x 5 seeds for 250 epochs, transformers over layers {2, 3} x "
                   "heads {4, 8} for up to 100 epochs)")),
    "paper": Budget("paper", dict(
        tasks=TASKS, epochs=250, n_seeds=len(PAPER_GRID["seeds"]),
        grid=(PAPER_GRID["layers"], PAPER_GRID["heads"], PAPER_GRID["mlps"]), learn={},
        transformer=_PAPER_T,
        reductions="none: the paper's grids (one seed per transformer architecture, as the "
                   "paper gives no seed count for them)")),
}
"""Per budget: its default ``tasks``; the programs' ``epochs``, seeds per architecture and
architectures (layers, heads and MLPs per layer; None: Table 1's per task) and other
:class:`LearnConfig` settings; the transformers' (``epochs``, seeds, ``grid`` of layers and
heads, ``d_model``, ``batch_size``, ``lr``); and its ``reductions`` against the paper, in
words."""


def budget(name: str) -> Budget:
    """The preset ``name`` of :data:`BUDGETS`."""
    return preset(name, BUDGETS)


def cell_size(task: str, setting: tuple[int, int]) -> tuple[int, int] | None:
    """``(vocab_size, max_len)`` of ``task``'s data in ``setting`` (|V|, N), as
    :class:`LearnConfig` takes them: the setting itself, except for Dyck, whose vocabulary is
    its brackets (``vocab_size`` 0: the task's own) and which runs only at its own length or
    more (None below: Dyck-1 has 128 distinct inputs of length 8)."""
    vocab_size, max_len = setting
    if task in DYCK:
        return (0, max_len) if max_len >= DEFAULTS[task][1] else None
    return vocab_size, max_len


def cell_name(size: tuple[int, int]) -> str:
    """The folder of a cell's runs: ``V16_N16``, ``N16`` where the task's vocabulary is its
    own."""
    vocab_size, max_len = size
    return f"V{vocab_size}_N{max_len}" if vocab_size else f"N{max_len}"


def program_configs(task: str, size: tuple[int, int], budget: Budget, epochs: int | None = None,
                    seeds: list[int] | None = None, seed: int = 0) -> list[LearnConfig]:
    """The program runs ``budget`` spends on ``task`` at ``size`` (:func:`cell_size`): every
    architecture of its grid, or Table 1's of the task, for each of its seeds counted from
    ``seed``, or ``seeds``."""
    seeds = seeds or [seed + i for i in range(budget["n_seeds"])]
    base = LearnConfig(task=task, epochs=epochs or budget["epochs"], vocab_size=size[0],
                       max_len=size[1], **budget["learn"])
    layers, heads, mlps = (([n] for n in PAPER_ARCH[task]) if budget["grid"] is None
                           else budget["grid"])
    return grid(base, layers, heads, mlps, seeds)


def transformer_configs(program: LearnConfig, budget: Budget, epochs: int | None = None,
                        seeds: list[int] | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """The standard-transformer runs ``budget`` spends beside the program run ``program``: its
    data settings (:data:`DATA_FIELDS`) and, per layers x heads of the budget's grid and seed
    (counted from ``seed``, or ``seeds``), ``n_layers``, ``n_heads``, ``d_model``, ``d_mlp``
    (``4 d_model``), ``epochs``, ``batch_size``, ``lr``, ``seed``."""
    t = budget["transformer"]
    seeds = seeds or [seed + i for i in range(t["n_seeds"])]
    data = {k: getattr(program, k) for k in DATA_FIELDS}
    return [{"data": data, "n_layers": n_layers, "n_heads": n_heads, "d_model": t["d_model"],
             "d_mlp": 4 * t["d_model"], "epochs": epochs or t["epochs"],
             "batch_size": t["batch_size"], "lr": t["lr"], "seed": s}
            for n_layers in t["grid"][0] for n_heads in t["grid"][1] for s in seeds]


def _transformer_name(config: dict[str, Any]) -> str:
    return f"L{config['n_layers']}_H{config['n_heads']}_s{config['seed']}"


def _train(config: dict[str, Any], quiet: bool = True) -> dict[str, Any]:
    """Train the transformer run ``config`` on its data's splits (``quiet``: without a progress
    bar); its record: the model's ``config``, ``steps``, ``train_seconds``, ``history`` and the
    metrics of each split."""
    task = make_data(LearnConfig(**config["data"]))
    _, result = train_transformer(
        task.splits, epochs=config["epochs"], batch_size=config["batch_size"],
        lr=config["lr"], seed=config["seed"], d_model=config["d_model"],
        n_layers=config["n_layers"], n_heads=config["n_heads"], d_mlp=config["d_mlp"],
        vocab_size=len(task.vocab), n_classes=len(task.classes), max_len=task.max_len,
        causal=task.causal, pad_token=task.vocab.index(task.pad) if task.pad else None,
        quiet=quiet)
    return result


def _summary(name: str, rec: dict[str, Any]) -> dict[str, Any]:
    """The row a cell shows for the transformer run ``name`` of record ``rec``."""
    c = rec["record"]["config"]
    return {"run": name, "layers": c["n_layers"], "heads": c["n_heads"], "seed": c["seed"],
            "epochs": c["epochs"], "val_acc": rec["val"]["acc"], "test_acc": rec["test"]["acc"],
            "test_seq_acc": rec["test"]["seq_acc"], "train_seconds": rec["train_seconds"]}


def train_one(config: dict[str, Any], path: str, overwrite: bool = False,
              quiet: bool = True) -> dict[str, Any]:
    """Worker entry point: the transformer run ``config``, cached as the JSON ``path`` (a record
    of it there is read back, :func:`tpcore.rundir.cached`), with a progress bar on stderr
    unless ``quiet``; returns its row."""
    rec = cached(path, config, partial(_train, config, quiet=quiet), overwrite)
    return _summary(Path(path).stem, rec)


def transformer_cell(configs: list[dict[str, Any]], out: Path, jobs: int = 1,
                     scheduler: str | None = None, overwrite: bool = False) -> dict[str, Any]:
    """Run ``configs`` into ``out/<run>.json`` (records of the same configuration read back,
    every record checked before the first run trains; ``jobs`` local processes or a Dask
    ``scheduler``) and return the cell's half: the ``selected`` run (best validation token
    accuracy, the first on ties), its ``test_acc`` in percent, ``runs``, ``epochs``, ``seeds``,
    ``finished`` and ``wall_seconds`` (the runs' training seconds together)."""
    names = [_transformer_name(c) for c in configs]
    rows: dict[str, dict[str, Any]] = {}
    with dask_client(scheduler) as client:
        out = sweep_dir(out, client)
        todo = []
        for config, name in zip(configs, names):
            rec = saved(out / f"{name}.json", config, overwrite=overwrite)
            if rec is None:  # one run at a time in this process: its progress shows
                todo.append((config, str(out / f"{name}.json"), overwrite,
                             jobs > 1 or client is not None))
            else:
                rows[name] = _summary(name, rec)
        run_all(train_one, todo, jobs, client, lambda row: rows.__setitem__(row["run"], row))
    runs = [rows[n] for n in names]
    best = select(runs)
    return {"selected": best, "test_acc": 100 * best["test_acc"], "runs": len(configs),
            "epochs": configs[0]["epochs"], "seeds": sorted({c["seed"] for c in configs}),
            "finished": len(runs), "wall_seconds": sum(r["train_seconds"] for r in runs)}


def _setting(value: Any) -> tuple[int, int]:
    """``value`` as one of :data:`SETTINGS`, else a :class:`TpcoreError`."""
    for setting in SETTINGS:
        if tuple(value) == setting:
            return setting
    raise TpcoreError(f"unknown setting {','.join(map(str, value))} of Fig. 10; expected one "
                      f"of {', '.join(f'{v},{n}' for v, n in SETTINGS)} (|V|,N)")


CLI = Reproduction(
    "Transformer Programs paper, Fig. 10 (RASP tasks at larger |V| and N, against standard "
    "transformers)", "results/fig10", "small",
    "smoke: pipeline check; small: one program at Table 1's architecture per task and one "
    "2-layer, 4-head transformer, 1 seed, 20 epochs each; paper: both grids, programs 5 seeds "
    "and 250 epochs, transformers 100 epochs (seeds counted from --seed)",
    (Option("--epochs", "override the budget's epochs (of both models)", "count"), SEEDS,
     Option("--transformer-seeds", "the transformers' seeds, where they differ from the "
            "programs' (default: those of --seeds, else the budget's)", "index", nargs="+"),
     Option("--tasks", "subset of tasks (default: the budget's; smoke: sort dyck1)", nargs="+"),
     Option("--settings", "subset of the settings (default: 8,8 8,16 16,16)", "counts",
            nargs="+", metavar="V,N"),
     *SWEEP_OPTIONS))
"""``tpcore reproduce fig10``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int, tasks: tuple[str, ...] | None = None,
        settings: list[tuple[int, int]] | None = None, epochs: int | None = None,
        seeds: list[int] | None = None, jobs: int = 1, scheduler: str | None = None,
        overwrite: bool = False, halving: int | None = None, rungs: int = 3,
        transformer_seeds: list[int] | None = None) -> dict[str, Any]:
    """Train both models on every cell of the budget's tasks (or ``tasks``, names or aliases)
    and :data:`SETTINGS` (or ``settings``) into ``out``; write ``out/fig10.json`` and
    ``out/fig10.md`` after each cell, and the figure. ``epochs`` and ``seeds`` replace the
    budget's (of both models; ``transformer_seeds``, where given, the transformers' seeds:
    more seeds of the cheap programs beside one of the costly transformers); ``jobs`` local
    processes or a Dask ``scheduler`` run each cell's runs; finished runs of the same
    configuration are reused (one of another is refused before any training unless
    ``overwrite``); ``halving``, ``rungs``: successive halving of each program sweep
    (:func:`tpcore.pipelines.sweep.halve`). Rows of other cells already in
    ``fig10.json`` at the same budget are kept."""
    tasks = chosen_tasks(tasks, budget["tasks"], TASKS, "Fig. 10")
    chosen = {_setting(s) for s in settings} if settings else set(SETTINGS)
    out = check_out_dir(out)
    command = command_line("fig10", budget, tasks, budget["tasks"], epochs, seed, seeds,
                           halving, rungs, out)
    if chosen != set(SETTINGS):
        command += " --settings " + " ".join(f"{v},{n}" for v, n in SETTINGS if (v, n) in chosen)
    if transformer_seeds:
        command += " --transformer-seeds " + " ".join(map(str, transformer_seeds))
    plan = []
    for task in (t for t in TASKS if t in tasks):
        for setting in (s for s in SETTINGS if s in chosen):
            size = cell_size(task, setting)
            programs = [] if size is None else program_configs(task, size, budget, epochs,
                                                               seeds, seed)
            transformers = [] if size is None else transformer_configs(
                programs[0], budget, epochs, transformer_seeds or seeds, seed)
            plan.append((task, setting, size, programs, transformers))
            for c in transformers:  # a record of other settings is refused before any work
                saved(_cell_dir(out, "transformers", task, size) / f"{_transformer_name(c)}.json",
                      c, overwrite=overwrite)
    result: dict[str, Any] = {}
    for task, setting, size, programs, transformers in plan:
        row: dict[str, Any] = {"task": task, "setting": list(setting)}
        if size is None:
            row["skipped"] = (f"Dyck's inputs are {DEFAULTS[task][1]} long at the paper's small "
                              f"scale; N = {setting[1]} is shorter")
        else:
            swept = sweep_row(task, programs, _cell_dir(out, "runs", task, size), 100.0, jobs,
                              scheduler, overwrite, halving, rungs)
            # Fig. 10 prints no numbers: the row's comparison with a paper's is dropped
            row |= {"size": list(size), "cell": cell_name(size),
                    "program": {k: v for k, v in swept.items()
                                if k not in ("task", "n", "paper", "success")},
                    "transformer": transformer_cell(
                        transformers, _cell_dir(out, "transformers", task, size), jobs,
                        scheduler, overwrite)}
        result = _save(out / "fig10.json", budget, command, row)
    draw_or_note(lambda: figures(result, out))
    return result


def _cell_dir(out: Path, kind: str, task: str, size: tuple[int, int]) -> Path:
    return out / kind / task / cell_name(size)


def _save(path: Path, budget: Budget, command: str, row: dict[str, Any]) -> dict[str, Any]:
    """Add ``row`` (replacing its cell's) to the results at ``path`` (read again first; results
    of another budget are started afresh), cells in :data:`TASKS` x :data:`SETTINGS` order,
    ``command`` last among the ``commands``; ``seconds`` counts each trained cell once (Dyck's
    two settings share one). Writes the JSON and, beside it, :func:`markdown`."""
    result = json.loads(read_text(path, "result")) if path.is_file() else {}
    if result.get("budget") != budget.name:
        result = {"budget": budget.name, "commands": [], "rows": [], "seconds": 0.0}
    result["reductions"] = budget["reductions"]
    rows = {(r["task"], tuple(r["setting"])): r for r in result["rows"]}
    rows[row["task"], tuple(row["setting"])] = row
    result["rows"] = [rows[t, s] for t in TASKS for s in SETTINGS if (t, s) in rows]
    result["commands"] = [c for c in result["commands"] if c != command] + [command]
    cells = {(r["task"], r["cell"]): r for r in result["rows"] if "cell" in r}
    result["seconds"] = sum(r["program"]["wall_seconds"] + r["transformer"]["wall_seconds"]
                            for r in cells.values())
    write_json(path, result)
    write_text(path.with_suffix(".md"), markdown(result))
    return result


def _size_text(row: dict[str, Any]) -> str:
    vocab_size, max_len = row["size"]
    return f"{vocab_size if vocab_size else 'brackets'}, {max_len}"


def _every_run(program: dict[str, Any]) -> str:
    """The test token accuracies of a cell's program runs, then their mean where there are
    several (``-`` for a row written before they were kept)."""
    accs = program.get("test_accs")
    if not accs:
        return "-"
    text = " / ".join(f"{a:.2f}" for a in accs)
    return f"{text} (mean {sum(accs) / len(accs):.2f})" if len(accs) > 1 else text


def markdown(result: dict[str, Any]) -> str:
    """``fig10.md``: the budget and its reductions, then per task and setting the size run,
    each model's protocol, selected architecture and test token accuracy, and the program's
    lead; the commands behind it."""
    lines = ["# Fig. 10: Transformer Programs and standard transformers at larger |V| and N",
             "", f"Budget `{result['budget']}`; reductions against the paper: "
             f"{result['reductions']}. Test token accuracy (%) of the model of each sweep with "
             "the best validation token accuracy; both models of a row learn the same splits. "
             "The paper draws Fig. 10 as a plot only, so no numbers of its stand beside these.",
             "", "| task | setting (V, N) | run at | program protocol | program (L, H, M, seed) | "
             "program test acc | every program run | transformer protocol | "
             "transformer (L, H, seed) | transformer test acc | program - transformer |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        setting = ", ".join(map(str, r["setting"]))
        if "skipped" in r:
            lines.append(f"| {r['task']} | {setting} | not run: {r['skipped']} |"
                         + " - |" * 8)
            continue
        p, t = r["program"], r["transformer"]
        ps, ts = p["selected"], t["selected"]
        lines.append(
            f"| {r['task']} | {setting} | {_size_text(r)} | {protocol(p)} | "
            f"{ps['layers']}, {ps['heads']}, {ps['mlps']}, {ps['seed']} | {p['test_acc']:.2f} | "
            f"{_every_run(p)} | {protocol(t)} | {ts['layers']}, {ts['heads']}, {ts['seed']} | "
            f"{t['test_acc']:.2f} | {p['test_acc'] - t['test_acc']:+.2f} |")
    lines += ["", "Dyck's vocabulary is its brackets, so |V| does not apply to it: its (8, 16) "
              "and (16, 16) rows are one cell, trained once, and it has no (8, 8) cell (its "
              "inputs are 16 long at the paper's small scale; Dyck-1 has only 128 distinct "
              "inputs of length 8). |V| counts the special tokens.", "",
              "Commands: " + "; ".join(f"`{c}`" for c in result["commands"]), ""]
    return "\n".join(lines)


def figures(result: dict[str, Any], out: Path) -> list[Path]:
    """``fig10.png``, drawn as the paper's Fig. 10: a panel per task, test token accuracy (%)
    of the Transformer Program beside the standard transformer's at each setting (``not run``
    where a task has no cell); a dot for each program run of the cell, the bar being the one
    selected on validation."""
    by = {(r["task"], tuple(r["setting"])): r for r in result["rows"] if "skipped" not in r}
    tasks = [t for t in TASKS if any(k[0] == t for k in by)]
    if not tasks:
        return []
    plt = pyplot()
    cols = min(4, len(tasks))
    rows = -(-len(tasks) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.8 * cols, 2.4 * rows + 0.6), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(tasks):]:
        ax.set_visible(False)
    labels = [f"|V|={v}\nN={n}" for v, n in SETTINGS]
    for ax, task in zip(axes.flat, tasks):
        for i, (kind, name) in enumerate((("program", "Transformer Program"),
                                          ("transformer", "standard Transformer"))):
            x = [j + (i - 0.5) * 0.38 for j, s in enumerate(SETTINGS) if (task, s) in by]
            y = [by[task, s][kind]["test_acc"] for s in SETTINGS if (task, s) in by]
            ax.bar(x, y, width=0.38, color=f"C{i}", label=name)
            if kind == "program":  # each run of the sweep, the bar being the selected one
                for xj, s in zip(x, (s for s in SETTINGS if (task, s) in by)):
                    accs = by[task, s][kind].get("test_accs") or []
                    ax.scatter([xj] * len(accs), accs, s=6, color="black", zorder=3,
                               label="each program run" if accs and xj == x[0] else None)
        for j, s in enumerate(SETTINGS):
            if (task, s) not in by:
                ax.text(j, 8, "not run", ha="center", fontsize=7, color="grey")
        ax.set_xticks(range(len(SETTINGS)), labels, fontsize=7)
        ax.set(xlim=(-0.6, len(SETTINGS) - 0.4), ylim=(0, 100))
        ax.set_title(task, fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].set_ylabel("test token accuracy (%)", fontsize=8)
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncols=2, fontsize=8)
    fig.suptitle(f"Fig. 10: RASP tasks at larger |V| and N (budget {result['budget']})",
                 fontsize=10)
    return [save_png(fig, out / "fig10.png")]


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce fig10`` prints: ``fig10.md``."""
    return markdown(result)

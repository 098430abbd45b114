"""``tpcore reproduce sorting``: "How tiny transformers sort" (Qi and Zhong). Train the three
one-layer, one-head, attention-only models, measure them on random and hard lists, search for
failures, measure how often each model follows each of the post's two algorithms, and report
their circuits; then the post's other runs (:data:`VARIANTS`): the bidirectional model trained
without loss clipping, the causal model with a constant query, the causal model's QK tables over
training, and the bidirectional model at ``d_model = 300`` with and without the clipping
(:data:`WIDE`). The circuits live in :mod:`tpcore.experiments.sorting_circuits`, the QK
tables over training in :mod:`tpcore.experiments.sorting_evidence` and the paused states in
:mod:`tpcore.experiments.sorting_pause`.

A part can train in chunks (:func:`run`'s ``hours``): it pauses at an evaluation, keeping its
paused state in ``.<part>.partial`` of the output folder, and the same call repeated resumes it;
the finished run is the same, bit for bit, as one that never paused (:func:`train`).

Host-side orchestration (NumPy directly for bookkeeping); the compute runs through the standard
transformer and the shared training loop.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.analysis.sorting_rules import rule_agreement
from tpcore.backend import asarray
from tpcore.errors import TpcoreError, missing_package, unknown_name
from tpcore.experiments import sorting_evidence as E
from tpcore.experiments import sorting_pause as pausing
from tpcore.experiments.budget import Budget, scaled
from tpcore.experiments.options import Option, Reproduction
from tpcore.experiments.sorting_circuits import analyse
from tpcore.experiments.sorting_evidence import QK_RUN
from tpcore.io import write_json, write_text
from tpcore.models.transformer import Transformer, TransformerConfig
from tpcore.nn.losses import cross_entropy_forward
from tpcore.nn.module import save
from tpcore.nn.optim import Adam, piecewise
from tpcore.pipelines.learn_runs import paused_dir
from tpcore.rundir import cached, check_out_dir, saved
from tpcore.seeds import derive_seed
from tpcore.tasks.sorting import (
    TASKS,
    SortingTask,
    all_distinct_lists,
    batches,
    encode,
    generate,
    get_task,
    one_list,
    sorted_predictions,
    task_of,
)
from tpcore.train import (
    TrainConfig,
    TrainResult,
    TrainState,
    evaluate_supervised,
    fit,
    supervised_step,
)

D_MODEL = 56
BATCH = 1024
LR, LR_LOW, WEIGHT_DECAY = 1e-3, 1e-4, 1e-4
SCHEDULES = {
    "causal": dict(steps=8000, drop=5000, clip=None),
    "distinct": dict(steps=4000, drop=3000, clip=None),
    "bidirectional": dict(steps=10000, drop=7000, clip=0.02),
}
"""Per task: batches of 1024, the step where the learning rate drops from 1e-3 to 1e-4, and the
per-example loss clipping (the post's 0.02 for the bidirectional model)."""
VARIANTS: dict[str, dict[str, Any]] = {
    "bidirectional_unclipped": dict(task="bidirectional", clip=None),
    "causal_frozen_query": dict(task="causal", query="constant"),
    QK_RUN: dict(task="causal"),
    "bidirectional_d300": dict(task="bidirectional", d_model=300),
    "bidirectional_unclipped_d300": dict(task="bidirectional", clip=None, d_model=300),
}
"""The post's other runs, each its ``task``'s schedule with the changes given: the
bidirectional model before the post clipped the loss; the causal model whose query is one
learned vector for every position and token (``query="constant"`` of
:class:`~tpcore.models.transformer.TransformerConfig`, the post's "Evidence 2"); the causal
model retrained with its QK tables taken at a few steps ("Evidence 1"); the bidirectional
model at ``d_model = 300``, with the clipping and without (the post: "for a larger hidden
dimension (300), this trick managed to boost accuracy from ~99.9% to 100%")."""
PARTS = (*TASKS, *VARIANTS)
"""What ``--tasks`` may name."""
WIDE = tuple(name for name, variant in VARIANTS.items() if "d_model" in variant)
"""The parts of another width than :data:`D_MODEL`: hours of training each at the full budget
(in chunks with ``--hours``), so trained only when ``--tasks`` names them."""
DEFAULT_PARTS = tuple(name for name in PARTS if name not in WIDE)
"""What ``--tasks`` is by default: every part at ``d_model = 56``."""
EVAL_LISTS = 4000
SEARCH_LISTS = 1_000_000


def budget(text: str | float) -> Budget:
    """``--budget``: a positive number scaling the training steps and the failure search."""
    return scaled(text)


def model_config(task: SortingTask, seed: int = 0, query: str = "stream",
                 d_model: int = D_MODEL) -> TransformerConfig:
    """One layer, one head, attention only, no LayerNorm, ``d_model`` wide (56 but for the
    :data:`WIDE` parts); the task's padding token, where its vocabulary has one, marks padding;
    ``query``: ``"constant"`` for a query that is the same learned vector at every position."""
    return TransformerConfig(vocab_size=task.vocab_size, max_len=task.seq_len,
                             n_classes=task.n_values, d_model=d_model, n_layers=1, n_heads=1,
                             layer_norm="none", attn_only=True, causal=task.causal, seed=seed,
                             pad_token=task.pad if task.pad < task.vocab_size else None,
                             query=query)


def evaluate_lists(model: Any, task: SortingTask, lists: np.ndarray, lengths: np.ndarray,
                   batch_size: int = 8192) -> dict[str, Any]:
    """Run ``model`` on ``lists: (B, L)``: its sorted lists ``pred: (B, L)``, ``correct: (B,)``
    (every item right) and the mean cross-entropy per target token (unclipped)."""
    preds, loss_sum = [], 0.0
    for i in range(0, len(lists), batch_size):
        part = encode(task, lists[i : i + batch_size], lengths[i : i + batch_size])
        dev = {k: asarray(v) for k, v in part.items()}
        logits = model.forward(dev["tokens"], pad=dev.get("pad"))
        loss, _ = cross_entropy_forward(logits, dev["targets"], dev["mask"])
        loss_sum += float(loss) * float(part["mask"].sum())
        preds.append(sorted_predictions(task, logits, lengths[i : i + batch_size]))
    pred = np.concatenate(preds)
    truth = np.sort(lists, axis=1)
    return dict(pred=pred, correct=(pred == truth).all(axis=1),
                loss=loss_sum / max(int(lengths.sum()), 1))


def sort_list(model: Any, values: Sequence[int]) -> list[int]:
    """The list ``values`` as ``model`` sorts it (a short list for a causal model is filled as
    :func:`tpcore.tasks.sorting.one_list` says and cut back)."""
    task = task_of(model)
    lists, lengths = one_list(task, values)
    return evaluate_lists(model, task, lists, lengths)["pred"][0, : len(values)].tolist()


def search_failures(model: Any, n: int, generator: str = "hard", seed: int = 0,
                    batch_size: int = 2048) -> dict[str, Any]:
    """Evaluate ``n`` generated lists in batches; return the failing inputs (trimmed to their
    lengths) with the model's outputs, the count, the time taken, and the agreement of the
    failing lists' items with the two algorithms (``rules``, None without failures)."""
    task = task_of(model)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    bad: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    done = 0
    while done < n:
        size = min(batch_size, n - done)
        lists, lengths = generate(task, generator, size, rng)
        res = evaluate_lists(model, task, lists, lengths, batch_size)
        wrong = ~res["correct"]
        bad.append((lists[wrong], lengths[wrong], res["pred"][wrong]))
        done += size
    seconds = time.perf_counter() - t0
    lists, lengths, pred = (np.concatenate(x) for x in zip(*bad))
    failures = [dict(input=a[:k].tolist(), output=p[:k].tolist())
                for a, k, p in zip(lists, lengths, pred)]
    rules = rule_agreement(pred, lists, lengths, task.n_values) if len(lists) else None
    return dict(task=task.name, generator=generator, n=n, seed=seed, failures=failures,
                n_failures=len(failures), seconds=seconds, rules=rules)


def test_sets(task: SortingTask, seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """4,000 random lists, and 4,000 hard lists (every 10-subset once for the distinct task)."""
    rng = np.random.default_rng(seed)
    sets = {"random": generate(task, "random", EVAL_LISTS, rng)}
    if task.distinct:
        every = all_distinct_lists(task, rng)
        sets["all_subsets"] = (every, np.full(len(every), task.length))
    else:
        sets["hard"] = generate(task, "hard", EVAL_LISTS, rng)
    return sets


def train(task: SortingTask, steps: int, drop: int, clip: float | None, seed: int = 0,
          quiet: bool = True, query: str = "stream",
          watch: Callable[[Transformer], None] | None = None,
          watch_steps: Sequence[int] = (), d_model: int = D_MODEL,
          resume: TrainState | None = None,
          pause: Callable[[], bool] | None = None) -> tuple[Transformer, TrainResult]:
    """Train a fresh model (:func:`model_config` with ``query`` and ``d_model``) with Adam (lr
    1e-3, then 1e-4 from ``drop``; weight decay 1e-4) on fresh batches of 1024 generated lists,
    evaluating on 2,000 validation lists ten times and also after each of ``watch_steps`` (the
    history); the final model is kept. ``watch(model)`` is called after every evaluation, in
    the order of the history's rows. Returns the model and the :class:`TrainResult`.

    ``resume``: a paused state of this run (:attr:`TrainResult.paused`) to go on from;
    ``pause()``, when given, is asked after each evaluation before the last step, and the run
    pauses there when it says so (the result's ``paused`` state). A run resumed is the same, bit
    for bit, as one trained in one go: the learning rate and the step noise are functions of
    the step (:func:`tpcore.train.fit`), and the batches go on from the state's step."""
    model = Transformer(model_config(task, seed, query, d_model))
    opt = Adam(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    val_rng = np.random.default_rng(derive_seed(seed, "sorting", task.name, "validation"))
    val = encode(task, *generate(task, "random" if task.distinct else "hard", 2000, val_rng))
    done = 0 if resume is None else resume.step
    stream = ({k: asarray(v) for k, v in b.items()}
              for b in batches(task, BATCH, seed, start=done))
    every, extra = max(1, steps // 10), set(watch_steps)

    def evaluate(m: Transformer) -> dict[str, float]:
        metrics = evaluate_supervised(m, val)
        if watch is not None:
            watch(m)
        return metrics

    cfg = TrainConfig(steps=steps, lr_schedule=piecewise(LR, {drop: LR_LOW}), eval_every=every,
                      eval_at=(lambda s: (s + 1) % every == 0 or s + 1 in extra) if extra
                      else None, seed=seed, quiet=quiet, desc=f"sorting {task.name}")
    marks = [s for s in range(done + 1, steps) if s % every == 0 or s in extra] if pause else []
    for mark in [*marks, steps]:
        # each call takes exactly the batches of its steps, so the stream is at its start
        result = fit(model, opt, lambda start: stream,
                     lambda m, b, ctx: supervised_step(m, b, ctx, clip=clip),
                     replace(cfg, pause_at=mark), evaluate=evaluate, resume=resume)
        resume = result.paused
        if resume is None or pause is None or pause():
            break
    return model, result


def train_setting(name: str, scale: float = 1.0, seed: int = 0,
                  quiet: bool = True) -> tuple[Transformer, dict[str, Any]]:
    """The model of setting ``name`` (:data:`tpcore.tasks.sorting.TASKS`) trained as ``tpcore
    reproduce sorting`` trains it (:func:`run_config` at ``scale`` of its steps), with a report:
    its ``config``, the validation ``history``, ``train_seconds`` and the share of 4,000 fresh
    random lists it sorts wholly right (``random_lists_correct``)."""
    task = get_task(name)
    if not (isinstance(scale, int | float) and 0 < scale <= 100):
        raise TpcoreError(f"scale {scale!r:.20}: expected a number in (0, 100]")
    cfg = run_config(name, scale, seed)
    model, result = train(task, cfg["steps"], cfg["lr_drop"], cfg["clip"], seed, quiet)
    lists = test_sets(task, derive_seed(seed, "sorting", name, "test"))["random"]
    correct = float(evaluate_lists(model, task, *lists)["correct"].mean())
    return model, {"config": cfg, "history": result.history, "train_seconds": result.seconds,
                   "random_lists_correct": correct}


def run_config(name: str, scale: float, seed: int) -> dict[str, Any]:
    """The configuration a part's result records (:func:`tpcore.rundir.cached`): the part, the
    task it ``trains`` (itself, or a variant's, :data:`VARIANTS`), its ``query`` and
    ``d_model``, training steps, the learning-rate drop, loss clipping, seed and the lists the
    failure search draws (None for the distinct task, which is tested on every list, and for
    the QK snapshots); the QK snapshots add their ``checkpoints``."""
    variant = VARIANTS.get(name, {})
    task = variant.get("task", name)
    sched = SCHEDULES[task] | {k: v for k, v in variant.items() if k == "clip"}
    steps = max(2, round(sched["steps"] * scale))
    unsearched = get_task(task).distinct or name == QK_RUN
    cfg = {"task": name, "trains": task, "query": variant.get("query", "stream"),
           "d_model": variant.get("d_model", D_MODEL), "steps": steps,
           "lr_drop": max(1, round(sched["drop"] * scale)), "clip": sched["clip"], "seed": seed,
           "search_lists": None if unsearched else max(1000, round(SEARCH_LISTS * scale))}
    if name == QK_RUN:
        cfg["checkpoints"] = E.checkpoint_steps(steps)
    return cfg


CLI = Reproduction(
    "train the three tiny sorting transformers; accuracy, failure search, rule agreement, "
    "circuits; the unclipped, constant-query, QK-over-training and d_model 300 runs",
    "results/sorting", 1.0, "scales training steps and the failure search",
    (Option("--tasks", f"comma-separated subset of {','.join(PARTS)} (default: all but "
            f"{','.join(WIDE)})", "names"),
     Option("--overwrite", "retrain tasks whose results (or paused states) in --out were made "
            "with other settings", "switch"),
     Option("--plots", "also write PNG figures", "switch"),
     Option("--hours", "pause a task still training after H hours of this call at its next "
            "evaluation, keeping its state in --out; the same command again resumes it",
            "scale", metavar="H")))
"""``tpcore reproduce sorting``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int, tasks: tuple[str, ...] | None = None,
        overwrite: bool = False, plots: bool = False,
        hours: float | None = None) -> dict[str, Any]:
    """Train each part's model (``tasks``, of :data:`PARTS`; :data:`DEFAULT_PARTS` when None;
    ``budget`` scales the training steps and the failure search), evaluate it, search
    10^6 * budget hard lists for failures, measure agreement with the two algorithms and write
    the circuit reports of the three tasks' models and the :data:`WIDE` ones
    (:func:`~tpcore.experiments.sorting_circuits.analyse`; with PNG figures when ``plots``).
    Writes ``<task>.npz/.json`` checkpoints, ``<task>_result.json``, and merges every part found
    in ``out`` into ``sorting.json`` and ``sorting.md``. The QK part (:data:`QK_RUN`) keeps no
    model, only its tables (:func:`~tpcore.experiments.sorting_evidence.qk_snapshot`) and
    validation losses at its checkpoints.

    A task's result records its configuration (:func:`run_config`) and is reused when it
    matches exactly, so rerunning resumes; one of other settings is refused before anything
    is trained, unless ``overwrite`` retrains it (:func:`tpcore.rundir.cached`).

    ``hours``: a part still training after ``hours`` of wall-clock time in this call pauses at
    its next evaluation (0: at the first it trains), keeping its paused state in ``out``
    (module docstring), and no further part starts; nor does one once the time is spent. The
    result then says so under ``"paused"`` (the results only ever gain finished parts). A
    paused state of a part is resumed by any later call that trains it, whatever ``hours``;
    one of other settings (:func:`~tpcore.experiments.sorting_pause.paused_settings`) is
    refused before anything is trained, unless ``overwrite`` trains the part afresh."""
    began = time.monotonic()
    scale = budget["scale"]
    tasks = tuple(tasks or DEFAULT_PARTS)
    for name in tasks:
        if name not in PARTS:
            raise unknown_name("sorting run", name, PARTS)
    if hours is not None and not hours >= 0:
        raise TpcoreError(f"--hours {hours}: expected a number of hours >= 0")
    if plots and importlib.util.find_spec("matplotlib") is None:
        raise missing_package("matplotlib", "--plots")
    out = check_out_dir(out)
    configs = {name: run_config(name, scale, seed) for name in tasks}
    todo = [name for name in tasks
            if saved(out / f"{name}_result.json", configs[name], overwrite=overwrite) is None]
    resumed = {name: pausing.resumed_part(out, name, configs[name], overwrite) for name in todo}

    def pause() -> bool:
        return hours is not None and time.monotonic() - began >= 3600 * hours

    paused = None
    for i, name in enumerate(todo):
        if i and pause():
            paused = f"paused after {hours:g} h, before starting {name}"
            break
        path = out / f"{name}_result.json"
        path.unlink(missing_ok=True)  # with overwrite: a result of other settings
        row = (_run_qk_training if name == QK_RUN else _run_task)(
            out, name, budget, seed, resumed.pop(name), pause if hours is not None else None)
        if "paused" in row:
            paused = row["paused"]
            break
        cached(path, configs[name], lambda row=row: row)
        shutil.rmtree(paused_dir(out / name), ignore_errors=True)
    summary = write_summary(out)
    analyse(out, (*TASKS, *WIDE), plots)
    if paused is not None:
        summary["paused"] = f"{paused}; the same command again resumes it"
    return summary


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce sorting`` prints: a line per part, then where the results are,
    or that the call paused and how to go on."""
    lines = []
    for row in result["rows"]:
        second = "hard" if "hard" in row else "all_subsets"
        lines.append(f"{row['task']}: d_model {row['d_model']}, "
                     f"{row['parameters']} parameters, {row['steps']} steps in "
                     f"{row['train_seconds']:.0f} s, random {100 * row['random']['sorted']:.2f} "
                     f"%, {second} {100 * row[second]['sorted']:.2f} % sorted")
    if "qk_training" in result:
        lines.append(E.qk_report_line(result["qk_training"]))
    return "\n".join([*lines, result.get("paused")
                      or f"wrote {out}/sorting.json, sorting.md and circuit reports"])


def _run_task(out_dir: Path, name: str, budget: Budget, seed: int,
              resumed: tuple[TrainState | None, dict[str, Any]],
              pause: Callable[[], bool] | None) -> dict[str, Any]:
    """Train (from the ``resumed`` state, pausing as ``pause()`` says: :func:`train`), measure
    and save one part's model; returns its result row, or ``{"paused": ...}`` when it paused
    (:func:`~tpcore.experiments.sorting_pause.keep_paused`). A variant is tested on the
    lists its task's model is tested on."""
    config = run_config(name, budget["scale"], seed)
    task = get_task(config["trains"])
    state, kept = resumed
    cpu = time.process_time() - float(kept.get("train_cpu_seconds", 0.0))
    model, result = train(task, config["steps"], config["lr_drop"], config["clip"], seed,
                          quiet=False, query=config["query"], d_model=config["d_model"],
                          resume=state, pause=pause)
    cpu = time.process_time() - cpu
    if result.paused is not None:
        return pausing.keep_paused(out_dir, name, config, result.paused, {"train_cpu_seconds": cpu})
    row: dict[str, Any] = dict(
        task=name, d_model=model.config.d_model, steps=result.steps, lr_drop=config["lr_drop"],
        clip=config["clip"], seed=seed, train_seconds=result.seconds,
        seconds_per_step=result.seconds / result.steps,
        train_cpu_seconds=cpu,
        parameters=model.n_parameters(), last_train_loss=result.last_loss,
        final_validation=result.best, history=result.history)
    for set_name, (lists, lengths) in test_sets(task, derive_seed(seed, "sorting", task.name,
                                                                  "test")).items():
        res = evaluate_lists(model, task, lists, lengths)
        row[set_name] = dict(n=len(lists), sorted=float(res["correct"].mean()),
                             loss=res["loss"],
                             rules=rule_agreement(res["pred"], lists, lengths, task.n_values))
    if config["search_lists"] is not None:
        row["search"] = _search_row(search_failures(
            model, config["search_lists"], "hard",
            derive_seed(seed, "sorting", task.name, "search")))
    row["command"] = (f"tpcore reproduce sorting --tasks {name} --budget {budget.name} "
                      f"--seed {seed}")
    save(model, out_dir / f"{name}.npz", {"task": name, "metrics": result.best})
    return row


def _run_qk_training(out_dir: Path, name: str, budget: Budget, seed: int,
                     resumed: tuple[TrainState | None, dict[str, Any]],
                     pause: Callable[[], bool] | None) -> dict[str, Any]:
    """Train the causal model as :func:`_run_task` would and keep, at each of its checkpoints,
    the QK snapshot (:func:`tpcore.experiments.sorting_evidence.qk_snapshot`) and the losses;
    returns the result (no model is saved), or ``{"paused": ...}`` (the snapshots so far kept
    with the paused state)."""
    config = run_config(name, budget["scale"], seed)
    task = get_task(config["trains"])
    state, kept = resumed
    snapshots: list[dict[str, Any]] = list(kept.get("snapshots", []))
    cpu = time.process_time() - float(kept.get("train_cpu_seconds", 0.0))
    _, result = train(task, config["steps"], config["lr_drop"], config["clip"], seed,
                      quiet=False, watch=lambda m: snapshots.append(E.qk_snapshot(m, task)),
                      watch_steps=config["checkpoints"], resume=state, pause=pause)
    cpu = time.process_time() - cpu
    if result.paused is not None:
        return pausing.keep_paused(out_dir, name, config, result.paused,
                            {"train_cpu_seconds": cpu, "snapshots": snapshots})
    return dict(task=name, trains=task.name, steps=result.steps, seed=seed,
                train_seconds=result.seconds, train_cpu_seconds=cpu,
                checkpoints=E.kept_checkpoints(result.history, snapshots,
                                               config["checkpoints"]),
                command=f"tpcore reproduce sorting --tasks {name} "
                f"--budget {budget.name} --seed {seed}")


def _search_row(search: dict) -> dict:
    """What a result row keeps of a search: counts, time, seed, rule agreement, 20 failures."""
    keep = {k: search[k] for k in ("n", "n_failures", "seconds", "seed", "rules")}
    return {**keep, "failures": search["failures"][:20]}


def write_summary(out_dir: str | Path) -> dict:
    """Merge the ``<part>_result.json`` files in ``out_dir`` into ``sorting.json`` and the
    Markdown tables ``sorting.md`` (of the QK part, its checkpoints without the tables)."""
    out_dir = Path(out_dir)
    found = {n: json.loads((out_dir / f"{n}_result.json").read_text()) for n in PARTS
             if (out_dir / f"{n}_result.json").is_file()}
    qk = found.pop(QK_RUN, None)
    out: dict[str, Any] = dict(rows=list(found.values()))
    text = summary_markdown(out["rows"])
    if qk is not None:
        out["qk_training"] = E.qk_summary(qk)
        text += E.qk_markdown(qk)
    write_json(out_dir / "sorting.json", out)
    write_text(out_dir / "sorting.md", text)
    return out


def summary_markdown(rows: list[dict]) -> str:
    """The tables of ``sorting.md``: per part its width, size, training, test accuracy and
    failures, then its agreement with the two algorithms."""
    lines = ["| model | d_model | params | steps | train wall time (s) | train CPU time (s) | "
             "ms/step (wall) | eval loss | random sorted | hard sorted | failures in search | "
             "wrong items of failures equal to min>prev |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        hard = r.get("hard") or r.get("all_subsets")
        label = "hard" if "hard" in r else "all 3003 subsets"
        search = r.get("search")
        found = f"{search['n_failures']} / {search['n']}" if search else "-"
        rules = (search or {}).get("rules") or {}
        wrong = (f"{_pct(rules['wrong_follows_min_greater'])} of {rules['items_wrong']}"
                 if rules else "-")
        loss = (r["random"]["loss"] + hard["loss"]) / 2
        lines.append(f"| {r['task']} | {r['d_model']} | {r['parameters']} | {r['steps']} | "
                     f"{r['train_seconds']:.0f} | {r['train_cpu_seconds']:.0f} | "
                     f"{1000 * r['seconds_per_step']:.1f} | "
                     f"{loss:.4f} | {100 * r['random']['sorted']:.2f} % | "
                     f"{100 * hard['sorted']:.2f} % ({label}) | {found} | {wrong} |")
    lines += ["", "Agreement of each model's predicted items with the two algorithms "
              "(teacher-forced; `min>prev` = min of the tokens greater than the previous output, "
              "`f_k` = argmax of f_k, which equals the true sorted item):", "",
              "| model | lists | agrees min>prev | agrees f_k | where they differ: follows "
              "min>prev | follows f_k |", "|---|---|---|---|---|---|"]
    for r in rows:
        for set_name in ("random", "hard", "all_subsets"):
            if set_name not in r:
                continue
            g = r[set_name]["rules"]
            lines.append(f"| {r['task']} | {set_name} | {100 * g['min_greater']:.2f} % | "
                         f"{100 * g['concave']:.2f} % | {_pct(g['differ_follows_min_greater'])} "
                         f"| {_pct(g['differ_follows_concave'])} |")
    return "\n".join(lines) + "\n"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f} %"

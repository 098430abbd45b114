"""Learn a Transformer Program: generate a task, train through the shared loop
(:func:`tpcore.train.fit`), decompile, and write the run directory.

:func:`learn` builds the model for a task (:func:`build_model`), trains it (:func:`train`:
one model, the best of several candidates, :func:`pick_candidate`, or a wider model cut down,
:func:`grow_then_prune`) and writes the run directory as a unit (:class:`tpcore.rundir.RunDir`):
``model.npz`` + ``model.json``, ``metrics.json``, when the program IR can express it
``program.json`` plus the readable ``program/<task>.py``
(:func:`tpcore.pipelines.decompile.decompile`), for a run that grew from a wider model that
model's program ``grown.json``, and last the completion record ``run.json``. :func:`fidelity`
checks a finished run's program against its model on every engine.

A run can stop part way (``learn(..., pause_after=EPOCHS)``): it trains the first epochs of its
schedule and keeps its paused state (:class:`tpcore.train.TrainState`) in the hidden sibling
folder ``.<run>.partial`` (:func:`paused_dir`), written as a unit with the run's configuration
recorded, never a run directory; ``learn`` called again goes on from there, and the finished
run is the same, bit for bit, as one trained without stopping.

This module is the entry point of a learn run and keeps its training: those functions reach
each other through this module's names (``fit_run``, ``program_step``, ``fit``, ``save``), which
is where callers and tests replace them. The rest lives beside it and is re-exported here, where
the rest of the package imports it from:

- :mod:`~tpcore.pipelines.learn_config`: :class:`LearnConfig` (a run's settings, the paper's
  RASP defaults: Adam lr 0.05, batch 512, Gumbel temperature 3.0 -> 0.01 geometric per step, one
  sample per step, selection on validation token accuracy of the discrete model), its bounds
  and checks;
- :mod:`~tpcore.pipelines.learn_recipes`: what ``tpcore learn TASK`` trains
  (:data:`TASK_RECIPES`, :func:`task_config`);
- :mod:`~tpcore.pipelines.learn_runs`: run and paused directories, and reading a run's record
  back (:func:`recorded_run`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tpcore.cpu import default_threads, limit_threads, training_machine
from tpcore.errors import TpcoreError
from tpcore.io import read_text, write_json
from tpcore.limits import peak_rss_mb
from tpcore.models import load
from tpcore.models.counting import CountingConfig, CountingProgramModel, variant_flags
from tpcore.models.extract import extract
from tpcore.models.init_from import init_from_program
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.nn.losses import cross_entropy_backward, cross_entropy_forward
from tpcore.nn.module import save
from tpcore.nn.optim import Adam, cosine
from tpcore.pipelines.decompile import decompile, load_program
from tpcore.pipelines.fidelity import agreement
from tpcore.pipelines.learn_config import (
    EVAL_BATCH,
    LR_SCHEDULES,
    MAX_GUMBEL_SAMPLES,
    MAX_SAMPLES,
    MIN_SAMPLES,
    LearnConfig,
)
from tpcore.pipelines.learn_recipes import TASK_RECIPES, task_config
from tpcore.pipelines.learn_runs import (
    GROWN,
    PAUSED,
    is_run,
    paused_dir,
    paused_summary,
    read_metrics,
    recorded_accuracy,
    recorded_config,
    recorded_run,
    run_dir,
)
from tpcore.programs.files import read_program
from tpcore.programs.ir import to_dict
from tpcore.programs.prune import HeadChoice, head_choices, keep_heads
from tpcore.rundir import OVERWRITE, RunDir
from tpcore.tasks.data import TaskData
from tpcore.tasks.registry import make_task
from tpcore.train import (
    Batch,
    StepContext,
    TrainConfig,
    TrainResult,
    TrainState,
    evaluate_supervised,
    fit,
    shuffled_batches,
)
from tpcore.train_state import load_state, save_state

__all__ = [
    "EVAL_BATCH", "GROWN", "LR_SCHEDULES", "MAX_GUMBEL_SAMPLES", "MAX_SAMPLES", "MIN_SAMPLES",
    "PAUSED", "TASK_RECIPES", "LearnConfig", "build_model", "fidelity", "fit_run",
    "grow_then_prune", "is_run", "learn", "make_data", "paused_dir", "paused_summary",
    "pick_candidate", "program_step", "read_metrics", "recorded_accuracy", "recorded_config",
    "recorded_run", "run_dir", "steps_per_epoch", "task_config", "train",
]


def make_data(cfg: LearnConfig) -> TaskData:
    """The task's splits for ``cfg`` (seeded by ``data_seed``)."""
    return make_task(cfg.task, cfg.vocab_size or None, cfg.max_len or None, cfg.n_samples,
                     cfg.data_seed, cfg.min_len)


def build_model(cfg: LearnConfig, task: TaskData) -> ProgramModel:
    """A model sized for ``task``: one-hot tokens and positions, width ``max(|V|, max_len)``,
    with the counting modules ``cfg.counting`` names; the parts ``cfg.init_parts`` set from the
    program ``cfg.init_from`` when one is given."""
    sizes = dict(
        vocab_size=len(task.vocab), max_len=task.max_len, n_classes=len(task.classes),
        n_layers=cfg.n_layers, n_cat_heads=cfg.n_cat_heads, n_num_heads=cfg.n_num_heads,
        n_cat_mlps=cfg.n_cat_mlps, n_num_mlps=cfg.n_num_mlps, d_mlp=cfg.d_mlp,
        causal=task.causal, init_std=cfg.init_std, seed=cfg.seed, gate_tau=cfg.gate_tau)
    model = (ProgramModel(ProgramConfig(**sizes)) if cfg.counting == "none" else
             CountingProgramModel(CountingConfig(**sizes, **variant_flags(cfg.counting))))
    if cfg.init_from:
        try:
            init_from_program(model, read_program(cfg.init_from), cfg.init_parts.split(","),
                              task.vocab, task.classes, cfg.init_strength)
        except TpcoreError as exc:
            raise TpcoreError(f"init_from {cfg.init_from}: {exc}") from None
    return model


def program_step(model: ProgramModel, batch: Batch, ctx: StepContext, samples: int = 1) -> Any:
    """Average over ``samples`` Gumbel samples of the loss: cross-entropy per target token,
    averaged over each sequence's targets then over the batch; gradients accumulate. The
    batch's tokens are taken as checked (:meth:`ProgramModel.check_tokens` on the training data
    before the loop); returns the loss on the device."""
    total = 0.0
    for _ in range(samples):
        logits = model.forward(batch["tokens"], batch["pad"], rng=ctx.rng, tau=ctx.tau,
                               checked=True)
        loss, cache = cross_entropy_forward(logits, batch["targets"], batch["mask"],
                                            reduction="sequence_mean")
        d = cross_entropy_backward(cache)
        model.backward(d / samples if samples > 1 else d)
        total += loss / samples
    return total


def steps_per_epoch(cfg: LearnConfig, task: TaskData) -> int:
    """Training steps in one epoch of ``task``'s training split (whole batches)."""
    n_train = len(task.splits["train"]["tokens"])
    return max(1, n_train // min(cfg.batch_size, n_train))


def fit_run(cfg: LearnConfig, task: TaskData, model: ProgramModel, quiet: bool = True,
            checkpoint: Path | None = None, threads: int | None = None,
            resume: TrainState | None = None, pause_after: int | None = None,
            pause_seconds: float | None = None) -> TrainResult:
    """Train ``model`` on ``task`` through :func:`tpcore.train.fit` with ``cfg``'s schedule;
    ``resume``: a paused state of this run to go on from; ``pause_after``: stop after that many
    epochs, ``pause_seconds``: after the first step ending that long after the call began (the
    result's ``paused`` state)."""
    per_epoch = steps_per_epoch(cfg, task)
    tc = TrainConfig(steps=cfg.epochs * per_epoch, tau=(cfg.tau_start, cfg.tau_end),
                     eval_every=cfg.eval_every * per_epoch,
                     select="acc" if cfg.eval_every else None, seed=cfg.seed, quiet=quiet,
                     desc=cfg.task, checkpoint=checkpoint, threads=threads,
                     grad_clip=cfg.grad_clip or None,
                     lr_schedule=(cosine(cfg.lr, cfg.epochs * per_epoch)
                                  if cfg.lr_schedule == "cosine" else None),
                     pause_at=None if pause_after is None else pause_after * per_epoch,
                     pause_after_seconds=pause_seconds)
    train_split = task.splits["train"]
    model.check_tokens(train_split["tokens"])
    return fit(model, Adam(model.parameters(), lr=cfg.lr),
               lambda start: shuffled_batches(train_split, cfg.batch_size, cfg.seed, start),
               lambda m, b, ctx: program_step(m, b, ctx, cfg.samples), tc,
               lambda m: evaluate_supervised(m, task.splits["val"], EVAL_BATCH), resume)


Start = tuple[LearnConfig, Callable[[], ProgramModel]]
"""A candidate: its configuration and how to build its starting model."""


def _best_start(starts: list[Start], task: TaskData, select_after: int, quiet: bool,
                threads: int | None
                ) -> tuple[LearnConfig, ProgramModel, TrainState | None, list[dict[str, Any]]]:
    """Train each start ``select_after`` epochs and keep the one whose discrete model has the best
    validation token accuracy then (the first on ties): its configuration, model and paused
    state (a fresh model and None where it stopped early, so that it trains again from the
    start), and per start ``seed``, ``val_acc``, ``train_seconds``."""
    best: tuple[float, LearnConfig, ProgramModel, TrainState | None, Callable] | None = None
    records = []
    for one, make in starts:
        model = make()
        result = fit_run(one, task, model, quiet, None, threads, None, select_after)
        acc = evaluate_supervised(model, task.splits["val"], EVAL_BATCH)["acc"]
        records.append({"seed": one.seed, "val_acc": acc, "train_seconds": result.seconds})
        if best is None or acc > best[0]:
            best = (acc, one, model, result.paused, make)
    assert best is not None
    _, one, model, paused, make = best
    return one, model if paused is not None else make(), paused, records


def pick_candidate(cfg: LearnConfig, task: TaskData, quiet: bool = True,
                   threads: int | None = None
                   ) -> tuple[LearnConfig, ProgramModel, TrainState | None,
                              list[dict[str, Any]]]:
    """Train ``cfg.candidates`` models, candidate ``k`` as ``cfg`` with seed
    ``cfg.seed * cfg.candidates + k``, for ``cfg.select_after`` epochs each, and keep the best on
    validation (:func:`_best_start`; resuming its paused state finishes the same run as
    training that seed alone would)."""
    ones = [dataclasses.replace(cfg, seed=cfg.seed * cfg.candidates + k, candidates=1)
            for k in range(cfg.candidates)]
    return _best_start([(one, functools.partial(build_model, one, task)) for one in ones],
                       task, cfg.select_after, quiet, threads)


def grow_then_prune(cfg: LearnConfig, task: TaskData, quiet: bool = True,
                    threads: int | None = None
                    ) -> tuple[LearnConfig, ProgramModel, TrainState | None, dict[str, Any]]:
    """Grow, then prune: train the wider model ``cfg.grown()`` (``cfg.grow`` categorical heads
    per layer, the rest of ``cfg`` as it is, candidates included) and extract its program; then
    for every way to keep ``cfg.n_cat_heads`` of its heads per layer
    (:func:`tpcore.programs.prune.head_choices`), start ``cfg``'s model from the cut-down program
    (read gates and predicates, margin ``init_strength``; :mod:`tpcore.models.init_from`), train
    each ``select_after`` epochs and keep the best on validation, as candidates are kept.

    Why: a circuit of heads that only pay together (the in-context task's previous-token head
    and the head keyed on its output) is found far more often with several heads per layer, and
    once found it fits in one head per layer. Returns the configuration to go on with, its model
    and paused state, and ``grown``: the wider run's ``seed``, ``val``/``test`` metrics,
    ``candidates`` when it had some, its ``program`` (IR dict), and per head choice ``heads`` and
    ``val_acc``."""
    wide_model, wide = train(cfg.grown(), task, quiet, threads=threads)
    program = extract(wide_model, task)
    narrow = dataclasses.replace(cfg, grow=0, candidates=1)
    choices = head_choices(program, cfg.n_cat_heads)
    if not choices:
        raise TpcoreError(f"no way to keep {cfg.n_cat_heads} categorical heads per layer of the "
                          f"{cfg.grow}-head model: every choice drops a head a kept module reads")

    def start(choice: HeadChoice) -> ProgramModel:
        model = build_model(narrow, task)
        init_from_program(model, keep_heads(program, choice), ["read", "predicate"],
                          task.vocab, task.classes, cfg.init_strength)
        return model

    starts = [(narrow, functools.partial(start, c)) for c in choices]
    one, model, paused, records = _best_start(starts, task, cfg.select_after, quiet, threads)
    grown = {k: wide[k] for k in ("seed", "val", "test", "candidates", "train_seconds")
             if k in wide}
    grown["heads"] = [{"heads": [list(hs) for hs in c], "val_acc": r["val_acc"],
                       "train_seconds": r["train_seconds"]} for c, r in zip(choices, records)]
    kept = records.index(max(records, key=lambda r: r["val_acc"]))  # the first on ties
    grown["kept"] = grown["heads"][kept]["heads"]
    grown["program"] = to_dict(program)
    return one, model, paused, grown


def train(cfg: LearnConfig, task: TaskData, quiet: bool = True,
          checkpoint: Path | None = None, model: ProgramModel | None = None,
          threads: int | None = None, resume: TrainState | None = None,
          pause_seconds: float | None = None) -> tuple[ProgramModel, dict[str, Any]]:
    """Train on ``task`` and return the selected model and its metrics (per split: ``loss``,
    ``acc`` token accuracy, ``seq_acc`` exact match; all of the discrete model). ``model``: a
    prebuilt model to train (e.g. a subclass with stream extensions) instead of
    :func:`build_model`'s; ``threads``: BLAS threads
    (:func:`tpcore.cpu.limit_threads`);
    ``resume``: a paused state of this run to finish (:func:`fit_run`). With
    ``cfg.candidates > 1`` (and neither ``model`` nor ``resume``) the best candidate
    (:func:`pick_candidate`) is trained to the end; ``candidates`` in the metrics lists them
    all, ``seed`` is the one kept and ``train_seconds`` counts every candidate's training.
    With ``cfg.grow`` (and neither ``model`` nor ``resume``) the model starts from the wider
    model's program (:func:`grow_then_prune`); ``grown`` in the metrics describes that run and
    ``train_seconds`` counts it. ``pause_seconds`` (a single run: neither candidates nor
    grow): stop after the first step that ends that long after the call began; when that comes
    before the last step, the metrics are ``{"paused": TrainState}`` and nothing is
    evaluated."""
    cfg.check()
    if (pause_seconds is not None and model is None and resume is None
            and (cfg.candidates > 1 or cfg.grow)):
        raise TpcoreError(f"a run of {cfg.candidates} candidates or grow={cfg.grow} cannot pause "
                          "on time; expected candidates=1, grow=0")
    per_epoch = steps_per_epoch(cfg, task)
    run_cfg, candidates, grown, spent = cfg, None, None, 0.0
    if cfg.grow and model is None and resume is None:
        run_cfg, model, resume, grown = grow_then_prune(cfg, task, quiet, threads)
        spent = grown["train_seconds"] + sum(h["train_seconds"] for h in grown["heads"])
    elif cfg.candidates > 1 and model is None and resume is None:
        run_cfg, model, resume, candidates = pick_candidate(cfg, task, quiet, threads)
        spent = sum(c["train_seconds"] for c in candidates)
    model = build_model(cfg, task) if model is None else model
    result = fit_run(run_cfg, task, model, quiet, checkpoint, threads, resume,
                     pause_seconds=pause_seconds)
    if result.paused is not None:
        return model, {"paused": result.paused}
    seconds = result.seconds + spent
    if spent and resume is not None:
        seconds -= resume.seconds  # the kept start's first epochs are counted in result
    metrics: dict[str, Any] = {
        "task": task.name, "config": cfg.settings(), "seed": run_cfg.seed,
        "task_params": task.params, "steps": result.steps, "steps_per_epoch": per_epoch,
        "train_seconds": seconds, "ms_per_step": 1000 * result.seconds / result.steps,
        "ms_per_step_by_tenth": result.ms_per_step_by_tenth(), "steps_ran": result.cuda_graphs,
        "selected_at_step": result.best.get("step"), "history": result.history,
    }
    if candidates:
        metrics["candidates"] = candidates
    if grown:
        metrics["grown"] = grown
    for name, split in task.splits.items():
        metrics[name] = evaluate_supervised(model, split, EVAL_BATCH)
    metrics["peak_rss_mb"] = peak_rss_mb()
    return model, metrics


def learn(cfg: LearnConfig, out: Path, quiet: bool = True, overwrite: bool = False,
          threads: int | None = None, pause_after: int | None = None) -> dict[str, Any]:
    """Generate the data, train, and write the run directory ``out`` as a unit
    (:func:`run_dir`); returns the metrics, with ``reused``: True when ``out`` already held a
    finished run of ``cfg``, read back instead of retrained. ``out`` holding a run of other
    settings is refused before any work, unless ``overwrite``, which replaces it whole; so is
    a finished run whose model files are missing (``overwrite`` trains it again).
    ``threads``: threads of the whole run (None: :func:`tpcore.cpu.default_threads`).

    ``pause_after`` (epochs, below ``cfg.epochs``): train only that far and keep the paused state
    in :func:`paused_dir` instead of writing ``out``; returns its summary
    (:func:`paused_summary`; nothing is trained when the state is that far already). A paused
    state of ``cfg`` is always resumed from; one of other settings is refused like a run."""
    cfg.check()
    out = Path(out)
    run = run_dir(cfg, out, overwrite)
    missing = [n for n in ("model.json", "model.npz") if not (run.path / n).is_file()]
    if run.finished and not missing:
        return {**read_metrics(run.path), "reused": True}
    if run.finished and not overwrite:
        raise TpcoreError(f"{run.path} holds the metrics of a finished run of these settings "
                          f"but not its model ({', '.join(missing)} missing); {OVERWRITE}")
    pause = pause_after is not None and pause_after < cfg.epochs
    if pause and (cfg.candidates > 1 or cfg.grow):
        raise TpcoreError(f"a run of {cfg.candidates} candidates or grow={cfg.grow} cannot pause "
                          "(successive halving pauses runs); expected candidates=1, grow=0")
    where = paused_dir(run.path)  # only looked at when it exists or a pause is asked for
    paused = RunDir(where, cfg.settings(), overwrite) if pause or where.exists() else None
    resumable = paused is not None and paused.finished
    record = (json.loads(read_text(paused.path / PAUSED, "paused-run summary")) if resumable
              else None)
    if pause and record is not None and record["epochs"] >= pause_after:
        return record
    state = load_state(paused.path) if resumable else None
    if pause:
        with limit_threads(threads), paused.build() as tmp:
            task = make_data(cfg)
            result = fit_run(cfg, task, build_model(cfg, task), quiet, None, threads, state,
                             pause_after)
            if result.paused is None:
                raise TpcoreError(f"the run stopped early (patience) before epoch {pause_after}, "
                                  "so it has no paused state to keep; run it without pausing")
            save_state(result.paused, tmp)
            record = paused_summary(cfg, result.paused, steps_per_epoch(cfg, task))
            write_json(tmp / PAUSED, record)
        return record
    with limit_threads(threads), run.build() as tmp:
        task = make_data(cfg)
        start = time.perf_counter()
        model, metrics = train(cfg, task, quiet=quiet, threads=threads, resume=state)
        if "grown" in metrics:
            write_json(tmp / GROWN, metrics["grown"].pop("program"))
        save(model, tmp / "model.npz", {"task": task.name, "vocab": list(task.vocab),
                                        "classes": list(task.classes)})
        try:
            program = decompile(model, task, tmp)
            program["path"] = str(run.path / Path(program["path"]).relative_to(tmp))
        except TpcoreError as exc:
            program = {"error": f"no program: {exc}"}
        metrics["program"] = program
        metrics["wall_seconds"] = time.perf_counter() - start
        metrics["machine"] = training_machine(default_threads() if threads is None else threads)
        write_json(tmp / "metrics.json", metrics)
    if paused is not None:
        shutil.rmtree(paused.path, ignore_errors=True)
    return {**metrics, "reused": False}


def fidelity(run_dir: str | Path, n_program: int | None = None) -> dict[str, Any]:
    """:func:`tpcore.pipelines.fidelity.agreement` of a finished run's discrete model and its
    program (``program.json``, or extracted from the model where that is not kept) on its test
    split, on every engine (the generated program on the first ``n_program`` sequences, all
    when None), with the numbers of target ``positions`` and ``sequences``."""
    run_dir = Path(run_dir)
    test = make_data(recorded_run(run_dir)[1]).splits["test"]
    return {"positions": int(test["mask"].sum()), "sequences": int(len(test["tokens"])),
            **agreement(load(run_dir / "model.npz"), load_program(run_dir), test,
                        n_generated=n_program)}

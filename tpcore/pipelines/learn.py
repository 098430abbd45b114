"""Learn a Transformer Program: generate a task, train through the shared loop
(:func:`tpcore.train.fit`), decompile, and write the run directory.

:class:`LearnConfig` holds a run's settings (the paper's RASP defaults: Adam lr 0.05, batch 512,
Gumbel temperature 3.0 -> 0.01 geometric per step, one sample per step, selection on validation
token accuracy of the discrete model). :func:`learn` builds the model for a task, trains it and
writes the run directory as a unit (:class:`tpcore.rundir.RunDir`): ``model.npz`` +
``model.json``, ``metrics.json``, when the program IR can express it ``program.json`` plus the
readable ``program/<task>.py`` (:func:`tpcore.pipelines.decompile.decompile`), for a run that
grew from a wider model (:func:`grow_then_prune`) that model's program ``grown.json``, and last
the completion record ``run.json``. :func:`fidelity` checks a finished run's program against its
model on every engine.

A run can stop part way (``learn(..., pause_after=EPOCHS)``): it trains the first epochs of its
schedule and keeps its paused state (:class:`tpcore.train.TrainState`) in the hidden sibling
folder ``.<run>.partial`` (:func:`paused_dir`), written as a unit with the run's configuration
recorded, never a run directory; ``learn`` called again goes on from there, and the finished
run is the same, bit for bit, as one trained without stopping.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import shutil
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpcore.cpu import default_threads, limit_threads, training_machine
from tpcore.errors import TpcoreError, unknown_name
from tpcore.io import read_text, write_json
from tpcore.limits import check_memory, peak_rss_mb
from tpcore.models import load
from tpcore.models.counting import CountingConfig, CountingProgramModel, variant_flags
from tpcore.models.extract import extract
from tpcore.models.init_from import MAX_STRENGTH, STRENGTH, init_from_program, parse_parts
from tpcore.models.program import AttnGateLayout, ProgramConfig, ProgramModel
from tpcore.nn.losses import cross_entropy_backward, cross_entropy_forward
from tpcore.nn.module import save
from tpcore.nn.optim import Adam, cosine
from tpcore.pipelines.decompile import decompile, load_program
from tpcore.pipelines.fidelity import agreement
from tpcore.programs.files import read_program
from tpcore.programs.ir import read_limited, to_dict
from tpcore.programs.prune import HeadChoice, head_choices, keep_heads
from tpcore.rundir import OVERWRITE, RunDir
from tpcore.tasks.data import TaskData
from tpcore.tasks.registry import DEFAULTS, make_task, task_name
from tpcore.train import (
    Batch,
    StepContext,
    TrainConfig,
    TrainResult,
    TrainState,
    evaluate_supervised,
    fit,
    load_state,
    save_state,
    shuffled_batches,
)

__all__ = [
    "EVAL_BATCH", "GROWN", "LR_SCHEDULES", "MAX_GUMBEL_SAMPLES", "MAX_SAMPLES", "MIN_SAMPLES",
    "PAUSED",
    "TASK_RECIPES", "LearnConfig", "build_model", "fidelity", "fit_run",
    "grow_then_prune", "is_run", "learn", "make_data", "paused_dir", "paused_summary",
    "pick_candidate", "program_step", "read_metrics", "recorded_accuracy", "recorded_run",
    "run_dir",
    "steps_per_epoch", "task_config", "train",
]

EVAL_BATCH = 1024
"""Sequences per evaluation forward (bounds peak memory)."""
MIN_SAMPLES = 20
"""Fewest ``n_samples``: at least half are distinct (or generation fails), and the 80/10/10
split of 10 or more inputs leaves none empty."""
MAX_SAMPLES = 2**18
"""Most generated inputs of a run (``n_samples``; the paper's tasks use 20,000): a bound on the
work a configuration asks for, from the command line or read back from a file."""
MAX_GUMBEL_SAMPLES = 1024
"""Most Gumbel samples per training step (``samples``)."""
LR_SCHEDULES = ("constant", "cosine")
"""Learning-rate schedules of a run (``LearnConfig.lr_schedule``)."""


@dataclass
class LearnConfig:
    """One training run. Head and MLP counts are per layer; ``epochs`` over the training split;
    ``samples``: Gumbel samples averaged per step; ``init_std``: standard deviation of the initial
    gate and predicate logits; ``init_from``: a program (IR JSON, program file or run directory)
    whose ``init_parts`` (comma-separated, :func:`tpcore.models.init_from.init_from_program`)
    initialise the model with margin ``init_strength``; ``counting``: the counting modules of
    "Modular Counts" (``none``, ``prefix``: PrefixSumCounts, ``experts``: the sparse expert
    counting network, ``both``; :mod:`tpcore.models.counting`); ``eval_every``: epochs between
    validation evaluations; ``vocab_size``/``max_len``/``min_len``/``n_samples``: task size (0:
    the task's default, see :func:`tpcore.tasks.registry.make_task`); ``candidates``: models
    (seeds ``seed * candidates + k``) trained ``select_after`` epochs each, of which the best on
    validation goes on alone (:func:`pick_candidate`); ``grad_clip``: largest global L2 norm
    of a step's gradient, larger ones scaled down to it (0: no clipping); ``lr_schedule``:
    ``constant`` (the paper's) or ``cosine``, ``lr * (1 + cos(pi * step / steps)) / 2``;
    ``gate_tau``: the read gates' temperature as a multiple of ``tau``
    (:class:`~tpcore.models.program.ProgramConfig`); ``grow``: categorical heads per layer of a
    wider model trained first, whose program is cut down to ``n_cat_heads`` heads per layer to
    start this one (0: none; :func:`grow_then_prune`)."""

    task: str = "sort"
    n_layers: int = 3
    n_cat_heads: int = 4
    n_num_heads: int = 4
    n_cat_mlps: int = 2
    n_num_mlps: int = 2
    d_mlp: int = 64
    epochs: int = 250
    batch_size: int = 512
    lr: float = 0.05
    tau_start: float = 3.0
    tau_end: float = 0.01
    samples: int = 1
    init_std: float = 1.0
    eval_every: int = 10
    seed: int = 0
    vocab_size: int = 0
    max_len: int = 0
    min_len: int = 1
    n_samples: int = 20000
    data_seed: int = 0
    init_from: str = ""
    init_parts: str = ""
    init_strength: float = STRENGTH
    counting: str = "none"
    candidates: int = 1
    select_after: int = 10
    grad_clip: float = 0.0
    lr_schedule: str = "constant"
    gate_tau: float = 1.0
    grow: int = 0

    def settings(self) -> dict[str, Any]:
        """The configuration as recorded in run directories and results: every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Any, where: str) -> LearnConfig:
        """The configuration a file records (a ``metrics.json``'s ``config``): every key a field,
        every value of its field's type, the whole passing :meth:`check` as the command line's
        settings do; else a :class:`TpcoreError` naming ``where`` and the key."""
        if not isinstance(data, dict):
            raise TpcoreError(f"{where}: config is {_json_kind(data)}; expected an object")
        for key in data:
            if key not in typing.get_type_hints(cls):
                raise TpcoreError(f"{where}: config.{str(key)[:40]} is not a setting of a learn "
                                  "run")
        cls.check_types(data, f"{where}: config.")
        config = cls(**data)
        try:
            config.check()
        except TpcoreError as exc:
            raise TpcoreError(f"{where}: config: {exc}") from None
        return config

    @classmethod
    def check_types(cls, values: dict[str, Any], prefix: str,
                    names: dict[str, str] | None = None,
                    show: Callable[[Any], str] = json.dumps) -> None:
        """Raise a :class:`TpcoreError` for a value of ``values`` that is not of its field's
        type (a string, an integer that is not a boolean, a finite number), naming it as
        ``prefix`` and its name (``names[key]``, else the key) and showing it with ``show``."""
        hints = typing.get_type_hints(cls)
        for key, value in values.items():
            kind = hints[key]
            if not (isinstance(value, str) if kind is str else type(value) is int if kind is int
                    else type(value) in (int, float) and math.isfinite(value)):
                raise TpcoreError(f"{prefix}{(names or {}).get(key, key)} is "
                                  f"{show(value)[:40]}; expected "
                                  f"{'a finite number' if kind is float else kind.__name__}")

    def check(self) -> None:
        """Reject settings that cannot work, naming the value and what is allowed: counts, finite
        rates, splits that are not empty, and an estimated memory that fits
        (:meth:`memory_estimate`, :func:`tpcore.limits.check_memory`)."""
        for name in ("n_layers", "epochs", "batch_size", "samples", "d_mlp"):
            if getattr(self, name) < 1:
                raise TpcoreError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("n_cat_heads", "n_num_heads", "n_cat_mlps", "n_num_mlps", "eval_every",
                     "vocab_size", "max_len", "seed", "data_seed", "grow"):
            if getattr(self, name) < 0:
                raise TpcoreError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not MIN_SAMPLES <= self.n_samples <= MAX_SAMPLES:
            raise TpcoreError(f"n_samples={self.n_samples}; expected {MIN_SAMPLES} (to split "
                              f"80/10/10 with no split empty) .. {MAX_SAMPLES:,} generated "
                              "inputs")
        if self.samples > MAX_GUMBEL_SAMPLES:
            raise TpcoreError(f"samples={self.samples} Gumbel samples per step (each a forward "
                              f"and backward pass); expected 1..{MAX_GUMBEL_SAMPLES}")
        if self.n_num_mlps and not self.n_num_heads:
            raise TpcoreError(f"n_num_mlps={self.n_num_mlps} needs numerical heads: with "
                              "n_num_heads=0 the only numerical variable is the constant 'ones'")
        if not (math.isfinite(self.grad_clip) and self.grad_clip >= 0):
            raise TpcoreError(f"grad_clip must be a finite number >= 0 (0: no clipping), got "
                              f"{self.grad_clip}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise unknown_name("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        if not (math.isfinite(self.gate_tau) and self.gate_tau > 0):
            raise TpcoreError(f"gate_tau must be a finite number > 0, got {self.gate_tau}")
        finite = all(math.isfinite(x) for x in (self.lr, self.tau_start, self.tau_end,
                                                 self.init_std))
        if not finite or self.lr <= 0 or not 0 < self.tau_end <= self.tau_start:
            raise TpcoreError(f"need finite lr > 0 and 0 < tau_end <= tau_start; got "
                              f"lr={self.lr}, tau=({self.tau_start}, {self.tau_end}), "
                              f"init_std={self.init_std}")
        if self.candidates < 1 or (self.candidates > 1
                                   and not 1 <= self.select_after < self.epochs):
            raise TpcoreError(f"need candidates >= 1 and, with more than one, 1 <= select_after "
                              f"< epochs; got candidates={self.candidates}, select_after="
                              f"{self.select_after}, epochs={self.epochs}")
        variant_flags(self.counting)
        if self.grow and not 1 <= self.select_after < self.epochs:
            raise TpcoreError(f"grow={self.grow} compares its starts after select_after="
                              f"{self.select_after} epochs; expected 1 <= select_after < epochs="
                              f"{self.epochs}")
        if self.grow and not 1 <= self.n_cat_heads < self.grow:
            raise TpcoreError(f"grow={self.grow} trains a wider model first and keeps "
                              f"n_cat_heads={self.n_cat_heads} of its categorical heads per "
                              "layer; expected 1 <= n_cat_heads < grow")
        if self.grow and self.init_from:
            raise TpcoreError(f"grow={self.grow} starts the model from the wider model's program; "
                              f"it cannot also start from init_from={self.init_from!r}")
        if self.init_from or self.init_parts:
            if not (self.init_from and self.init_parts):
                raise TpcoreError("init_from and init_parts go together; got init_from="
                                  f"{self.init_from!r}, init_parts={self.init_parts!r}")
            parse_parts(self.init_parts.split(","))
            if not 0 < self.init_strength <= MAX_STRENGTH:
                raise TpcoreError(f"init_strength {self.init_strength}; expected a number in "
                                  f"(0, {MAX_STRENGTH:g}]")
        V, N = self.task_size()
        check_memory(max(self.memory_estimate(), self.grown().memory_estimate()),
                     f"learn {self.task} (|V| {V}, N {N}, {self.n_layers} layers, d_mlp "
                     f"{self.d_mlp}, batch {self.batch_size}, n_samples {self.n_samples})",
                     device=True)

    def grown(self) -> LearnConfig:
        """The wider model's configuration (``grow`` categorical heads per layer, no growing);
        this configuration itself when it does not grow."""
        return dataclasses.replace(self, n_cat_heads=self.grow, grow=0) if self.grow else self

    def task_size(self) -> tuple[int, int]:
        """``(vocab_size, max_len)`` with the task's defaults in place of 0."""
        dv, dn = DEFAULTS[task_name(self.task)]
        return self.vocab_size or dv, self.max_len or dn

    def memory_estimate(self) -> int:
        """Bytes of the largest arrays a run allocates (float32; a bound, not a measurement:
        ``learn sort``'s defaults give 231 MiB, its measured peak is 217 MiB).

        Parameters with gradients and two Adam moments; one forward's activations kept for the
        backward and as many again for its gradients, at the larger of the training batch and
        the evaluation batch: the stream (every variable one-hot of width ``d = max(|V|, N)``,
        and the classifier's copy), per head ``4 N^2`` (scores, noise, probabilities, cache)
        and its reads, per MLP inputs, hidden units and outputs; the generated data, ``64 + 2|V|``
        bytes per token (drawn rows, labels, counts)."""
        V, N = self.task_size()
        d, D, L = max(V, N), self.d_mlp, self.n_layers
        hc, hn, mc, mn = self.n_cat_heads, self.n_num_heads, self.n_cat_mlps, self.n_num_mlps
        m = 2 + L * (hc + mc + mn)
        params = ProgramConfig(vocab_size=V, max_len=N, n_classes=d, n_layers=L, n_cat_heads=hc,
                               n_num_heads=hn, n_cat_mlps=mc, n_num_mlps=mn,
                               d_mlp=D).n_parameters()
        batch = min(max(self.batch_size, EVAL_BATCH), self.n_samples)
        per_token = 2 * m * d + L * ((hc + hn) * 4 * N + AttnGateLayout(hc, hn).rows * d
                                     + (mc + mn) * (3 * d + 2 * D))
        data = self.n_samples * N * (64 + 2 * V)
        return 4 * 4 * params + 2 * 4 * batch * N * per_token + data


TASK_RECIPES: dict[str, dict[str, int]] = {
    "double_hist": dict(n_cat_mlps=1, n_num_mlps=1, candidates=6, select_after=100),
    "induction": dict(n_layers=2, n_cat_heads=1, n_num_heads=0, n_cat_mlps=0, n_num_mlps=0,
                      grow=4, candidates=16, select_after=10),
}
"""The settings ``tpcore learn TASK`` trains with where they differ from :class:`LearnConfig`'s
(3 layers of 4 + 4 heads and 2 + 2 MLPs, one candidate); each trains the paper's model.

Double hist: the released model's 1 + 1 MLPs per layer, the best of 6 candidates after 100
epochs. About a third of single runs come within a point of the paper, and they are ahead by
epoch 100 (93-100 % validation token accuracy, where the runs that end short of it were at or
below 91 %, save a few leaders that settle at 95-97 %).

The in-context task: 2 layers of one categorical head, no MLPs, grown from 4 heads per layer,
whose run is the best of 16 candidates after 10 epochs (:func:`grow_then_prune`). Its program
needs two heads that only pay together (a previous-token head, and a head keyed on its output):
with one head per layer the read gates commit to other variables before that pair is useful;
with four heads per layer some pair finds it on about one seed in five or six, and those seeds
are ahead after 10 epochs (87-99 % validation token accuracy where measured, against at most
72 % for seeds that stayed on the plateau), so 16 candidates all miss it with probability about
0.83^16 = 5 %; the pair found is then cut out into the one-head model (docs/programs_model.md)."""


def task_config(task: str, **fields: Any) -> LearnConfig:
    """The :class:`LearnConfig` of ``task`` (a name or alias): its :data:`TASK_RECIPES`
    entry, then ``fields``. A run too short for the recipe's selection (``epochs`` at most its
    ``select_after``, none of ``candidates``, ``select_after`` and ``grow`` given) trains one
    candidate of the model it names, without growing."""
    name = task_name(task)
    recipe = dict(TASK_RECIPES.get(name, {}))
    epochs = fields.get("epochs", LearnConfig.epochs)
    if (recipe.get("select_after", 0) >= epochs
            and not {"candidates", "select_after", "grow"} & set(fields)):
        for selecting in ("candidates", "select_after", "grow"):
            recipe.pop(selecting, None)
    return LearnConfig(task=name, **{**recipe, **fields})


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
            resume: TrainState | None = None, pause_after: int | None = None) -> TrainResult:
    """Train ``model`` on ``task`` through :func:`tpcore.train.fit` with ``cfg``'s schedule;
    ``resume``: a paused state of this run to go on from; ``pause_after``: stop after that many
    epochs (the result's ``paused`` state)."""
    per_epoch = steps_per_epoch(cfg, task)
    tc = TrainConfig(steps=cfg.epochs * per_epoch, tau=(cfg.tau_start, cfg.tau_end),
                     eval_every=cfg.eval_every * per_epoch,
                     select="acc" if cfg.eval_every else None, seed=cfg.seed, quiet=quiet,
                     desc=cfg.task, checkpoint=checkpoint, threads=threads,
                     grad_clip=cfg.grad_clip or None,
                     lr_schedule=(cosine(cfg.lr, cfg.epochs * per_epoch)
                                  if cfg.lr_schedule == "cosine" else None),
                     pause_at=None if pause_after is None else pause_after * per_epoch)
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
          threads: int | None = None, resume: TrainState | None = None
          ) -> tuple[ProgramModel, dict[str, Any]]:
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
    ``train_seconds`` counts it."""
    cfg.check()
    per_epoch = steps_per_epoch(cfg, task)
    run_cfg, candidates, grown, spent = cfg, None, None, 0.0
    if cfg.grow and model is None and resume is None:
        run_cfg, model, resume, grown = grow_then_prune(cfg, task, quiet, threads)
        spent = grown["train_seconds"] + sum(h["train_seconds"] for h in grown["heads"])
    elif cfg.candidates > 1 and model is None and resume is None:
        run_cfg, model, resume, candidates = pick_candidate(cfg, task, quiet, threads)
        spent = sum(c["train_seconds"] for c in candidates)
    model = build_model(cfg, task) if model is None else model
    result = fit_run(run_cfg, task, model, quiet, checkpoint, threads, resume)
    seconds = result.seconds + spent
    if spent and resume is not None:
        seconds -= resume.seconds  # the kept start's first epochs are counted in result
    metrics: dict[str, Any] = {
        "task": task.name, "config": cfg.settings(), "seed": run_cfg.seed,
        "task_params": task.params, "steps": result.steps, "steps_per_epoch": per_epoch,
        "train_seconds": seconds, "ms_per_step": 1000 * result.seconds / result.steps,
        "ms_per_step_by_tenth": result.ms_per_step_by_tenth(),
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


def run_dir(cfg: LearnConfig, out: Path, overwrite: bool = False) -> RunDir:
    """The run directory of ``cfg`` at ``out``; its configuration is
    :meth:`LearnConfig.settings`."""
    return RunDir(out, cfg.settings(), overwrite)


def paused_dir(out: str | Path) -> Path:
    """Where the run bound for ``out`` keeps its paused state: the hidden sibling folder
    ``.<name>.partial``, with the run's configuration recorded (:class:`RunDir`)."""
    out = Path(out)
    return out.with_name(f".{out.name}.partial")


GROWN = "grown.json"
"""The program IR of a growing run's wider model, in its run directory."""
PAUSED = "paused.json"
"""The summary of a paused run inside its :func:`paused_dir`."""


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


def paused_summary(cfg: LearnConfig, state: TrainState, per_epoch: int) -> dict[str, Any]:
    """What a paused run reports: ``epochs`` and ``steps`` trained, ``val``: the validation
    metrics of the model selected so far (empty before the first evaluation), ``history``,
    ``train_seconds`` over all its sessions, its ``config``, and ``paused``: True."""
    return {"paused": True, "task": cfg.task, "config": cfg.settings(), "seed": cfg.seed,
            "epochs": state.step // per_epoch, "steps": state.step,
            "steps_per_epoch": per_epoch, "val": state.best, "history": state.history,
            "train_seconds": state.seconds}


def _json_kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def is_run(path: Path) -> bool:
    """Whether ``path`` is a finished learn run (``metrics.json`` and ``model.npz``)."""
    return (path / "metrics.json").is_file() and (path / "model.npz").is_file()


def read_metrics(run_dir: str | Path) -> dict[str, Any]:
    """A run directory's ``metrics.json`` as an object (at most ``LIMITS.file_bytes``); a file
    that is not raises a :class:`TpcoreError` naming it."""
    path = Path(run_dir) / "metrics.json"
    try:
        metrics = json.loads(read_limited(path, "run metrics"))
    except (OSError, ValueError, RecursionError) as exc:
        raise TpcoreError(f"{path}: not readable JSON ({str(exc)[:120]})") from None
    if not isinstance(metrics, dict):
        raise TpcoreError(f"{path}: {_json_kind(metrics)}; expected an object")
    return metrics


def recorded_config(metrics: dict[str, Any], where: str) -> LearnConfig:
    """The configuration a learn run's record ``metrics`` holds (:meth:`LearnConfig.from_json`),
    read from ``where``; a record that is not a learn run's raises a :class:`TpcoreError`
    naming ``where`` and the key."""
    if "config" not in metrics:
        raise TpcoreError(f"{where}: no config")
    config = LearnConfig.from_json(metrics["config"], where)
    if metrics.get("task", config.task) != config.task:
        raise TpcoreError(f"{where}: task {json.dumps(metrics['task'])[:40]} is not its config's "
                          f"{config.task!r}")
    return config


def recorded_run(run_dir: str | Path) -> tuple[dict[str, Any], LearnConfig]:
    """The ``metrics.json`` of a finished learn run and the configuration it records
    (:func:`recorded_config`)."""
    metrics = read_metrics(run_dir)
    return metrics, recorded_config(metrics, str(Path(run_dir) / "metrics.json"))


def recorded_accuracy(metrics: dict[str, Any], split: str, where: str | Path) -> float:
    """The token accuracy ``metrics[split]["acc"]`` of a run's ``metrics.json`` (read from
    ``where``): a number in [0, 1], else a :class:`TpcoreError` naming the file and key."""
    part = metrics.get(split)
    acc = part.get("acc") if isinstance(part, dict) else None
    if type(acc) not in (int, float) or not 0 <= acc <= 1:
        raise TpcoreError(f"{where}: {split}.acc is {json.dumps(acc)[:40]}; expected a number "
                          "in [0, 1]")
    return float(acc)


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

"""The one training loop: batches, schedules, progress bar, evaluation, model selection,
checkpoints, early stopping and divergence checks, shared by every model.

A model plugs in through a *step function* ``step_fn(model, batch, ctx) -> loss`` that runs the
forward and the backward (filling ``Parameter.grad``) and returns the loss (a float, or a 0-d
array left on the device: the loop reads losses every :data:`LOSS_EVERY` steps, so that no step
waits for a GPU; the strict backend refuses host conversions inside a step), and an
optional *evaluate* function ``evaluate(model) -> dict`` of metrics. :func:`supervised_step` and
:func:`evaluate_supervised` serve models whose ``forward(tokens, ...)`` returns logits and whose
``backward(dlogits)`` accumulates gradients.

A run can *pause* after ``TrainConfig.pause_at`` of its ``steps`` and *resume* later: the paused
:class:`TrainState` (parameters, optimiser moments and step, the backend, the data position, the
selection so far and the history; :mod:`tpcore.train_state` saves and loads it) makes a resumed
run the same, bit for bit, as one that never paused: each step draws its noise from a generator
of the run's seed and the step alone (:func:`tpcore.counter_rng.step_rng`). Schedules are those of
the whole run: a paused run has trained the first ``pause_at`` steps of it.

Training runs on :func:`tpcore.cpu.default_threads` threads (``TPCORE_THREADS``, else up to two
of the cores this process may use) unless :attr:`TrainConfig.threads` says otherwise, whether it
starts from the CLI or from Python: NumPy's BLAS runs the matrix products on them, the fused
kernels between the products run on one (a second thread pool would spin against BLAS's on two
cores); the previous count is restored afterwards. A float32 model trains with subnormal numbers
flushed to zero (:func:`tpcore.cpu.flush_subnormals`), the caller's floating-point mode restored
afterwards.
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.backend import (
    asarray,
    backend_name,
    to_host,
    xp_of,
)
from tpcore.cpu import flush_subnormals, flush_wanted, limit_threads
from tpcore.errors import TpcoreError, TrainingDiverged
from tpcore.graphs import StepContext, step_runner
from tpcore.nn.losses import (
    cross_entropy_backward,
    cross_entropy_forward,
    sequence_accuracy,
    token_accuracy,
)
from tpcore.nn.module import Module, save
from tpcore.nn.optim import Optimizer, Schedule, geometric

__all__ = [
    "Batch", "Batches", "StepContext", "TrainConfig", "TrainResult", "TrainState",
    "evaluate_supervised", "fit", "progress", "shuffled_batches", "supervised_step",
]

Batch = dict[str, Any]

@dataclass
class TrainConfig:
    """Settings of :func:`fit`.

    ``tau = (start, end)`` anneals a temperature geometrically per step over ``steps``.
    ``eval_at(step)`` (0-based), when given, says after which steps to evaluate instead of every
    ``eval_every``; the last step is always evaluated.
    ``select`` names the metric (from ``evaluate``) to maximise for model selection and early
    stopping; the best parameters (the latest among equals) are restored at the end.
    ``patience`` counts evaluations without improvement before stopping. ``checkpoint`` saves
    the best model there. ``threads``: BLAS threads while training (None:
    :func:`tpcore.cpu.default_threads`). ``pause_at``: stop after this many of the ``steps`` and
    return the paused state (:attr:`TrainResult.paused`) to resume from; nothing extra is
    evaluated there, so pause where an evaluation falls to know the selection at that point.
    ``pause_after_seconds``: the same at the first step (and its evaluation) that ends this
    many seconds of wall-clock time after the call began, for a run cut into sessions.
    ``flush_subnormals``: train with subnormal floats flushed to zero
    (:func:`tpcore.cpu.flush_subnormals`); None: when every parameter is float32 and
    ``TPCORE_SUBNORMALS`` is not ``keep``. ``cuda_graphs``: capture the steps as CUDA graphs
    (:mod:`tpcore.graphs`); None: on the CuPy backend with float32 parameters unless
    ``TPCORE_CUDA_GRAPHS=0``.
    """

    steps: int
    lr_schedule: Schedule | None = None
    tau: tuple[float, float] | None = None
    eval_every: int = 0
    eval_at: Callable[[int], bool] | None = None
    select: str | None = None
    patience: int | None = None
    grad_clip: float | None = None
    checkpoint: str | Path | None = None
    seed: int = 0
    quiet: bool = False
    desc: str = "train"
    threads: int | None = None
    pause_at: int | None = None
    pause_after_seconds: float | None = None
    flush_subnormals: bool | None = None
    cuda_graphs: bool | None = None


TENTHS = 10
"""A run's steps are timed in this many equal parts (:attr:`TrainResult.tenth_seconds`)."""


@dataclass
class TrainState:
    """A paused run: everything :func:`fit` needs to go on as if it had never stopped.

    ``step``: steps taken; ``params``/``best_params``: host copies of the model's parameters
    now and at the best evaluation (None before one); ``optimizer``:
    :meth:`tpcore.nn.optim.Optimizer.state_dict`; ``backend``: the backend it trained on (the
    noise of a step is drawn from :func:`tpcore.counter_rng.step_rng`, whose streams differ between
    backends, so a state resumes on its own backend only);
    ``best_score``/``stale``: the selection's best score and evaluations since it improved;
    ``history``/``best``/``last_loss``/``last_step``/``seconds``/``tenth_seconds``/
    ``tenth_steps``: as in :class:`TrainResult` (``last_step``: the step of ``last_loss``).
    """

    step: int
    params: dict[str, np.ndarray]
    optimizer: dict[str, Any]
    backend: str
    best_params: dict[str, np.ndarray] | None = None
    best_score: float = -math.inf
    stale: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    best: dict[str, float] = field(default_factory=dict)
    last_loss: float = float("nan")
    last_step: int = -1
    seconds: float = 0.0
    tenth_seconds: list[float] = field(default_factory=lambda: [0.0] * TENTHS)
    tenth_steps: list[int] = field(default_factory=lambda: [0] * TENTHS)


@dataclass
class TrainResult:
    """What :func:`fit` returns: per-evaluation history, best metrics, and timing (over all the
    sessions of a resumed run); ``paused``: the state to resume from when the run paused
    (``TrainConfig.pause_at``) before its last step, else None.

    ``tenth_seconds[k]``, ``tenth_steps[k]``: seconds spent in the timed training steps
    (forward, backward, update; evaluations left out) of the ``k``-th tenth of the run's steps,
    and how many they are, so that a step that gets slower as training goes on shows
    (:meth:`ms_per_step_by_tenth`). The first step of each call of :func:`fit` is not timed: it
    compiles or loads the kernels. ``cuda_graphs``: how the steps ran (:mod:`tpcore.graphs`).
    """

    history: list[dict[str, float]] = field(default_factory=list)
    best: dict[str, float] = field(default_factory=dict)
    steps: int = 0
    seconds: float = 0.0
    stopped_early: bool = False
    last_loss: float = float("nan")
    paused: TrainState | None = None
    tenth_seconds: list[float] = field(default_factory=lambda: [0.0] * TENTHS)
    tenth_steps: list[int] = field(default_factory=lambda: [0] * TENTHS)
    cuda_graphs: str = "eager"

    def ms_per_step_by_tenth(self) -> list[float | None]:
        """Mean milliseconds per timed training step in each tenth of the run (None for a tenth
        without one: the run stopped early, or has few steps)."""
        return [1000 * s / c if c else None for s, c in zip(self.tenth_seconds, self.tenth_steps)]


def progress(total: int, desc: str, quiet: bool) -> Any:
    """A tqdm bar on a terminal; where stderr is not one (a log file), a line at each tenth of
    the run (:class:`_LogLines`); a no-op object when quiet or tqdm is not installed (then with
    a note on stderr)."""
    if quiet:
        return _NoBar()
    if not sys.stderr.isatty():
        return _LogLines(total, desc)
    try:
        from tqdm import tqdm
    except ImportError:
        print("tpcore: note: tqdm is not installed, so there is no progress bar (pip install "
              "tqdm)", file=sys.stderr)
        return _NoBar()
    return tqdm(total=total, desc=desc, leave=False, dynamic_ncols=True)


class _LogLines:
    """Progress for a log: one line on stderr as each tenth of the run's steps is done, with the
    time spent and, at the pace since the first update (which a resumed run starts at its
    paused step), the time left."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self.done, self.postfix = total, desc, 0, ""
        self.began: tuple[float, int] | None = None
        self.tenth = 0

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.began is None:
            self.began = (time.perf_counter(), self.done)
            self.tenth = self.done * TENTHS // max(self.total, 1)
            return
        if self.done * TENTHS < (self.tenth + 1) * self.total:
            return
        self.tenth = self.done * TENTHS // self.total
        seconds = time.perf_counter() - self.began[0]
        left = seconds * (self.total - self.done) / max(self.done - self.began[1], 1)
        print(f"{self.desc}: step {self.done:,} of {self.total:,} ({100 * self.done // self.total} "
              f"%), {seconds:.0f} s, about {left:.0f} s to go{self.postfix}", file=sys.stderr,
              flush=True)

    def set_postfix(self, **kwargs: Any) -> None:
        self.postfix = "".join(f", {k} {v}" for k, v in kwargs.items())

    def close(self) -> None:
        pass


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass


Batches = Iterator[Batch] | Callable[[int], Iterator[Batch]]
"""The batches of a run: an iterator, or a function of the first step giving them from there
(what a resumed run needs; e.g. ``lambda start: shuffled_batches(data, 512, seed, start)``)."""


def fit(
    model: Module, optimizer: Optimizer, batches: Batches,
    step_fn: Callable[[Module, Batch, StepContext], float], config: TrainConfig,
    evaluate: Callable[[Module], dict[str, float]] | None = None,
    resume: TrainState | None = None,
) -> TrainResult:
    """Train ``model`` for ``config.steps`` steps and return a :class:`TrainResult`.

    Each step: set ``optimizer.lr`` from the schedule, compute ``tau``, zero gradients, run
    ``step_fn``, clip gradients, update. The losses are read every :data:`LOSS_EVERY` steps,
    before each evaluation and at the end; the first that is not finite raises
    :class:`TrainingDiverged` naming its step and the last finite loss. Every ``eval_every``
    steps (or after the steps ``eval_at`` picks) and at the end, run ``evaluate`` and keep the
    best parameters by ``config.select``; the history row of an evaluation is ``{"step": s,
    "train_loss": the step's training loss, **evaluate(model)}``. BLAS runs on
    ``config.threads`` threads, and subnormals are flushed as ``config.flush_subnormals`` says
    (:mod:`tpcore.cpu`).

    ``resume``: a paused run's state to go on from (its step onwards; the batches from that step:
    a function of it is called with it, an iterator is advanced past the batches used). With
    ``config.pause_at`` the run stops there and returns its state in ``paused``.
    """
    flush = config.flush_subnormals
    if flush is None:
        flush = flush_wanted() and all(p.data.dtype == np.float32 for p in model.parameters())
    with limit_threads(config.threads), flush_subnormals(flush):
        return _fit(model, optimizer, batches, step_fn, config, evaluate, resume)


def _fit(
    model: Module, optimizer: Optimizer, batches: Batches,
    step_fn: Callable[[Module, Batch, StepContext], float], config: TrainConfig,
    evaluate: Callable[[Module], dict[str, float]] | None, resume: TrainState | None,
) -> TrainResult:
    if config.steps < 1:
        raise TpcoreError(f"steps must be >= 1, got {config.steps}")
    if config.select is not None and evaluate is None:
        raise TpcoreError("model selection needs an evaluate function")
    if config.pause_at is not None and config.pause_at < 1:
        raise TpcoreError(f"pause_at must be >= 1, got {config.pause_at}")
    if config.pause_after_seconds is not None and not config.pause_after_seconds >= 0:
        raise TpcoreError(f"pause_after_seconds must be >= 0, got {config.pause_after_seconds}")
    tau_at = geometric(*config.tau, config.steps) if config.tau else None
    result = TrainResult()
    best_score, best_state, stale = -math.inf, None, 0
    last_finite, last_finite_step, first, before = float("nan"), -1, 0, 0.0
    if resume is not None:
        if resume.step > config.steps:
            raise TpcoreError(f"the paused state is at step {resume.step}, past this run's "
                              f"{config.steps} steps")
        if resume.backend != backend_name():
            raise TpcoreError(f"the paused state trained on the {resume.backend} backend, whose "
                              f"noise differs from the {backend_name()} backend's; resume it with "
                              f"--backend {resume.backend}")
        model.load_state_dict(_copy(resume.params))  # training updates them in place
        optimizer.load_state_dict(resume.optimizer)
        first, before = resume.step, resume.seconds
        best_score, stale = resume.best_score, resume.stale
        best_state = None if resume.best_params is None else _copy(resume.best_params)
        last_finite, last_finite_step = resume.last_loss, resume.last_step
        result.history, result.best = list(resume.history), dict(resume.best)
        result.tenth_seconds = list(resume.tenth_seconds)
        result.tenth_steps = list(resume.tenth_steps)
    if callable(batches):
        batches = batches(first)
    else:
        batches = itertools.islice(batches, first, None)
    end = config.steps if config.pause_at is None else min(config.pause_at, config.steps)
    bar = progress(config.steps, config.desc, config.quiet)
    bar.update(first)
    start = time.perf_counter()
    trained = first
    losses = _Losses(last_finite, last_finite_step)
    run = step_runner(model, optimizer, step_fn, config.seed, config.lr_schedule, tau_at,
                      config.grad_clip, first, end, config.cuda_graphs)
    try:
        with run.active():
            for step in range(first, end):
                if (config.pause_after_seconds is not None and step > first
                        and time.perf_counter() - start >= config.pause_after_seconds):
                    break
                began = time.perf_counter()
                losses.add(step, run(step, next(batches)))
                trained = step + 1
                if step > first:
                    tenth = step * TENTHS // config.steps
                    result.tenth_seconds[tenth] += time.perf_counter() - began
                    result.tenth_steps[tenth] += 1
                bar.update()
                if step % LOSS_EVERY == 0:
                    bar.set_postfix(loss=f"{losses.read():.4f}")
                done = step + 1 == config.steps
                due = (config.eval_at(step) if config.eval_at is not None
                       else config.eval_every and (step + 1) % config.eval_every == 0)
                if evaluate is not None and (due or done):
                    metrics = {"step": step + 1, "train_loss": losses.read(), **evaluate(model)}
                    result.history.append(metrics)
                    if config.select is None:
                        result.best = metrics
                        continue
                    score = metrics[config.select]
                    stale = 0 if score > best_score else stale + 1
                    if score >= best_score:  # on a tie the later model wins (e.g. lower tau)
                        best_score, result.best = score, metrics
                        best_state = model.state_dict()
                        if config.checkpoint:
                            save(model, config.checkpoint, {"metrics": metrics})
                    if config.patience is not None and stale >= config.patience:
                        result.stopped_early = True
                        break
            losses.read()
    finally:
        bar.close()
    result.steps, result.last_loss = trained, losses.last
    result.cuda_graphs = run.describe()
    result.seconds = before + time.perf_counter() - start
    if result.steps < config.steps and not result.stopped_early:
        result.paused = TrainState(
            step=result.steps, params=model.state_dict(), optimizer=optimizer.state_dict(),
            backend=backend_name(), best_params=best_state, best_score=best_score,
            stale=stale, history=list(result.history), best=dict(result.best),
            last_loss=losses.last, last_step=losses.last_step, seconds=result.seconds,
            tenth_seconds=list(result.tenth_seconds), tenth_steps=list(result.tenth_steps))
    if best_state is not None:
        model.load_state_dict(best_state)
    return result


LOSS_EVERY = 20
"""Training losses stay on the device and are read every this many steps (and before each
evaluation and at the end), so that no step waits for a GPU."""


class _Losses:
    """The losses of the steps since the last read, and the last finite one read."""

    def __init__(self, last: float, last_step: int):
        self.pending: list[tuple[int, Any]] = []
        self.last, self.last_step = last, last_step

    def add(self, step: int, loss: Any) -> None:
        self.pending.append((step, loss))

    def read(self) -> float:
        """Read the pending losses (one transfer), raise :class:`TrainingDiverged` at the first
        one that is not finite, and return the last."""
        if self.pending:
            values = _to_floats([loss for _, loss in self.pending])
            for (step, _), value in zip(self.pending, values):
                if not math.isfinite(value):
                    before = (f"last finite loss {self.last:.6g} at step {self.last_step}"
                              if self.last_step >= 0 else "no finite loss before it")
                    raise TrainingDiverged(f"loss became {value} at step {step}; {before}")
                self.last, self.last_step = value, step
            self.pending.clear()
        return self.last


def _to_floats(values: list[Any]) -> list[float]:
    """Python floats of host or device scalars, with one transfer from a device."""
    xp = xp_of(*values)
    if xp is np:
        return [float(v) for v in values]
    return to_host(xp.stack([xp.asarray(v, dtype=xp.float64) for v in values])).tolist()


def _copy(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: np.array(v) for k, v in arrays.items()}


def shuffled_batches(data: Batch, batch_size: int, seed: int = 0, start: int = 0,
                     device: bool = True) -> Iterator[Batch]:
    """Endless minibatches of the host arrays in ``data`` (all with the same first dimension),
    reshuffled every epoch (``n // min(batch_size, n)`` batches of ``n`` rows; the remainder of
    an epoch's order is left out), on the active backend (``device=False``: on the host, for
    batches transformed there first). ``start``: begin with batch ``start`` of that sequence, as
    a resumed run does (the orders before it are drawn, not batched).

    The arrays go to the device once and each epoch's order once, and batches are gathered
    there: a copy from the host's pageable memory waits for the device, so one per batch would
    make every step wait."""
    n = len(next(iter(data.values())))
    if batch_size < 1:
        raise TpcoreError(f"batch_size must be >= 1, got {batch_size}")
    if start < 0:
        raise TpcoreError(f"start must be >= 0, got {start}")
    size = min(batch_size, n)
    per_epoch = n // size
    order_rng = np.random.default_rng(seed)
    for _ in range(start // per_epoch):
        order_rng.permutation(n)
    skip = start % per_epoch
    if device:
        data = {k: asarray(v) for k, v in data.items()}
    while True:
        order = order_rng.permutation(n)
        if device:
            order = asarray(order)
        for i in range(skip * size, per_epoch * size, size):
            idx = order[i : i + batch_size]
            yield {k: v[idx] for k, v in data.items()}
        skip = 0


def supervised_step(
    model: Module, batch: Batch, ctx: StepContext, reduction: str = "token_mean",
    clip: float | None = None, **forward_kwargs: Any,
) -> Any:
    """Cross-entropy step for batches with ``tokens`` and ``targets`` (and optional ``mask`` of
    positions that carry a loss, ``pad`` of padding tokens)."""
    logits = model.forward(batch["tokens"], pad=batch.get("pad"), **forward_kwargs)
    loss, cache = cross_entropy_forward(logits, batch["targets"], batch.get("mask"),
                                        reduction=reduction, clip=clip)
    model.backward(cross_entropy_backward(cache))
    return loss


def evaluate_supervised(
    model: Module, data: Batch, batch_size: int = 4096, **forward_kwargs: Any
) -> dict[str, float]:
    """Loss, token accuracy and sequence exact-match accuracy over all of ``data`` (host arrays,
    deterministic forward)."""
    n = len(data["tokens"])
    loss = hits = total = seq_hits = 0.0
    for i in range(0, n, batch_size):
        part = {k: asarray(v[i : i + batch_size]) for k, v in data.items()}
        logits = model.forward(part["tokens"], pad=part.get("pad"), **forward_kwargs)
        mask = part.get("mask")
        count = float(mask.sum()) if mask is not None else float(part["targets"].size)
        l_part, _ = cross_entropy_forward(logits, part["targets"], mask)
        loss += float(l_part) * count
        hits += token_accuracy(logits, part["targets"], mask) * count
        total += count
        seq_hits += sequence_accuracy(logits, part["targets"], mask) * len(part["tokens"])
    return {"loss": loss / max(total, 1.0), "acc": hits / max(total, 1.0), "seq_acc": seq_hits / n}

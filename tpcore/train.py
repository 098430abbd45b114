"""The one training loop: batches, schedules, progress bar, evaluation, model selection,
checkpoints, early stopping and divergence checks, shared by every model.

A model plugs in through a *step function* ``step_fn(model, batch, ctx) -> loss`` that runs the
forward and the backward (filling ``Parameter.grad``) and returns the loss as a float, and an
optional *evaluate* function ``evaluate(model) -> dict`` of metrics. :func:`supervised_step` and
:func:`evaluate_supervised` serve models whose ``forward(tokens, ...)`` returns logits and whose
``backward(dlogits)`` accumulates gradients.

Training runs with NumPy's BLAS limited to :func:`default_threads` threads (``TPCORE_THREADS``,
else 1) unless :attr:`TrainConfig.threads` says otherwise, whether it starts from the CLI or
from Python; the previous count is restored afterwards (:func:`limit_threads`).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.backend import asarray, blas_threads
from tpcore.backend import rng as make_rng
from tpcore.errors import TpcoreError, TrainingDiverged
from tpcore.nn.losses import (
    cross_entropy_backward,
    cross_entropy_forward,
    sequence_accuracy,
    token_accuracy,
)
from tpcore.nn.module import Module, save
from tpcore.nn.optim import Optimizer, Schedule, clip_grad_norm, geometric

Batch = dict[str, Any]

THREADS_VARIABLE = "TPCORE_THREADS"
"""Environment variable: BLAS threads of training when none are asked for."""


def default_threads() -> int:
    """BLAS threads of training when none are asked for: ``TPCORE_THREADS`` when set, else 1.

    The matrix products of these small models are tiny; on shared cores a multi-threaded BLAS
    spends its time waiting for the other threads, so one thread is the default. Change the
    default here.
    """
    text = os.environ.get(THREADS_VARIABLE, "").strip()
    if not text:
        return 1
    if not text.isdigit() or int(text) < 1:
        raise TpcoreError(f"{THREADS_VARIABLE}={text!r}; expected an integer >= 1")
    return int(text)


@contextmanager
def limit_threads(n: int | None = None) -> Iterator[None]:
    """Run the block with NumPy's BLAS limited to ``n`` threads (:func:`default_threads` when
    None), restoring the previous count afterwards (a no-op where no OpenBLAS is loaded)."""
    n = default_threads() if n is None else n
    if n < 1:
        raise TpcoreError(f"threads must be >= 1, got {n}")
    before = blas_threads(n)
    try:
        yield
    finally:
        if before is not None:
            blas_threads(before)


@dataclass
class StepContext:
    """What a step function may need besides the batch: the step index, the Gumbel temperature
    ``tau`` (None when no temperature schedule is set) and a generator for noise and dropout."""

    step: int
    tau: float | None
    rng: Any


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
    :func:`default_threads`).
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


@dataclass
class TrainResult:
    """What :func:`fit` returns: per-evaluation history, best metrics, and timing."""

    history: list[dict[str, float]] = field(default_factory=list)
    best: dict[str, float] = field(default_factory=dict)
    steps: int = 0
    seconds: float = 0.0
    stopped_early: bool = False
    last_loss: float = float("nan")


def progress(total: int, desc: str, quiet: bool) -> Any:
    """A tqdm bar on a terminal; a no-op object when quiet, not a terminal, or tqdm is not
    installed (then with a note on stderr)."""
    if quiet or not sys.stderr.isatty():
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:
        print("tpcore: note: tqdm is not installed, so there is no progress bar (pip install "
              "tqdm)", file=sys.stderr)
        return _NoBar()
    return tqdm(total=total, desc=desc, leave=False, dynamic_ncols=True)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass


def fit(
    model: Module, optimizer: Optimizer, batches: Iterator[Batch],
    step_fn: Callable[[Module, Batch, StepContext], float], config: TrainConfig,
    evaluate: Callable[[Module], dict[str, float]] | None = None,
) -> TrainResult:
    """Train ``model`` for ``config.steps`` steps and return a :class:`TrainResult`.

    Each step: set ``optimizer.lr`` from the schedule, compute ``tau``, zero gradients, run
    ``step_fn``, check the loss is finite (else :class:`TrainingDiverged` naming the step and the
    last finite loss), clip gradients, update. Every ``eval_every`` steps (or after the steps
    ``eval_at`` picks) and at the end, run ``evaluate`` and keep the best parameters by
    ``config.select``. BLAS runs on ``config.threads`` threads (:func:`limit_threads`).
    """
    with limit_threads(config.threads):
        return _fit(model, optimizer, batches, step_fn, config, evaluate)


def _fit(
    model: Module, optimizer: Optimizer, batches: Iterator[Batch],
    step_fn: Callable[[Module, Batch, StepContext], float], config: TrainConfig,
    evaluate: Callable[[Module], dict[str, float]] | None,
) -> TrainResult:
    if config.steps < 1:
        raise TpcoreError(f"steps must be >= 1, got {config.steps}")
    if config.select is not None and evaluate is None:
        raise TpcoreError("model selection needs an evaluate function")
    rng = make_rng(config.seed)
    tau_at = geometric(*config.tau, config.steps) if config.tau else None
    result = TrainResult()
    best_score, best_state, stale = -math.inf, None, 0
    last_finite, last_finite_step = float("nan"), -1
    bar = progress(config.steps, config.desc, config.quiet)
    start = time.perf_counter()
    try:
        for step in range(config.steps):
            if config.lr_schedule is not None:
                optimizer.lr = config.lr_schedule(step)
            ctx = StepContext(step, tau_at(step) if tau_at else None, rng)
            optimizer.zero_grad()
            loss = float(step_fn(model, next(batches), ctx))
            if not math.isfinite(loss):
                raise TrainingDiverged(
                    f"loss became {loss} at step {step}; last finite loss {last_finite:.6g} "
                    f"at step {last_finite_step}"
                )
            last_finite, last_finite_step = loss, step
            if config.grad_clip:
                clip_grad_norm(optimizer.params, config.grad_clip)
            optimizer.step()
            bar.update()
            if step % 20 == 0:
                bar.set_postfix(loss=f"{loss:.4f}")
            done = step + 1 == config.steps
            due = (config.eval_at(step) if config.eval_at is not None
                   else config.eval_every and (step + 1) % config.eval_every == 0)
            if evaluate is not None and (due or done):
                metrics = {"step": step + 1, "loss": loss, **evaluate(model)}
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
    finally:
        bar.close()
    result.steps, result.last_loss = step + 1, last_finite
    result.seconds = time.perf_counter() - start
    if best_state is not None:
        model.load_state_dict(best_state)
    return result


def shuffled_batches(data: Batch, batch_size: int, seed: int = 0) -> Iterator[Batch]:
    """Endless minibatches of the host arrays in ``data`` (all with the same first dimension),
    reshuffled every epoch, moved to the active backend."""
    n = len(next(iter(data.values())))
    if batch_size < 1:
        raise TpcoreError(f"batch_size must be >= 1, got {batch_size}")
    order_rng = np.random.default_rng(seed)
    while True:
        order = order_rng.permutation(n)
        for i in range(0, n - min(batch_size, n) + 1, min(batch_size, n)):
            idx = order[i : i + batch_size]
            yield {k: asarray(v[idx]) for k, v in data.items()}


def supervised_step(
    model: Module, batch: Batch, ctx: StepContext, reduction: str = "token_mean",
    clip: float | None = None, **forward_kwargs: Any,
) -> float:
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
        loss += l_part * count
        hits += token_accuracy(logits, part["targets"], mask) * count
        total += count
        seq_hits += sequence_accuracy(logits, part["targets"], mask) * len(part["tokens"])
    return {"loss": loss / max(total, 1.0), "acc": hits / max(total, 1.0), "seq_acc": seq_hits / n}

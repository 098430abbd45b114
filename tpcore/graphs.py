"""Training steps, eagerly or captured as CUDA graphs (one launch a step instead of hundreds).

At the papers' sizes a GPU training step is bound by the host: Python issues a few hundred small
kernels, each taking longer to queue than to run. A CUDA graph records the step's kernels once
and replays them with one launch. :func:`step_runner` gives :func:`tpcore.train.fit` (and the
benches) a callable ``run(step, batch) -> loss`` that runs one whole training step: the
learning rate and temperature of ``step``, zeroed gradients, the step function, gradient
clipping and the optimiser's update. :class:`EagerSteps` runs it as written,
:class:`DeviceSteps` with its per-step values on the device (point 1, on any backend: the CPU
tests it against the eager step), and :class:`GraphSteps` captures that on a GPU:

1. **Everything that changes between steps lives on the device**, so that one recorded step
   serves them all: a 0-d step counter that the graph increments; the learning rate and the
   Gumbel temperature, read by that counter from tables of the whole run; the optimiser's step
   count (:class:`tpcore.nn.optim.Optimizer` computes from a 0-d ``t``); and the noise, drawn
   by :class:`tpcore.counter_rng.CounterRng` from the seed and the device step.
2. **Products run on the graph's own cuBLAS handle** (:func:`tpcore.backend.on_handle`), which
   CUDA can capture and CuPy's cannot.
3. **Memory** of the step comes from a pool of its own, which the warm-up step fills and the
   capture reuses; nothing outside the graph allocates from it, so no replay overwrites an
   array that someone else holds. The batch is copied into the graph's input buffers before
   each launch, and the loss out of its output buffer after.
4. **The first step runs eagerly** through the same code (compiling kernels, filling the pool),
   the second is captured, then replayed from there on; a graph computes exactly what the
   eager step computes. A batch of another shape runs eagerly. A capture that fails (a host
   conversion or a copy from the host in a step) falls back to eager steps for the rest of the
   run, and :attr:`GraphSteps.fallback` says why and where.

Graphs are used on the CuPy backend when every parameter is float32, unless
``TPCORE_CUDA_GRAPHS=0`` (:func:`graphs_wanted`); ``tpcore info`` reports it.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.backend import backend_name, get_xp, no_host_sync, on_gpu, on_handle, to_host, xp_of
from tpcore.counter_rng import step_rng
from tpcore.errors import TpcoreError
from tpcore.nn.optim import Optimizer, Schedule, clip_grad_norm


@dataclass
class StepContext:
    """What a step function may need besides the batch: the step index, the Gumbel temperature
    ``tau`` (None when no temperature schedule is set) and the step's generator for noise and
    dropout (:func:`tpcore.counter_rng.step_rng` of the run's seed and the step). In a step captured
    as a CUDA graph, ``step`` and ``tau`` are 0-d device arrays."""

    step: int
    tau: float | None
    rng: Any


GRAPHS_VARIABLE = "TPCORE_CUDA_GRAPHS"
"""Environment variable: ``0`` runs GPU training steps eagerly."""


def graphs_wanted() -> bool:
    """Whether GPU training steps are captured as CUDA graphs (``TPCORE_CUDA_GRAPHS`` is not
    ``0``; the backend must be CuPy and the parameters float32 besides)."""
    return os.environ.get(GRAPHS_VARIABLE, "1").strip() != "0"


def graphs_status() -> str:
    """One line for ``tpcore info``: how training steps run on the active backend."""
    if backend_name() != "cupy":
        return "steps run eagerly (CUDA graphs need the cupy backend)"
    if not graphs_wanted():
        return f"off ({GRAPHS_VARIABLE}=0): GPU steps launch eagerly"
    return "on: float32 GPU training steps are captured as CUDA graphs and replayed"


class EagerSteps:
    """One training step per call, as written: ``run(step, batch)`` sets the optimiser's learning
    rate from ``lr_at``, builds the step's context (temperature ``tau_at(step)``, noise
    generator of ``(seed, step)``), zeroes the gradients, runs ``step_fn``, clips the gradients
    to ``grad_clip`` and updates; it returns the loss without waiting for a GPU."""

    fallback: str | None = None

    def __init__(self, model: Any, optimizer: Optimizer, step_fn: Callable, seed: int,
                 lr_at: Schedule | None, tau_at: Schedule | None, grad_clip: float | None):
        self.model, self.optimizer, self.step_fn = model, optimizer, step_fn
        self.seed, self.lr_at, self.tau_at, self.grad_clip = seed, lr_at, tau_at, grad_clip

    def __call__(self, step: int, batch: dict[str, Any]) -> Any:
        if self.lr_at is not None:
            self.optimizer.lr = self.lr_at(step)
        ctx = StepContext(step, self.tau_at(step) if self.tau_at else None,
                          step_rng(self.seed, step))
        return self._body(batch, ctx)

    def _body(self, batch: dict[str, Any], ctx: Any) -> Any:
        with no_host_sync():
            self.optimizer.zero_grad()
            loss = self.step_fn(self.model, batch, ctx)
            if self.grad_clip:
                clip_grad_norm(self.optimizer.params, self.grad_clip)
            self.optimizer.step()
        return loss

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The context the training loop runs in (evaluations included)."""
        yield

    def describe(self) -> str:
        """How the steps ran, for the run's record: ``eager`` or ``captured``, with the reason
        when a capture failed."""
        return "eager"


class DeviceSteps(EagerSteps):
    """:class:`EagerSteps` with every per-step value on the device (point 1 of the module's
    notes), run eagerly on any backend: the step of a captured graph, and on the CPU its test.
    ``first`` is the step the run starts at and ``end`` the step it stops before. Inside
    :meth:`active`, the optimiser's ``lr`` and ``t`` are 0-d arrays; afterwards numbers again."""

    def __init__(self, model: Any, optimizer: Optimizer, step_fn: Callable, seed: int,
                 lr_at: Schedule | None, tau_at: Schedule | None, grad_clip: float | None,
                 first: int, end: int):
        super().__init__(model, optimizer, step_fn, seed, lr_at, tau_at, grad_clip)
        self.first, self.next_step, self.end = first, first, end
        self.xp = xp_of(*(p.data for p in optimizer.params)) if optimizer.params else get_xp()

    def _on_device(self) -> None:
        """Put the step counter, the tables and the optimiser's ``lr`` and ``t`` on the device."""
        xp, end = self.xp, max(self.end, self.next_step + 1)
        self.step_dev = xp.full((), self.next_step, dtype=np.int64)
        self.lr = self.tau = None
        if self.lr_at is not None:
            self.lr_table = xp.asarray(np.array([self.lr_at(s) for s in range(end)], np.float64))
            self.lr = xp.zeros((), dtype=np.float64)
        if self.tau_at is not None:
            self.tau_table = xp.asarray(np.array([self.tau_at(s) for s in range(end)],
                                                 np.float32))
            self.tau = xp.zeros((), dtype=np.float32)
        self.host_lr = self.optimizer.lr
        self.optimizer.t = xp.full((), self.optimizer.t, dtype=np.float64)

    def _to_host(self) -> None:
        """The optimiser's ``lr`` and ``t`` as numbers again (waits for the device)."""
        self.optimizer.t = int(to_host(self.optimizer.t))
        last = self.next_step - 1
        self.optimizer.lr = (self.lr_at(last) if self.lr_at is not None and last >= self.first
                             else self.host_lr)

    def _device_body(self, batch: dict[str, Any]) -> Any:
        """The step with every per-step value read on the device (what a capture records)."""
        xp = self.xp
        if self.lr is not None:
            self.lr[...] = xp.take(self.lr_table, self.step_dev)
            self.optimizer.lr = self.lr
        if self.tau is not None:
            self.tau[...] = xp.take(self.tau_table, self.step_dev)
        ctx = StepContext(self.step_dev, self.tau, step_rng(self.seed, self.step_dev, xp))
        loss = self._body(batch, ctx)
        self.step_dev += 1
        return loss

    def _advance(self, step: int) -> None:
        if step != self.next_step:
            raise TpcoreError(f"steps with device values run in order: expected step "
                              f"{self.next_step}, got {step}")
        self.next_step += 1

    def __call__(self, step: int, batch: dict[str, Any]) -> Any:
        self._advance(step)
        return self._device_body(batch)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        self._on_device()
        try:
            yield
        finally:
            self._to_host()


class GraphSteps(DeviceSteps):
    """:class:`DeviceSteps` captured as a CUDA graph on a stream of its own (see the module's
    notes)."""

    def __init__(self, *args: Any) -> None:
        import cupy

        from tpcore.kernels.cublas import Blas

        super().__init__(*args)
        self.cp = cupy
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.pool = cupy.cuda.MemoryPool()
        self.blas = Blas(self.stream)
        self.warm = False
        self.graph = self.inputs = self.loss = None

    def describe(self) -> str:
        if self.fallback is not None:
            return f"eager (the capture failed: {self.fallback})"
        return "captured" if self.graph is not None else "eager (no step to capture)"

    def _shaped(self, batch: dict[str, Any]) -> bool:
        """Whether ``batch`` fits the captured graph's input buffers."""
        return self.inputs is not None and batch.keys() == self.inputs.keys() and all(
            batch[k].shape == self.inputs[k].shape and batch[k].dtype == self.inputs[k].dtype
            for k in batch)

    def __call__(self, step: int, batch: dict[str, Any]) -> Any:
        self._advance(step)
        if self.graph is not None and self._shaped(batch):
            for k, v in batch.items():
                self.inputs[k][...] = v
            self.graph.launch(self.stream)
            return _copy(self.loss)
        if self.fallback is not None:  # eager from here on, as if never captured
            return EagerSteps.__call__(self, step, batch)
        if self.graph is not None:
            return self._eager(batch)
        if not self.warm:
            self.warm = True
            with self.cp.cuda.using_allocator(self.pool.malloc), on_handle(self.blas):
                return self._device_body(batch)
        return self._capture(step, batch)

    def _eager(self, batch: dict[str, Any]) -> Any:
        """A step outside the graph (another batch shape, or after a failed capture): the same
        code, on the default memory pool."""
        with on_handle(self.blas):
            return self._device_body(batch)

    def _capture(self, step: int, batch: dict[str, Any]) -> Any:
        """Record the step on the graph's stream, then launch it for this batch."""
        cp = self.cp
        self.inputs = {k: v.copy() for k, v in batch.items()}
        with cp.cuda.using_allocator(self.pool.malloc), on_handle(self.blas):
            self.stream.begin_capture()  # CuPy's default mode, relaxed: the pool may allocate
            try:
                loss = self._device_body(self.inputs)
            except Exception as exc:  # what stopped the capture is the reason to report
                with contextlib.suppress(Exception):  # a capture the error invalidated
                    self.stream.end_capture()
                self.fallback = f"{type(exc).__name__}: {exc} ({_where(exc)})"
                self.inputs = None
            else:
                self.graph = self.stream.end_capture()
        if self.graph is None:  # nothing recorded ran: the step is still to do, eagerly
            self._to_host()
            return EagerSteps.__call__(self, step, batch)
        self.loss = loss
        self.graph.launch(self.stream)
        return _copy(self.loss)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Run the training loop on the graph's stream, so that the evaluations between steps
        follow the updates in order."""
        with self.stream:
            try:
                self._on_device()
                yield
            finally:
                self.stream.synchronize()
                self._to_host()


def _where(exc: BaseException) -> str:
    """The line of tpcore's own code that raised ``exc`` (the innermost), and the library's line
    below it when the error came from a library: where a capture failed."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if f"{os.sep}tpcore{os.sep}" in f.filename
            and not f.filename.endswith(f"{os.sep}graphs.py")]
    places = [f"{Path(f.filename).name}:{f.lineno}" for f in ours[-1:]]
    if frames and (not ours or frames[-1] is not ours[-1]):
        places.append(f"{Path(frames[-1].filename).name}:{frames[-1].lineno}")
    return " via ".join(places) or "unknown place"


def _copy(loss: Any) -> Any:
    """A copy of a replayed graph's loss (its output buffer is overwritten by the next replay);
    a number as it is."""
    return loss.copy() if hasattr(loss, "copy") else loss


def step_runner(model: Any, optimizer: Optimizer, step_fn: Callable, seed: int = 0,
                lr_at: Schedule | None = None, tau_at: Schedule | None = None,
                grad_clip: float | None = None, first: int = 0, end: int = 1,
                graphs: bool | None = None) -> EagerSteps:
    """The runner of a training loop over steps ``first .. end - 1`` (see the module's notes):
    a :class:`GraphSteps` when the parameters are CuPy arrays and ``graphs`` is True, or None
    with every parameter float32 and :func:`graphs_wanted`; an :class:`EagerSteps` otherwise."""
    if graphs is None:
        graphs = graphs_wanted() and all(p.data.dtype == np.float32 for p in optimizer.params)
    if graphs and optimizer.params and on_gpu(optimizer.params[0].data):
        return GraphSteps(model, optimizer, step_fn, seed, lr_at, tau_at, grad_clip, first, end)
    return EagerSteps(model, optimizer, step_fn, seed, lr_at, tau_at, grad_clip)

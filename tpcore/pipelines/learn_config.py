"""The settings of a learn run: :class:`LearnConfig`, its bounds and its checks.

A :class:`LearnConfig` is what a run directory records (:meth:`LearnConfig.settings`) and what a
record is read back into (:meth:`LearnConfig.from_json`), so its fields are part of the format of
committed results. :meth:`LearnConfig.check` refuses settings that cannot work before any work;
the model's own sizes are checked by :class:`~tpcore.models.program.ProgramConfig`, whose
memory estimate the run's is built on (:meth:`LearnConfig.memory_estimate`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tpcore.errors import TpcoreError, unknown_name
from tpcore.limits import check_memory
from tpcore.models.counting import variant_flags
from tpcore.models.init_from import MAX_STRENGTH, STRENGTH, parse_parts
from tpcore.models.program import ProgramConfig
from tpcore.tasks.registry import DEFAULTS, task_name

__all__ = ["EVAL_BATCH", "LR_SCHEDULES", "MAX_GUMBEL_SAMPLES", "MAX_SAMPLES", "MIN_SAMPLES",
           "LearnConfig", "json_kind"]

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
    validation goes on alone (:func:`~tpcore.pipelines.learn.pick_candidate`); ``grad_clip``:
    largest global L2 norm of a step's gradient, larger ones scaled down to it (0: no
    clipping); ``lr_schedule``: ``constant`` (the paper's) or ``cosine``,
    ``lr * (1 + cos(pi * step / steps)) / 2``; ``gate_tau``: the read gates' temperature as a
    multiple of ``tau`` (:class:`~tpcore.models.program.ProgramConfig`); ``grow``: categorical
    heads per layer of a wider model trained first, whose program is cut down to
    ``n_cat_heads`` heads per layer to start this one (0: none;
    :func:`~tpcore.pipelines.learn.grow_then_prune`)."""

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
            raise TpcoreError(f"{where}: config is {json_kind(data)}; expected an object")
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
        (:meth:`memory_estimate`, :func:`tpcore.limits.check_memory`). The model's sizes
        (layers, heads, MLPs, ``d_mlp``) and ``gate_tau`` are checked by building its
        :class:`ProgramConfig` (:meth:`program_config`), which words the refusal."""
        for name in ("epochs", "batch_size", "samples"):
            if getattr(self, name) < 1:
                raise TpcoreError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("eval_every", "vocab_size", "max_len", "seed", "data_seed", "grow"):
            if getattr(self, name) < 0:
                raise TpcoreError(f"{name} must be >= 0, got {getattr(self, name)}")
        self.program_config()  # the model's sizes and gate_tau, as ProgramConfig checks them
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

    def program_config(self) -> ProgramConfig:
        """The :class:`ProgramConfig` of this run's model as the settings size it, before the
        task's data exists: the task's default sizes in place of 0 (:meth:`task_size`) and a
        classifier as wide as the stream (``n_classes = max(|V|, N)``, a bound). Building it
        checks the model's sizes; the model a run trains is built for its data
        (:func:`tpcore.pipelines.learn.build_model`)."""
        V, N = self.task_size()
        return ProgramConfig(
            vocab_size=V, max_len=N, n_classes=max(V, N), n_layers=self.n_layers,
            n_cat_heads=self.n_cat_heads, n_num_heads=self.n_num_heads,
            n_cat_mlps=self.n_cat_mlps, n_num_mlps=self.n_num_mlps, d_mlp=self.d_mlp,
            init_std=self.init_std, seed=self.seed, gate_tau=self.gate_tau)

    def memory_estimate(self) -> int:
        """Bytes of the largest arrays a run allocates (float32; a bound, not a measurement:
        ``learn sort``'s defaults give 231 MiB, its measured peak is 217 MiB): the model's
        (:meth:`ProgramConfig.memory_estimate` of :meth:`program_config`) at the larger of the
        training batch and the evaluation batch (at most ``n_samples``), and the generated
        data, ``64 + 2|V|`` bytes per token (drawn rows, labels, counts)."""
        V, N = self.task_size()
        batch = min(max(self.batch_size, EVAL_BATCH), self.n_samples)
        return (self.program_config().memory_estimate(batch)
                + self.n_samples * N * (64 + 2 * V))


def json_kind(value: Any) -> str:
    """What a JSON value is, in words (``an object``, ``a list``, ...), for error messages."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")

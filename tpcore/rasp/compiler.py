"""``compile``: a written program -> a Transformer Program model computing it, checked; and
``verify``: the program run five ways on every input of its domain (or a stated sample).

:func:`compile` lays the program out (:mod:`tpcore.rasp.lower`), writes the weights
(:mod:`tpcore.rasp.weights`) and runs :func:`verify` with the quick engines on up to
:data:`CHECK_INPUTS` inputs, so a miscompilation cannot pass silently; :func:`verify` with
every engine is the full check.

Engines: ``written`` (the written program's interpreter, :mod:`tpcore.rasp.evaluate`, the
reference), ``model`` (the compiled model's discrete forward pass), ``numpy`` and ``numba`` (the
IR's array reference and kernel, :mod:`tpcore.programs.interpret`) and ``generated`` (the IR's
generated Python program, run in a child process). Each is compared with the reference at every
position of every input.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tpcore.backend import asarray, to_host
from tpcore.errors import TpcoreError
from tpcore.models.program import ProgramModel
from tpcore.programs.examples import all_inputs, input_count, sample_inputs
from tpcore.programs.generated import run_generated
from tpcore.programs.interpret import encode, run_ids
from tpcore.programs.ir import Program as IR
from tpcore.rasp import lang, lower
from tpcore.rasp.evaluate import predictions
from tpcore.rasp.weights import MARGIN, build

ENGINES = ("written", "model", "numpy", "numba", "generated")
QUICK = ("written", "model", "numpy")
"""The engines :func:`compile` checks with (no kernel compilation, no child process)."""
CHECK_INPUTS = 1_000
"""Inputs :func:`compile` checks: all of them when there are no more, else this many random."""
BATCH = 256
"""Inputs per model forward: the discrete forward pass is bound by memory traffic, and a few
hundred inputs keep a batch's stream near the processor's caches (the 11-layer most-freq model
checks 8,000 inputs 2-3 times faster in batches of 128-256 than of 4,096)."""


@dataclass
class Compiled:
    """A compiled program: the written ``program``, its ``ir`` in the model's names, the
    ``model``, where each node went (``placed``: node name -> model module), the seconds
    building them took (``seconds``) and the check :func:`compile` ran (``check``)."""

    program: lang.Program
    ir: IR
    model: ProgramModel
    placed: dict[str, str]
    seconds: float = 0.0
    check: Verification | None = None

    def placed_nodes(self) -> dict[lang.Node, str]:
        """Each module node of the program -> its model module."""
        return {n: self.placed[n.name] for n in self.program.nodes if n.name in self.placed}


@dataclass
class Verification:
    """How each engine agreed with the written program's interpreter: ``inputs`` checked of
    ``domain`` (``exhaustive`` when all), and per engine the inputs it agrees on at every
    position (``agree``) and its first disagreement (``first``, None when none)."""

    inputs: int
    domain: int
    exhaustive: bool
    agree: dict[str, int] = field(default_factory=dict)
    first: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(a == self.inputs for a in self.agree.values())

    def summary(self) -> str:
        """One line: inputs and each engine's agreement."""
        what = (f"all {self.inputs:,} inputs" if self.exhaustive
                else f"{self.inputs:,} random inputs of {self.domain:,}")
        return what + ": " + ", ".join(f"{e} {a:,}" for e, a in self.agree.items())


def compile(program: lang.Program, layers: int | None = None, dtype: str = "float32",  # noqa: A001
            check: int = CHECK_INPUTS, seed: int = 0, margin: float = MARGIN) -> Compiled:
    """The model computing ``program`` (module docstring) with ``layers`` layers (None: as many
    as it needs; fewer than it needs raises, naming the chain of modules that needs them), each
    choice by a logit ``margin`` (:mod:`tpcore.rasp.weights`), checked on ``check`` inputs
    (``0``: not checked); raises naming the first disagreement if the check fails."""
    start = time.perf_counter()
    placed = lower.assign(program, layers)
    lay = lower.layout(program, placed, layers)
    ir = lower.to_ir(program, placed)
    model = build(ir, lay, dtype, seed, margin)
    out = Compiled(program, ir, model, {n.name: p.name for n, p in placed.items()},
                   time.perf_counter() - start)
    if check:
        out.check = verify(out, QUICK, exhaustive=check, sample=check, seed=seed)
        if not out.check.ok:
            bad = next(e for e, f in out.check.first.items() if f is not None)
            raise TpcoreError(f"miscompiled {program.name!r}: the {bad} engine disagrees with "
                              f"the written program: {out.check.first[bad]}")
    return out


def domain(ir: IR, exhaustive: int, sample: int, seed: int) -> tuple[list[list[str]], int, bool]:
    """The inputs to check: every framed input when there are at most ``exhaustive``, else
    ``sample`` random ones; with the domain's size and whether it is all of it."""
    count = input_count(ir)
    if count <= exhaustive:
        return list(all_inputs(ir)), count, True
    return sample_inputs(ir, sample, seed), count, False


def verify(compiled: Compiled, engines: Sequence[str] = ENGINES, exhaustive: int = 400_000,
           sample: int = 20_000, seed: int = 0) -> Verification:
    """Run ``engines`` on the inputs of :func:`domain` and compare each with the written
    program's interpreter at every position (module docstring)."""
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        raise TpcoreError(f"unknown engine {unknown[0]!r}; expected some of {ENGINES}")
    ir = compiled.ir
    sequences, size, everything = domain(ir, exhaustive, sample, seed)
    ids, lengths = encode(ir, sequences)
    valid = np.arange(ids.shape[1])[None, :] < lengths[:, None]
    want = predictions(compiled.program, ids, lengths)
    result = Verification(len(sequences), size, everything)
    labels = list(ir.classifier.classes)
    for engine in engines:
        start = time.perf_counter()
        got = run_engine(engine, compiled, ids, lengths, sequences, labels)
        result.seconds[engine] = time.perf_counter() - start
        wrong = ((got != want) & valid).any(axis=1)
        result.agree[engine] = int((~wrong).sum())
        result.first[engine] = None
        if wrong.any():
            b = int(np.flatnonzero(wrong)[0])
            i = int(np.flatnonzero((got[b] != want[b]) & valid[b])[0])
            result.first[engine] = {"input": sequences[b], "position": i,
                                    "expected": labels[want[b, i]],
                                    "got": labels[got[b, i]] if got[b, i] >= 0 else None}
    return result


def run_engine(engine: str, compiled: Compiled, ids: np.ndarray, lengths: np.ndarray,
               sequences: list[list[str]], labels: list[str]) -> np.ndarray:
    """Class indices ``(B, N)`` of one engine."""
    if engine == "written":
        return predictions(compiled.program, ids, lengths)
    if engine == "model":
        pad = np.arange(ids.shape[1])[None, :] >= lengths[:, None]
        out = [np.asarray(to_host(compiled.model.forward(asarray(ids[i:i + BATCH]),
                                                         asarray(pad[i:i + BATCH]))
                                  .argmax(axis=-1)))
               for i in range(0, len(ids), BATCH)]
        return np.concatenate(out)
    if engine in ("numpy", "numba"):
        return np.asarray(to_host(run_ids(compiled.ir, ids, lengths, engine)))
    index = {label: c for c, label in enumerate(labels)}
    got = np.full(ids.shape, -1)
    for b, pred in enumerate(run_generated(compiled.ir, sequences)):
        got[b, : len(pred)] = [index.get(y, -1) for y in pred]
    return got

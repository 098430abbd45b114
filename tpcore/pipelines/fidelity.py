"""Fidelity: how often a decompiled program predicts what its discrete model predicts.

A program is run by an engine: ``numpy`` (the array reference), ``numba`` (the kernel) or
``generated`` (its generated Python program, in a child process). Per engine, the agreement is
the fraction of target positions (``mask``) where the program's prediction equals the model's;
for a sequence classifier (a model giving one prediction per sequence, as
:class:`tpcore.models.pooled.MeanPooled` does) it is the fraction of sequences where the
mean-pooled classifier logits of the program's NumPy reference pick the model's class.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpcore.backend import asarray, to_host
from tpcore.errors import TpcoreError
from tpcore.models.pooled import pool_weights
from tpcore.nn.module import Module
from tpcore.programs.generated import run_generated
from tpcore.programs.interpret import ENGINES as INTERPRETERS
from tpcore.programs.interpret import evaluate, feature_logits, run_ids
from tpcore.programs.ir import Program

ENGINES = (*INTERPRETERS, "generated")
BATCH = 1024
"""Sequences per model forward (bounds peak memory)."""


def model_predictions(model: Module, split: dict[str, np.ndarray]) -> np.ndarray:
    """The discrete model's predictions on ``split`` (``tokens``, ``pad``: ``(S, N)``) as a host
    array: ``(S, N)`` per position, or ``(S,)`` for a sequence classifier."""
    out = []
    for i in range(0, len(split["tokens"]), BATCH):
        logits = model.forward(asarray(split["tokens"][i:i + BATCH]),
                               asarray(split["pad"][i:i + BATCH]))
        out.append(np.asarray(to_host(logits.argmax(axis=-1))))
    return np.concatenate(out)


def agreement(model: Module, program: Program, split: dict[str, np.ndarray],
              engines: Sequence[str] = ENGINES, n_generated: int | None = None,
              timeout: float = 1800.0) -> dict[str, Any]:
    """``{engine: agreement}`` of ``program`` with the discrete ``model`` on ``split``
    (``tokens``, ``pad``, ``mask``: ``(S, N)``) for each of ``engines`` (see the module
    docstring). The generated program runs on the first ``n_generated`` sequences (all when
    None) and must answer within ``timeout`` seconds; it adds ``generated_sequences``, their
    number. A sequence classifier is compared on the ``numpy`` engine only."""
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        raise TpcoreError(f"unknown engine {unknown[0]!r}; expected some of {ENGINES}")
    want = model_predictions(model, split)
    tokens, pad = split["tokens"], split["pad"]
    lengths = (~pad).sum(axis=1)
    if want.ndim == 1:
        if tuple(engines) != ("numpy",):
            raise TpcoreError("a sequence classifier's program is compared on the numpy "
                              f"engine only, not {list(engines)}")
        logits = np.asarray(to_host(feature_logits(program, evaluate(program, tokens, lengths))))
        w = pool_weights(pad, tokens.shape, np, np.float64)
        got = (logits * w[..., None]).sum(axis=1).argmax(axis=-1)
        return {"numpy": float((got == want).mean())}
    mask = split["mask"]
    out: dict[str, Any] = {}
    for engine in engines:
        if engine != "generated":
            got = np.asarray(to_host(run_ids(program, tokens, lengths, engine)))
            out[engine] = float((got[mask] == want[mask]).mean())
            continue
        n = len(tokens) if n_generated is None else min(n_generated, len(tokens))
        vocab = program.tokens.values
        preds = run_generated(program, [[vocab[i] for i in tokens[b, : lengths[b]]]
                                        for b in range(n)], timeout)
        labels = program.output_labels()
        hits = total = 0
        for b, pred in enumerate(preds):
            for i in np.flatnonzero(mask[b]):
                hits += pred[i] == labels[want[b, i]]
                total += 1
        out["generated"] = hits / max(total, 1)
        out["generated_sequences"] = n
    return out

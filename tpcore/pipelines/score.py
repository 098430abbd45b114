"""A program's accuracy on a generated task, whatever made it (extracted, generated or
imported). Host-only code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.pipelines.learn import MAX_SAMPLES, MIN_SAMPLES
from tpcore.programs.interpret import run_ids
from tpcore.programs.ir import Program
from tpcore.tasks.data import TaskData
from tpcore.tasks.registry import make_task, special_tokens


def evaluate_on_task(program: Program, task: str, split: str = "test", n_samples: int = 20000,
                     seed: int = 0, engine: str = "numba") -> dict[str, Any]:
    """Token and exact-match sequence accuracy of ``program`` on a split of ``task`` generated
    at the program's size (its content symbols plus the task's special tokens, its whole
    length) from ``n_samples`` and ``seed``. To score a learn run's program on the data it was
    trained on, give that data to :func:`evaluate_on_data` (``tpcore.Run.evaluate`` does).
    ``n_samples`` is bounded as a learn run's (:data:`~tpcore.pipelines.learn.MAX_SAMPLES`)."""
    if type(n_samples) is not int or not MIN_SAMPLES <= n_samples <= MAX_SAMPLES:
        raise TpcoreError(f"n_samples {n_samples!r:.20}: expected an integer {MIN_SAMPLES} (to "
                          f"split 80/10/10 with no split empty) .. {MAX_SAMPLES:,}")
    framing = {program.bos, program.eos, program.pad} - {None}
    content = [t for t in program.tokens.values if t not in framing]
    data = make_task(task, vocab_size=len(content) + len(special_tokens(task)),
                     max_len=program.max_len, n_samples=n_samples, seed=seed)
    return evaluate_on_data(program, data, split, engine)


def evaluate_on_data(program: Program, data: TaskData, split: str = "test",
                     engine: str = "numba") -> dict[str, Any]:
    """Token and exact-match sequence accuracy of ``program`` on ``data.splits[split]``; tokens
    and classes are matched by their strings, so imported programs work too."""
    if split not in data.splits:
        raise TpcoreError(f"unknown split {split!r}; expected one of {list(data.splits)}")
    s = data.splits[split]
    missing = [t for t in data.vocab if t not in program.tokens.values]
    if missing:
        raise TpcoreError(f"task {data.name} uses tokens {missing} that the program does not know")
    to_prog = np.asarray([program.tokens.values.index(t) for t in data.vocab])
    ids = to_prog[s["tokens"]]
    lengths = (~s["pad"]).sum(axis=1)
    pred = np.asarray(run_ids(program, ids, lengths, engine))
    labels = np.asarray(program.output_labels() + ("",), dtype=object)
    got = labels[pred]
    want = np.asarray(data.classes, dtype=object)[s["targets"]]
    mask = s["mask"]
    hit = (got == want) | ~mask
    return {"task": data.name, "split": split, "sequences": int(len(ids)),
            "tokens": int(mask.sum()), "token_accuracy": float(hit[mask].mean()),
            "sequence_accuracy": float(hit.all(axis=1).mean())}

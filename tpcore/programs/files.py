"""Open a program from whatever holds it, and score it on a task.

``load_program(path)`` accepts a saved IR (``.json``), a program file (``.py``, tpcore-generated
or in the published format, imported without running it), a saved model (``.npz``, extracted
with the vocabulary and classes of the ``.json`` beside it, as ``tpcore reproduce counting``
saves them), or a run directory written by ``tpcore learn`` (its ``program.json``, else its
``model.npz``, else the one program file in it or in its ``program/`` folder).
``evaluate_on_task`` scores a program on a generated task; ``agreement`` checks that a model,
both interpreter engines and the generated program (run in a child process) agree on a split,
``fidelity`` does so for a run's model on its test split. Host-only code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.programs.ir import Program


def load_program(path: str | Path) -> Program:
    """The program stored at ``path`` (see the module docstring for what is accepted)."""
    from tpcore.programs import ir, parse

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if path.is_dir():
        return _from_run_dir(path)
    if path.suffix == ".json":
        return ir.load(path)
    if path.suffix == ".py":
        return parse.parse_file(path)
    if path.suffix == ".npz":
        return _from_model(path)
    raise TpcoreError(f"{path}: expected a run directory, a .json or .py program or a saved "
                      "model (.npz)")


def _from_run_dir(path: Path) -> Program:
    from tpcore.programs import ir, parse

    if (path / "program.json").exists():
        return ir.load(path / "program.json")
    if (path / "model.npz").exists() and (path / "model.json").exists():
        return _from_model(path / "model.npz")
    files = sorted(p for d in (path, path / "program") if d.is_dir() for p in d.glob("*.py"))
    if len(files) == 1:
        return parse.parse_file(files[0])
    raise TpcoreError(f"{path}: no program.json, model.npz or single program file found")


def _from_model(path: Path) -> Program:
    """Extract the program of the model saved at ``path`` (``.npz``, beside its ``.json``). Both
    are bounded by ``LIMITS.file_bytes`` (the ``.npz`` by its arrays' bytes, read from their
    headers before any array is loaded)."""
    import tpcore.models.counting  # noqa: F401  (registers the program models for load)
    import tpcore.models.program  # noqa: F401
    from tpcore.models.extract import extract
    from tpcore.nn.module import load
    from tpcore.programs.ir import LIMITS, check_label, check_size, read_limited

    meta_path = path.with_suffix(".json")
    if not meta_path.is_file():
        raise TpcoreError(f"{path}: no {meta_path.name} beside it to name the program's values")
    try:
        meta = json.loads(read_limited(meta_path, "model description"))
    except (ValueError, RecursionError) as exc:
        raise TpcoreError(f"{meta_path}: not JSON ({str(exc)[:200]})") from None
    extra = meta.get("extra", meta) if isinstance(meta, dict) else None
    if not (isinstance(extra, dict) and isinstance(extra.get("vocab"), list)
            and isinstance(extra.get("classes"), list)):
        raise TpcoreError(f"{meta_path}: no vocab/classes to name the program's values")
    vocab, classes = extra["vocab"], extra["classes"]
    try:
        check_size(len(vocab), LIMITS.vocabulary, "vocabulary")
        check_size(len(classes), LIMITS.classes, "classes")
        for x in vocab + classes:
            if not isinstance(check_label(x, "vocab/classes"), str):
                raise TpcoreError(f"vocab/classes: {x!r} is not a string")
    except TpcoreError as exc:
        raise TpcoreError(f"{meta_path}: {exc}") from None
    _check_arrays(path)
    return extract(load(path), vocab, classes, name=str(extra.get("task", "program")),
                   bos="<s>" if "<s>" in vocab else None,
                   eos="</s>" if "</s>" in vocab else None,
                   pad="<pad>" if "<pad>" in vocab else None)


def _check_arrays(path: Path) -> None:
    """Raise unless ``path`` is an ``.npz`` of numeric arrays of at most ``LIMITS.file_bytes``
    bytes together, as their ``.npy`` headers say (nothing is loaded)."""
    from tpcore.io import npz_array_bytes
    from tpcore.programs.ir import LIMITS

    try:
        total = npz_array_bytes(path)
    except ValueError as exc:
        raise TpcoreError(f"{path}: not a saved model ({exc})") from None
    if total > LIMITS.file_bytes:
        raise TpcoreError(f"{path}: arrays of {total:,} bytes exceed the limit of "
                          f"{LIMITS.file_bytes:,}")


def evaluate_on_task(program: Program, task: str, split: str = "test", n_samples: int = 20000,
                     seed: int = 0, engine: str = "numba") -> dict[str, Any]:
    """Token and exact-match sequence accuracy of ``program`` on a generated task split.

    The task is generated at the program's size (its content symbols plus the task's special
    tokens, its whole length); tokens and classes are matched by their strings, so imported
    programs work too.
    """
    from tpcore.programs.interpret import run_ids
    from tpcore.tasks.registry import make_task, special_tokens

    framing = {program.bos, program.eos, program.pad} - {None}
    content = [t for t in program.tokens.values if t not in framing]
    data = make_task(task, vocab_size=len(content) + len(special_tokens(task)),
                     max_len=program.max_len, n_samples=n_samples, seed=seed)
    if split not in data.splits:
        raise TpcoreError(f"unknown split {split!r}; expected one of {list(data.splits)}")
    s = data.splits[split]
    missing = [t for t in data.vocab if t not in program.tokens.values]
    if missing:
        raise TpcoreError(f"task {task} uses tokens {missing} that the program does not know")
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


def fidelity(run_dir: str | Path, n_program: int | None = None) -> dict[str, Any]:
    """:func:`agreement` of a ``tpcore learn`` run's discrete model and its ``program.json`` on
    its test split."""
    import tpcore.models.counting  # noqa: F401  (registers the program models for load)
    from tpcore.models.program_train import LearnConfig, make_data
    from tpcore.nn.module import load
    from tpcore.programs import ir

    run_dir = Path(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    task = make_data(LearnConfig(**metrics["config"]))
    return agreement(load(run_dir / "model.npz"), ir.load(run_dir / "program.json"),
                     task.splits["test"], n_program)


def agreement(model: Any, program: Program, split: dict[str, np.ndarray],
              n_program: int | None = None, timeout: float = 1800.0) -> dict[str, Any]:
    """Agreement on ``split`` (``tokens``, ``pad``, ``mask: (B, N)``) between the discrete
    ``model`` and ``program`` run by the NumPy reference, by the numba kernel and as its
    generated Python program (on the first ``n_program`` sequences, all when None), at every
    target position.

    The generated program runs in a child Python process (:data:`DRIVER`), never in this one,
    and must answer within ``timeout`` seconds. Returns the fraction of target positions where
    each engine equals the model, and counts.
    """
    from tpcore.programs.interpret import run_ids

    tokens, mask = split["tokens"], split["mask"]
    lengths = (~split["pad"]).sum(axis=1)
    want = np.asarray(model.forward(tokens, split["pad"]).argmax(-1))
    out: dict[str, Any] = {"positions": int(mask.sum()), "sequences": int(len(tokens))}
    for engine in ("numpy", "numba"):
        got = np.asarray(run_ids(program, tokens, lengths, engine))
        out[engine] = float((got[mask] == want[mask]).mean())
    n = len(tokens) if n_program is None else min(n_program, len(tokens))
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


DRIVER = """
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generated import run

for line in sys.stdin:
    print(json.dumps(run(json.loads(line))))
"""
"""Runs the generated program ``generated.py`` beside it on one JSON list of tokens per input
line, printing its predictions as one JSON list per line."""


def run_generated(program: Program, sequences: list[list[str]],
                  timeout: float = 1800.0) -> list[list[str]]:
    """Predictions of ``program``'s generated Python program (:func:`tpcore.programs.codegen.
    write`) for each sequence, computed by a child ``python -I`` process in a temporary folder
    within ``timeout`` seconds."""
    import subprocess
    import sys
    import tempfile

    from tpcore.programs import codegen

    with tempfile.TemporaryDirectory() as tmp:
        codegen.write(program, Path(tmp) / "generated.py")
        (Path(tmp) / "driver.py").write_text(DRIVER.lstrip("\n"), encoding="utf-8")
        lines = "".join(json.dumps(s) + "\n" for s in sequences)
        try:
            done = subprocess.run([sys.executable, "-I", str(Path(tmp) / "driver.py")],
                                  input=lines, capture_output=True, text=True, cwd=tmp,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TpcoreError(f"the generated program of {program.name!r} did not finish "
                              f"{len(sequences)} sequences within {timeout:g} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise TpcoreError(f"the generated program of {program.name!r} failed: {last[:300]}")
    preds = [json.loads(line) for line in done.stdout.splitlines()]
    if len(preds) != len(sequences):
        raise TpcoreError(f"the generated program of {program.name!r} answered {len(preds)} of "
                          f"{len(sequences)} sequences")
    return preds

"""A trained or saved Transformer Program -> its program files.

:func:`decompile` extracts a trained model's program (:func:`tpcore.models.extract.extract`)
and writes ``program.json`` and the readable ``program/<task>.py`` with its weights CSV.
:func:`load_program` opens a program from whatever holds it: what
:func:`tpcore.programs.files.read_program` reads, a saved model (``.npz``, extracted with the
vocabulary and classes of the ``.json`` beside it, as ``tpcore reproduce counting`` saves them),
or a run directory with no ``program.json`` but its ``model.npz``. Host-only code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tpcore.errors import TpcoreError
from tpcore.io import npz_array_bytes
from tpcore.models import load
from tpcore.models.extract import extract
from tpcore.models.program import ProgramModel
from tpcore.pipelines.fidelity import agreement
from tpcore.programs import ir
from tpcore.programs.files import read_program
from tpcore.programs.ir import LIMITS, Program, check_label, check_size, read_limited
from tpcore.programs.source import writer
from tpcore.tasks.data import TaskData

__all__ = ["decompile", "extract_saved", "load_program"]


def decompile(model: ProgramModel, task: TaskData, out: Path) -> dict[str, Any]:
    """Extract the program, write ``program.json`` and ``program/<task>.py`` (+ weights CSV)
    into ``out``, and measure its agreement with the discrete model on the test split (the NumPy
    reference, :func:`tpcore.pipelines.fidelity.agreement`)."""
    prog = extract(model, task)
    ir.save(prog, out / "program.json")
    py, _ = writer.write(prog, out / "program" / f"{task.name}.py")
    fidelity = agreement(model, prog, task.splits["test"], engines=("numpy",))["numpy"]
    return {"path": str(py), "lines": len(py.read_text().splitlines()), "fidelity": fidelity}


def load_program(path: str | Path) -> Program:
    """The program stored at ``path`` (see the module docstring for what is accepted)."""
    path = Path(path)
    if path.suffix == ".npz":
        return extract_saved(path)
    if (path.is_dir() and not (path / "program.json").exists()
            and (path / "model.npz").exists() and (path / "model.json").exists()):
        return extract_saved(path / "model.npz")
    return read_program(path)


def extract_saved(path: Path) -> Program:
    """Extract the program of the model saved at ``path`` (``.npz``, beside its ``.json``). Both
    are bounded by ``LIMITS.file_bytes`` (the ``.npz`` by its arrays' bytes, read from their
    headers before any array is loaded)."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
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
    try:
        return extract(load(path), vocab, classes, name=str(extra.get("task", "program")),
                       bos="<s>" if "<s>" in vocab else None,
                       eos="</s>" if "</s>" in vocab else None,
                       pad="<pad>" if "<pad>" in vocab else None)
    except TpcoreError as exc:  # e.g. a table past the limits: name the model
        raise TpcoreError(f"{path}: {exc}") from None


def _check_arrays(path: Path) -> None:
    """Raise unless ``path`` is an ``.npz`` of numeric arrays of at most ``LIMITS.file_bytes``
    bytes together, as their ``.npy`` headers say (nothing is loaded)."""
    try:
        total = npz_array_bytes(path)
    except ValueError as exc:
        raise TpcoreError(f"{path}: not a saved model ({exc})") from None
    if total > LIMITS.file_bytes:
        raise TpcoreError(f"{path}: arrays of {total:,} bytes exceed the limit of "
                          f"{LIMITS.file_bytes:,}")

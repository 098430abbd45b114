"""Read a program from the files that hold it: a saved IR (``.json``), a program file (``.py``,
tpcore-generated or in the published format, imported without running it), or a run directory
written by ``tpcore learn`` (its ``program.json``, else the one program file in it or in its
``program/`` folder). A saved model is read, and extracted, by
:func:`tpcore.pipelines.decompile.load_program`. Host-only code.
"""

from __future__ import annotations

from pathlib import Path

from tpcore.errors import TpcoreError
from tpcore.programs import ir
from tpcore.programs.ir import Program
from tpcore.programs.source import reader


def read_program(path: str | Path) -> Program:
    """The program stored at ``path`` (see the module docstring for what is accepted)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if path.is_dir():
        if (path / "program.json").exists():
            return ir.load(path / "program.json")
        files = sorted(p for d in (path, path / "program") if d.is_dir() for p in d.glob("*.py"))
        if len(files) == 1:
            return reader.parse_file(files[0])
        raise TpcoreError(f"{path}: no program.json, model.npz or single program file found")
    if path.suffix == ".json":
        return ir.load(path)
    if path.suffix == ".py":
        return reader.parse_file(path)
    raise TpcoreError(f"{path}: expected a run directory, a .json or .py program or a saved "
                      "model (.npz)")

"""Run a program file on token sequences in a child ``python -I`` process, never in this one.

:func:`run_generated` writes a program (:func:`tpcore.programs.source.writer.write`, either
style) to a temporary folder and runs it; :func:`run_file` runs an existing program file, such
as one in the authors' published format (which needs pandas, and reads its weights CSV from a
path relative to its working directory ``cwd``). A small driver loads the file's ``run`` with its
printing silenced (a published file prints its examples when loaded); the sequences go in as
JSON lines and the predictions come back the same way. Host-only code (standard library).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tpcore.errors import TpcoreError
from tpcore.programs.ir import Program
from tpcore.programs.source import writer

DRIVER = """
import contextlib
import io
import json
import runpy
import sys

with contextlib.redirect_stdout(io.StringIO()):
    run = runpy.run_path(sys.argv[1], run_name="program")["run"]
for line in sys.stdin:
    print(json.dumps([str(y) for y in run(json.loads(line))]))
"""
"""Loads the program file named by its argument and prints its ``run``'s predictions, as one
JSON list of strings per JSON list of tokens read from each input line."""


def run_file(path: str | Path, sequences: list[list[str]], timeout: float = 1800.0,
             cwd: str | Path | None = None, what: str | None = None) -> list[list[str]]:
    """Predictions of the program file ``path``'s ``run`` for each sequence, computed by a
    child ``python -I`` process in the folder ``cwd`` (default: the file's own) within
    ``timeout`` seconds. ``what`` names the program in errors (default: the path)."""
    path = Path(path).resolve()
    what = what or str(path)
    with tempfile.TemporaryDirectory() as tmp:
        driver = Path(tmp) / "driver.py"
        driver.write_text(DRIVER.lstrip("\n"), encoding="utf-8")
        lines = "".join(json.dumps(s) + "\n" for s in sequences)
        try:
            done = subprocess.run([sys.executable, "-I", str(driver), str(path)], input=lines,
                                  capture_output=True, text=True, cwd=cwd or path.parent,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TpcoreError(f"{what} did not finish {len(sequences)} sequences within "
                              f"{timeout:g} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise TpcoreError(f"{what} failed: {last[:300]}")
    preds = [json.loads(line) for line in done.stdout.splitlines()]
    if len(preds) != len(sequences):
        raise TpcoreError(f"{what} answered {len(preds)} of {len(sequences)} sequences")
    return preds


def run_generated(program: Program, sequences: list[list[str]], timeout: float = 1800.0,
                  style: str = "tpcore") -> list[list[str]]:
    """Predictions of ``program``'s generated Python program in ``style`` (the ``published``
    one needs pandas) for each sequence, run by :func:`run_file` in a temporary folder."""
    with tempfile.TemporaryDirectory() as tmp:
        path, _ = writer.write(program, Path(tmp) / "generated.py", style=style)
        return run_file(path, sequences, timeout, what=f"the generated program of "
                                                       f"{program.name!r}")

"""Run a generated program (:func:`tpcore.programs.codegen.write`) on token sequences in a
child ``python -I`` process, never in this one: the program and a small driver are written to a
temporary folder, the sequences go in as JSON lines and the predictions come back the same way.
Host-only code (standard library).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tpcore.errors import TpcoreError
from tpcore.programs import codegen
from tpcore.programs.ir import Program

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

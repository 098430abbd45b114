"""Every script in examples/ runs to the end (each checks its own results with asserts), in a
fresh folder, as a reader would run it: ``python examples/NAME.py``."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))
TIMEOUT = 120
"""Seconds one example may take (each takes a few on an idle core)."""
NEEDS = {"lens": "transformer_lens"}
"""Examples that need an optional package (an extra CI does not install), by that package."""


def test_there_is_an_example_per_capability():
    assert {p.stem for p in EXAMPLES} >= {"programs", "hooks", "sorting", "counting", "looped",
                                          "trees", "bp_vs_transformer", "gradient"}


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path, tmp_path):
    package = NEEDS.get(path.stem)
    if package and importlib.util.find_spec(package) is None:
        pytest.skip(f"needs {package} (pip install 'tpcore[{path.stem}]')")
    text = path.read_text(encoding="utf-8")
    assert text.startswith('"""') and "# %%" in text, "a docstring, then cells marked # %%"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=TIMEOUT, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip()

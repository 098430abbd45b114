"""Generated programs: standalone, <= 88-character lines, same predictions as the interpreter."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.programs import interpret as it
from tpcore.programs.examples import random_inputs, random_program, reverse_program
from tpcore.programs.source import writer

pytestmark = pytest.mark.host_only(
    "code generation; the generated programs run in child processes on host data")


@pytest.mark.parametrize("seed, compress", [(0, True), (1, True), (2, False), (3, True)])
def test_generated_program_matches_interpreter(tmp_path, seed, compress, load_generated,
                                               as_labels, as_tokens):
    p = random_program(seed, causal=seed == 1)
    path, csv_path = writer.write(p, tmp_path, compress=compress)
    assert path.name == f"{p.name}.py" and csv_path.exists()
    text = path.read_text()
    assert max(len(line) for line in text.splitlines()) <= 88
    assert "import pandas" not in text and "numpy" not in text
    module = load_generated(path)
    ids, lengths = random_inputs(p, 150, seed)
    want = as_labels(p, it.run_ids(p, ids, lengths, "numba"), lengths)
    got = [module.run(seq) for seq in as_tokens(p, ids, lengths)]
    assert got == want


def test_command_line_run(tmp_path):
    path, _ = writer.write(reverse_program(), tmp_path)
    out = subprocess.run([sys.executable, str(path), "3", "1", "4", "2"], capture_output=True,
                         text=True, check=True, cwd=tmp_path.parent)
    assert out.stdout.split() == ["2", "4", "1", "3"]  # the content positions
    bad = subprocess.run([sys.executable, str(path), "3", "x"], capture_output=True, text=True)
    assert bad.returncode != 0 and "'x'" in bad.stderr


def test_paper_style_and_compression():
    p = reverse_program()
    pruned = writer.source(p)
    full = writer.source(p, compress=False)
    # the first head maps every query token to "</s>": one merged branch when compressed
    assert pruned.count('return k_token == "</s>"') == 1
    assert full.count('return k_token == "</s>"') == len(p.tokens.values)
    # the unreachable <pad> query is dropped when compressed
    assert '"<pad>"' not in pruned.split("def predicate_0_0")[1].split("attn_0_0_pattern")[0]
    counts = writer.line_counts(p)
    assert counts["pruned"] < counts["full"]
    assert "def mlp_0_0(attn_0_0_output, position):" in pruned
    assert "return 0\n" in pruned  # most common output of the length - position table


def test_mlp_reading_one_variable_twice_gets_one_argument():
    p = random_program(5)
    m = next(m for m in p.modules if hasattr(m, "table"))
    m.inputs = (m.inputs[0], m.inputs[0])
    size = p.variables[m.inputs[0]].size
    m.table = np.arange(size * size, dtype=np.int64).reshape(size, size) % 5
    text = writer.source(p)
    assert f"def {m.name}({m.inputs[0][:-1]}):" in text


def test_published_style_needs_the_published_rule():
    with pytest.raises(TpcoreError, match="published"):
        writer.source(reverse_program(rule="closest"), style="published")
    text = writer.source(reverse_program(rule="published"), style="published")
    assert "import pandas as pd" in text and "classifier_weights.loc" in text

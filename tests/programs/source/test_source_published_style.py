"""Programs written in the authors' published format (``writer.write(..., style="published")``):
the importer reads them back to the same predictions on every input, and, where pandas is
installed, they run in a child process from any working directory."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

from tpcore.programs.examples import (
    all_inputs,
    input_count,
    random_program,
    reverse_program,
    sample_inputs,
)
from tpcore.programs.generated import run_generated
from tpcore.programs.interpret import predict
from tpcore.programs.ir import Classifier, Program
from tpcore.programs.source import grammar, library, reader, writer

PANDAS = importlib.util.find_spec("pandas") is not None
NEEDS_PANDAS = pytest.mark.skipif(not PANDAS, reason="pandas (not a tpcore dependency) is not "
                                                     "installed: published programs need it to run")


def _biased_reverse() -> Program:
    """The reverse program with a nonzero classifier bias and ``ones`` not a feature: the
    published format has no bias, so the bias goes into a ``ones`` feature of its own."""
    p = reverse_program(vocab=3, max_len=6, rule="published")
    c = p.classifier
    bias = np.linspace(-0.4, 0.4, len(c.classes))
    p.classifier = Classifier(c.classes, c.features, c.weights, bias)
    return p


PROGRAMS = {
    "random": lambda: random_program(0, vocab=3, max_len=6, rule="published"),
    "random-causal": lambda: random_program(1, vocab=3, max_len=6, rule="published", causal=True),
    "biased-reverse": _biased_reverse,
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_published_export_imports_back_to_the_same_predictions_on_every_input(tmp_path, name):
    p = PROGRAMS[name]()
    path, _ = writer.write(p, tmp_path, style="published")
    q = reader.parse_file(path)
    assert q.meta["format"] == "published" and q.causal == p.causal
    inputs = list(all_inputs(p))
    assert len(inputs) == input_count(p) == 3 + 9 + 27 + 81
    assert predict(q, inputs, "numpy") == predict(p, inputs, "numpy")


def test_published_export_has_the_authors_layout(tmp_path):
    p = _biased_reverse()
    path, csv = writer.write(p, tmp_path, style="published")
    text = path.read_text()
    for helper in library.published_helpers(causal=False).values():
        assert helper.strip("\n") in text
    assert text.startswith("import os\n\nimport numpy as np\nimport pandas as pd\n")
    beside = library.weights_beside('"reverse_weights.csv"')
    assert f"        {beside},\n" in text
    assert "one_scores," in text  # the bias's feature
    assert text.endswith(library.PUBLISHED_EXAMPLES.lstrip("\n"))
    rows = {tuple(line.split(",")[:2]) for line in csv.read_text().splitlines()[1:]}
    for var in p.variables.values():  # every variable has rows: the program looks them all up
        labels = var.values if var.kind == "categorical" else ["_"]
        assert {(var.name, str(x)) for x in labels} <= rows


def test_a_weights_path_outside_the_folder_is_refused(tmp_path):
    path, _ = writer.write(_biased_reverse(), tmp_path, style="published")
    text = path.read_text().replace('"reverse_weights.csv"', '"/etc/passwd"')
    path.write_text(text)
    with pytest.raises(grammar.ProgramSyntaxError, match="must be a file name"):
        reader.parse_file(path)


@NEEDS_PANDAS
@pytest.mark.parametrize("name", PROGRAMS)
def test_published_export_runs_in_a_child_process(name):
    p = PROGRAMS[name]()
    inputs = sample_inputs(p, 40, seed=1)
    assert run_generated(p, inputs, style="published") == predict(p, inputs, "numpy")


@NEEDS_PANDAS
def test_published_export_runs_from_any_working_directory(tmp_path):
    p = _biased_reverse()
    path, _ = writer.write(p, tmp_path / "out", style="published")
    done = subprocess.run([sys.executable, "-I", str(path)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].replace("y: ", "y_hat: ") == lines[2]  # the example's y is what it predicts

"""The reproductions' figures: drawn from the committed results JSON of each reproduction that
has them, written beside the tables by ``tpcore reproduce``, and skipped with a one-line note
when matplotlib is missing (the tables are written all the same)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tpcore.analysis.plots import draw_or_note
from tpcore.cli import main
from tpcore.commands.plot import FIGURES
from tpcore.experiments import counting

REPO = Path(__file__).resolve().parents[2]
RESULTS = {"looped": ("results/looped/looped.json", ["looped_lambda.png"]),
           "fleq": ("results/fleq/fleq.json", ["fleq_errors.png", "fleq_claims.png"]),
           "hierarchy": ("results/hierarchy/hierarchy_small.json",
                         ["hierarchy_small_accuracy.png", "hierarchy_small_kl.png"]),
           "counting": ("results/counting_small/counting.json", ["counting.png"])}


def test_every_reproduction_with_figures_has_a_committed_example():
    assert set(FIGURES) == set(RESULTS) | {"table1", "table3"}  # table3 draws as table1 does


def test_table1_draws_the_selected_runs_curves(tmp_path):
    pytest.importorskip("matplotlib")
    result = json.loads((REPO / "results/table1/table1.json").read_text())
    row = result["tasks"][0]
    run = Path("runs") / row["task"] / row["selected"]["run"]
    (tmp_path / run).mkdir(parents=True)
    (tmp_path / run / "metrics.json").write_bytes(
        (REPO / "results/table1" / run / "metrics.json").read_bytes())
    # only the runs whose metrics are there
    assert FIGURES["table1"].figures(result, tmp_path) == [tmp_path / run / "curves.png"]
    assert (tmp_path / run / "curves.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("name", sorted(RESULTS))
def test_figures_from_committed_results(name, tmp_path):
    pytest.importorskip("matplotlib")
    path, expected = RESULTS[name]
    result = json.loads((REPO / path).read_text())
    files = FIGURES[name].figures(result, tmp_path)
    assert [f.name for f in files] == expected
    assert all(f.read_bytes().startswith(b"\x89PNG") and f.stat().st_size > 5000 for f in files)


def test_counting_figure_marks_cells_not_run(tmp_path):
    pytest.importorskip("matplotlib")
    cell = {"task": "hist", "regime": "base", "variant": "prefix", "test": {"acc": 0.5}}
    result = {"budget": "smoke", "epochs": 2, "cells": [cell]}
    assert counting.figures(result, tmp_path) == [tmp_path / "counting.png"]
    assert counting.figures({**result, "cells": []}, tmp_path / "none") == []


def test_draw_or_note_without_matplotlib(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert draw_or_note(lambda: pytest.fail("drawn without matplotlib")) == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'tpcore[plot]'" in err


@pytest.mark.parametrize("matplotlib", [True, False])
def test_reproduce_writes_figures_beside_its_tables(matplotlib, monkeypatch, tmp_path, capsys):
    if matplotlib:
        pytest.importorskip("matplotlib")
    else:
        monkeypatch.setitem(sys.modules, "matplotlib", None)
    args = ["reproduce", "counting", "--budget", "smoke", "--variants", "none", "--lengthgen",
            "--out", str(tmp_path)]
    assert main(args) == 0
    assert (tmp_path / "counting.md").is_file()
    assert (tmp_path / "counting.png").is_file() == matplotlib
    assert ("no figures were drawn" in capsys.readouterr().err) != matplotlib

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
from tpcore.io import read_text

REPO = Path(__file__).resolve().parents[2]
RESULTS = {"looped": ("results/looped/looped.json", ["looped_lambda.png"]),
           "fleq": ("results/fleq/fleq.json", ["fleq_errors.png", "fleq_claims.png"]),
           "hierarchy": ("results/hierarchy/hierarchy_small.json.gz",
                         ["hierarchy_small_accuracy.png", "hierarchy_small_kl.png",
                          "hierarchy_small_k_test.png", "hierarchy_small_attention.png",
                          "hierarchy_small_mlm_attention.png", "hierarchy_small_sizes.png",
                          "hierarchy_small_in_sample.png",
                          "hierarchy_small_layers.png", "hierarchy_small_grammars.png",
                          "hierarchy_small_probe_k.png"]),
           "counting": ("results/counting_small/counting.json",
                        ["counting.png", "counting_modules.png", "counting_routing.png"]),
           "fig10": ("results/fig10/fig10.json", ["fig10.png"])}


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
    result = json.loads(read_text(REPO / path, "results"))
    files = FIGURES[name].figures(result, tmp_path)
    assert [f.name for f in files] == expected
    assert all(f.read_bytes().startswith(b"\x89PNG") and f.stat().st_size > 5000 for f in files)


def test_counting_figure_marks_cells_not_run(tmp_path):
    pytest.importorskip("matplotlib")
    cell = {"task": "hist", "regime": "base", "variant": "prefix", "test": {"acc": 0.5}}
    result = {"budget": "smoke", "epochs": 2, "cells": [cell]}
    assert counting.figures(result, tmp_path) == [tmp_path / "counting.png",
                                                  tmp_path / "counting_modules.png"]
    assert counting.figures({**result, "cells": []}, tmp_path / "none") == []


def _drawn(monkeypatch) -> list:
    """The figures :mod:`tpcore.experiments.counting_figures` saves, kept open to be read."""
    from tpcore.experiments import counting_figures

    figs = []
    monkeypatch.setattr(counting_figures, "save_png", lambda fig, path: figs.append(fig) or path)
    return figs


def _cell(task, regime, variant, acc, usage=None):
    return {"task": task, "regime": regime, "variant": variant, "test": {"acc": acc},
            **({"gate_usage": usage} if usage else {})}


def test_counting_modules_figure_draws_only_runs_there(monkeypatch, tmp_path):
    """A bar per run, nothing for variants not run (marked), and the count in the title: hist
    base ties the base (at or above), sort base is not finished."""
    pytest.importorskip("matplotlib")
    from tpcore.experiments.counting import PAPER_ACC
    from tpcore.experiments.counting_figures import modules_figure

    figs = _drawn(monkeypatch)
    cells = [_cell("hist", "base", v, a) for v, a in
             (("none", 0.5), ("prefix", 0.5), ("experts", 0.2), ("both", 0.1))]
    cells += [_cell("sort", "base", "none", 0.7), _cell("sort", "base", "running", 0.8)]
    modules_figure(cells, PAPER_ACC, tmp_path / "m.png", "tpcore")
    top, bottom, scatter = figs[0].axes
    heights = sorted(round(p.get_height(), 6) for p in top.patches)
    assert heights == sorted(round(100 * c["test"]["acc"], 6) for c in cells)
    assert len(bottom.patches) == 2 * 4  # the paper's four columns for the two settings
    missing = [line for line in top.lines if line.get_marker() == "x"]
    assert sum(len(line.get_xdata()) for line in missing) == 4  # sort: 3 modules; hist: running
    assert [len(c.get_offsets()) for c in scatter.collections] == [14, 1, 1]
    assert "at or above the base in 1 of 1 finished settings" in figs[0]._suptitle.get_text()


def test_counting_routing_figure_stacks_the_gate_shares(monkeypatch, tmp_path):
    """Per gated variant a panel, per setting a bar stacking the expert shares to 1 (none where
    the variant was not run), and how many gates send everything to one expert."""
    pytest.importorskip("matplotlib")
    from tpcore.counts import EXPERTS
    from tpcore.experiments.counting_figures import routing_figure

    figs = _drawn(monkeypatch)
    split = dict.fromkeys(EXPERTS, 0.0) | {"token_count": 0.25, "seen_once": 0.75}
    one = dict.fromkeys(EXPERTS, 0.0) | {"token_count": 1.0}
    cells = [_cell("sort", "base", "none", 0.5), _cell("sort", "base", "both", 0.5, split),
             _cell("hist", "base", "experts", 0.5, one), _cell("hist", "base", "both", 0.5, one)]
    routing_figure(cells, tmp_path / "r.png", "routing")
    experts, both = figs[0].axes
    assert (experts.get_title(), both.get_title()) == ("experts", "both")
    for ax, totals in ((experts, {0: 0.0, 1: 1.0}), (both, {0: 1.0, 1: 1.0})):
        widths: dict[int, float] = {}
        for p in ax.patches:
            row = round(p.get_y() + p.get_height() / 2)
            widths[row] = widths.get(row, 0.0) + p.get_width()
        assert widths == pytest.approx(totals)
    assert [t.get_text() for t in experts.texts] == ["not run"]
    assert "in 2 of 3 gates" in figs[0]._suptitle.get_text()


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

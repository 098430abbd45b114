"""``tpcore plot`` and ``tpcore program show --plots``: figures from runs, results and programs,
and their bad input (one line, exit 2)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tpcore.cli import main
from tpcore.programs import ir
from tpcore.programs.examples import reverse_program

REPO = Path(__file__).resolve().parents[2]
HINT = "pip install 'tpcore[plot]'"


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tpcore: error: "), err
    return err


@pytest.fixture
def run_dir(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    history = [{"step": s, "loss": 1.0 / s, "acc": 1 - 1.0 / s, "seq_acc": 0.5} for s in (1, 2)]
    (run / "metrics.json").write_text(json.dumps({"task": "sort", "history": history,
                                                  "selected_at_step": 2}))
    return run


def test_plot_curves_of_a_run_directory(run_dir, capsys):
    pytest.importorskip("matplotlib")
    assert main(["plot", "curves", str(run_dir), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == {"figures": [str(run_dir / "curves.png")]}
    assert (run_dir / "curves.png").stat().st_size > 1000


def test_plot_curves_of_a_json_file_writes_beside_it(run_dir, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    shutil.copy(run_dir / "metrics.json", tmp_path / "results.json")
    assert main(["plot", "curves", str(tmp_path / "results.json")]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'results_curves.png'}"


@pytest.mark.parametrize("name, text, expected", [
    ("", None, "no metrics.json in this folder"),
    ("missing.json", None, "no such file"),
    ("bad.json", "{", "not JSON"),
    ("empty.json", '{"history": []}', "no training history"),
])
def test_plot_curves_bad_input_is_one_line(name, text, expected, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    if text is not None:
        (tmp_path / name).write_text(text)
    assert expected in one_line_error(capsys, ["plot", "curves", str(tmp_path / name)])


def test_plot_redraws_a_reproduction_from_its_json(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert main(["plot", "looped", str(REPO / "results/looped/looped.json"), "--out",
                 str(tmp_path)]) == 0
    assert (tmp_path / "looped_lambda.png").stat().st_size > 1000
    capsys.readouterr()
    line = one_line_error(capsys, ["plot", "looped", str(REPO / "results/fleq/fleq.json"),
                                   "--out", str(tmp_path)])
    assert "not the results of tpcore reproduce looped" in line


def test_program_show_plots(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    ir.save(reverse_program(words=list("abcd")), tmp_path / "reverse.json")
    assert main(["program", "show", str(tmp_path / "reverse.json"), "--no-source", "--plots",
                 str(tmp_path / "figs"), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)["figures"]
    assert sorted(Path(f).name for f in figures["files"]) == [
        "reverse_attention.png", "reverse_graph.dot", "reverse_graph.png",
        "reverse_predicates.png"]
    assert all(Path(f).is_file() for f in figures["files"])


def test_program_show_plots_on_a_folder_without_a_program(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    (tmp_path / "run").mkdir()
    one_line_error(capsys, ["program", "show", str(tmp_path / "run"), "--plots",
                            str(tmp_path / "figs")])


def test_figures_without_matplotlib_are_refused_before_work(monkeypatch, run_dir, tmp_path,
                                                            capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    ir.save(reverse_program(words=list("abcd")), tmp_path / "reverse.json")
    for argv in (["plot", "curves", str(run_dir)],
                 ["plot", "looped", str(REPO / "results/looped/looped.json")],
                 ["program", "show", str(tmp_path / "reverse.json"), "--plots",
                  str(tmp_path / "figs")]):
        assert HINT in one_line_error(capsys, argv)
    assert not (run_dir / "curves.png").exists() and not (tmp_path / "figs").exists()

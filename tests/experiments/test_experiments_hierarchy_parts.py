"""The sweeps and k_train probes of ``tpcore reproduce hierarchy`` (root-sizes: Fig. 3 over P,
layers: Fig. 8, grammars: Fig. 9, probe-k: Fig. 14 right), end to end at the tiny budget: their
rows in the results file and tables, their figures, their saved models, training in chunks, and
the runs of n blocks and of other grammars they need."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tpcore.analysis.plots import available
from tpcore.cli import main
from tpcore.experiments import hierarchy_parts
from tpcore.experiments.against_bp import TreeRun, make_model
from tpcore.experiments.hierarchy import BUDGETS
from tpcore.experiments.tree_grammar import paper_grammar
from tpcore.io import read_text
from tpcore.models import load
from tpcore.tasks.trees import random_grammar

TINY = dict(BUDGETS["tiny"].sizes)
REPO = Path(__file__).resolve().parents[2]
ARGS = ["reproduce", "hierarchy", "--budget", "tiny", "--out", "out"]


def results() -> dict:
    return json.loads(read_text(Path("out/hierarchy_tiny.json.gz"), "results"))


def table() -> str:
    return Path("out/hierarchy_tiny.md").read_text()


def assert_figure(name: str) -> None:
    """The figure ``name`` is drawn when matplotlib is installed, and only then."""
    path = Path("out") / f"hierarchy_tiny_{name}.png"
    assert path.is_file() == available()
    assert not available() or path.read_bytes().startswith(b"\x89PNG")


def test_tree_run_of_n_blocks():
    """``n_layers`` builds that many blocks; the default is l blocks, recorded as such."""
    default = TreeRun(task="root", **TINY)
    assert default.__dict__["n_layers"] == default.n_layers == TINY["l"]
    assert make_model(default, 4).config.n_layers == TINY["l"]
    assert TreeRun(task="root", n_layers=TINY["l"], **TINY) == default
    deeper = TreeRun(task="root", n_layers=3, **TINY)
    assert deeper.__dict__["n_layers"] == 3 and make_model(deeper, 4).config.n_layers == 3
    assert TreeRun(**deeper.__dict__) == deeper != default
    committed = json.loads(read_text(REPO / "results/hierarchy/hierarchy_small.json.gz", "results"))
    first = committed["runs"][0]["run"]
    assert TreeRun(**first).__dict__ == first


def test_paper_grammar_takes_the_seed_of_the_papers_code():
    assert np.array_equal(paper_grammar().M, random_grammar(4, 1.0, 0, paper_grammar=True).M)
    for seed in hierarchy_parts.GRAMMAR_SEEDS:
        g = paper_grammar(seed)
        assert np.array_equal(g.M, random_grammar(4, 1.0, seed, paper_grammar=True).M)
        assert not np.array_equal(g.M, paper_grammar().M)


def test_root_sizes_part(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the models are saved under runs/
    assert main(ARGS + ["--parts", "root-sizes", "--k-train", "0", "2", "--sizes", "64",
                        "32"]) == 0
    out = results()
    assert out["runs"] == [] and "layers" not in out
    rows = out["root_sizes"]
    assert sorted((r["run"]["k_train"], r["run"]["P"]) for r in rows) == [
        (0, 32), (0, 64), (2, 32), (2, 64)]
    for r in rows:
        assert r["grammar_seed"] == 0 and set(r["acc"]) == {"0", "1", "2"}
        assert r["run"] == TreeRun(task="root", k_train=r["run"]["k_train"],
                                   **dict(TINY, P=r["run"]["P"])).__dict__
        assert 0 <= r["acc"]["0"] <= 1 and r["bp_acc"]["0"][1] == 1.0  # BP_0 on k = 0 data
        model = Path(f"runs/hierarchy/tiny_root-sizes_k{r['run']['k_train']}_P{r['run']['P']}"
                     "_seed0.json")
        assert json.loads(model.read_text())["run"] == r["run"]
    assert not Path("runs/hierarchy/tiny_root_k0_seed0.npz").exists()
    text = table()
    assert "Fig. 3 as a trend over P" in text and "| 2 | 64 |" in text
    assert out["commands"] == ["tpcore reproduce hierarchy --budget tiny --parts root-sizes "
                               "--seed 0 --k-train 0 2 --sizes 64 32"]
    assert_figure("sizes")
    assert_figure("in_sample")


def test_layers_part(tmp_path, monkeypatch):
    """k_train = 0 with 1, 2 (= l: the standard run) and 3 blocks."""
    monkeypatch.chdir(tmp_path)
    assert main(ARGS + ["--parts", "layers", "--n-layers", "3", "1", "2", "--sizes", "32"]) == 0
    rows = sorted(results()["layers"], key=lambda r: r["n_parameters"])
    assert [r["run"]["n_layers"] for r in rows] == [1, 2, 3]
    assert all(r["run"]["k_train"] == 0 and r["run"]["P"] == 32 for r in rows)
    for n in (1, 2, 3):
        assert load(f"runs/hierarchy/tiny_layers_n{n}_P32_seed0").config.n_layers == n
    text = table()
    assert "Fig. 8" in text and "| 3 | 32 |" in text and "| 1 | 32 |" in text
    assert_figure("layers")


def test_grammars_part(tmp_path, monkeypatch):
    """Each grammar's runs are trained and tested on that grammar: BP_1's accuracy on its
    unfiltered data differs between grammars."""
    monkeypatch.chdir(tmp_path)
    assert main(ARGS + ["--parts", "grammars", "--k-train", "1", "--grammar-seeds", "15", "1",
                        "--sizes", "32"]) == 0
    rows = sorted(results()["grammars"], key=lambda r: r["grammar_seed"])
    assert [(r["grammar_seed"], r["run"]["k_train"]) for r in rows] == [(1, 1), (15, 1)]
    assert rows[0]["run"] == rows[1]["run"]
    assert rows[0]["bp_acc"]["0"][0] != rows[1]["bp_acc"]["0"][0]
    assert Path("runs/hierarchy/tiny_grammars_g15_k1_P32_seed0.npz").is_file()
    text = table()
    assert "other grammars (Fig. 9)" in text and "| 15 | 1 | 32 |" in text
    assert_figure("grammars")


def test_probe_k_part(tmp_path, monkeypatch, capsys):
    """probe-k needs the root models; it probes the last layer of each for every ancestor
    level, and with --hours keeps the probes it holds."""
    monkeypatch.chdir(tmp_path)
    assert main(ARGS + ["--parts", "probe-k", "--k-train", "1"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("tpcore: error: no root model at runs/hierarchy/tiny_root_k1_seed0.npz;"
                           " run --parts root --k-train 1 first")
    assert not Path("out").exists()
    assert main(ARGS + ["--parts", "root,probe-k", "--k-train", "1", "2"]) == 0
    out = results()
    rows = sorted(out["probes_k"], key=lambda r: r["model"]["k_train"])
    assert [r["model"] for r in rows] == [r["run"] for r in out["runs"]]
    assert [len(r["acc"]) for r in rows] == [2, 2] and all(0 <= a <= 1 for r in rows
                                                           for a in r["acc"])
    assert "Last-layer ancestor probes" in table()
    assert_figure("probe_k")
    capsys.readouterr()
    assert main(ARGS + ["--parts", "probe-k", "--k-train", "2", "--hours", "1"]) == 0
    assert "probes of the root model" not in capsys.readouterr().out
    assert results()["probes_k"] == out["probes_k"]


def test_mlm_k_part(tmp_path, monkeypatch, capsys):
    """mlm-k trains an MLM model on each k_train's data (k_train = 0 is the mlm part's encoder,
    not trained twice), probes each one's last layer beside the root models' probes, and draws
    the MLM models' attention apart from the root classifiers'; with --hours it keeps what it
    holds."""
    monkeypatch.chdir(tmp_path)
    assert main(ARGS + ["--parts", "root,mlm,mlm-k,probe-k", "--k-train", "0", "1",
                        "--mlm-steps", "20"]) == 0
    assert capsys.readouterr().out.count("training the mlm run k_train=0") == 1
    out = results()
    runs = {(r["run"]["task"], r["run"]["k_train"]): r["run"] for r in out["runs"]}
    assert sorted(runs) == [("mlm", 0), ("mlm", 1), ("root", 0), ("root", 1)]
    assert runs["mlm", 1]["steps"] == 20
    assert Path("runs/hierarchy/tiny_mlm_seed0.npz").is_file()
    assert Path("runs/hierarchy/tiny_mlm_k1_seed0.npz").is_file()
    probed = sorted((r["model"]["task"], r["model"]["k_train"]) for r in out["probes_k"])
    assert probed == sorted(runs)
    assert all(len(r["acc"]) == 2 and all(0 <= a <= 1 for a in r["acc"])
               for r in out["probes_k"])
    assert "| MLM model | 1 |" in table() and "| root classifier | 0 |" in table()
    for name in ("k_test", "attention", "mlm_attention", "probe_k"):
        assert_figure(name)
    capsys.readouterr()
    assert main(ARGS + ["--parts", "mlm-k", "--k-train", "1", "--mlm-steps", "20",
                        "--hours", "1"]) == 0
    assert "training" not in capsys.readouterr().out and results()["probes_k"] == out["probes_k"]


def test_sweeps_train_in_chunks_and_share_finished_runs(tmp_path, monkeypatch, capsys):
    """With --hours a sweep's run pauses and the same command resumes it (a longer one
    finishes it); the layers run of l blocks is the root-sizes run of k_train = 0, taken from it
    untrained; a finished sweep is kept."""
    monkeypatch.chdir(tmp_path)
    args = ARGS + ["--parts", "root-sizes,layers", "--k-train", "0", "--sizes", "32",
                   "--n-layers", "2", "--hours", "1e-9"]
    for step in (1, 2):  # the tiny budget's first checkpoint, then one step
        assert main(args) == 0
        assert capsys.readouterr().out.strip().splitlines()[-1] == (
            f"paused the root-sizes run tiny_root-sizes_k0_P32_seed0 at step {step} of 60 (its "
            "state is in runs/hierarchy/.tiny_root-sizes_k0_P32_seed0.partial); the same "
            "command again resumes it")
        assert not Path("out/hierarchy_tiny.json.gz").exists()
    args[-1] = "1"
    assert main(args) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("wrote ")
    out = results()
    assert out["layers"] == out["root_sizes"] and len(out["layers"]) == 1
    assert not list(Path("runs/hierarchy").glob("*layers*"))
    assert not Path("runs/hierarchy/.tiny_root-sizes_k0_P32_seed0.partial").exists()
    assert main(args) == 0
    assert "step" not in capsys.readouterr().out and results() == out


def test_sweep_takes_a_finished_root_run_of_the_same_settings(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(ARGS + ["--parts", "root", "--k-train", "1"]) == 0
    capsys.readouterr()
    assert main(ARGS + ["--parts", "root-sizes", "--k-train", "1", "--sizes", str(TINY["P"]),
                        "--hours", "1"]) == 0
    assert "training" not in capsys.readouterr().out
    out = results()
    assert out["root_sizes"] == [hierarchy_parts.summary(out["runs"][0], 0)]


@pytest.mark.parametrize("option, expected", [
    (["--parts", "root-size"], "unknown ['root-size']"),
    (["--parts", "root-sizes", "--sizes", "0"], "argument --sizes: "),
    (["--parts", "root-sizes", "--sizes", "64", "16"],
     "--sizes 16: expected training-set sizes >= 32 (the batch of budget tiny)"),
    (["--parts", "layers", "--n-layers", "0"], "argument --n-layers: "),
    (["--parts", "grammars", "--grammar-seeds", "-1"], "argument --grammar-seeds: ")])
def test_bad_parts_and_sizes_are_refused_in_one_line(option, expected, tmp_path, monkeypatch,
                                                      capsys):
    monkeypatch.chdir(tmp_path)
    assert main(ARGS + option) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and expected in err
    assert not Path("out").exists() and not Path("runs").exists()


def test_parts_figures_draw_what_the_rows_hold(tmp_path, monkeypatch):
    """The sizes figure has a line per k_train over the sizes and BP_k_train's accuracy dashed
    in its colour, on k = 0 data; the in-sample figure the same on each k_train's own data; the
    grammars figure a panel per grammar."""
    pytest.importorskip("matplotlib")
    from tpcore.analysis import plots

    figs = []
    monkeypatch.setattr(plots, "save_png", lambda fig, path: figs.append(fig) or path)

    def row(k, P, acc, bp, g=0):  # in-sample (k = 1): acc - 0.1, BP_1 at bp - 0.1
        return dict(run=dict(TreeRun(task="root", k_train=k, **dict(TINY, P=P)).__dict__),
                    grammar_seed=g, acc={"0": acc, "1": acc - 0.1},
                    bp_acc={"0": [bp, 1.0], "1": [bp - 0.1, 0.9]})

    rows = [row(1, 64, 0.7, 0.8), row(0, 64, 0.9, 1.0), row(1, 32, 0.6, 0.8),
            row(0, 32, 0.5, 1.0)]
    grammars = [row(0, 32, 0.5, 1.0, g=1), row(0, 32, 0.4, 1.0, g=15)]
    result = dict(budget="tiny", config=TINY, runs=[], root_sizes=rows, grammars=grammars)
    paths = hierarchy_parts.figures(result, tmp_path)
    assert [p.name for p in paths] == ["hierarchy_tiny_sizes.png", "hierarchy_tiny_in_sample.png",
                                       "hierarchy_tiny_grammars.png"]
    sizes, in_sample, per_grammar = figs

    def lines(fig, style):
        (ax,) = fig.axes
        return [(list(x.get_xdata()), list(x.get_ydata()), x.get_color()) for x in ax.lines
                if x.get_linestyle() == style]

    assert lines(sizes, "-") == [([32, 64], [0.5, 0.9], "C0"), ([32, 64], [0.6, 0.7], "C1")]
    assert [(y[0], c) for _, y, c in lines(sizes, "--")] == [(1.0, "C0"), (0.8, "C1")]
    # k_train = 0's own data is k = 0's; k_train = 1's its own
    assert lines(in_sample, "-") == [([32, 64], [0.5, 0.9], "C0"),
                                     ([32, 64], pytest.approx([0.5, 0.6]), "C1")]
    assert [(y[0], c) for _, y, c in lines(in_sample, "--")] == [(1.0, "C0"),
                                                                (pytest.approx(0.7), "C1")]
    assert [a.get_title() for a in per_grammar.axes] == ["grammar seed 1", "grammar seed 15"]

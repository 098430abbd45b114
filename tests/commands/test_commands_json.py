"""``--json``: every command that prints results prints one JSON document on stdout instead,
holding the figures its text shows; progress and notes go to stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tpcore
from tpcore.backend import backend_name
from tpcore.cli import main
from tpcore.programs import ir
from tpcore.programs.examples import reverse_program

REPO = Path(__file__).resolve().parents[2]
CAUSAL = str(REPO / "results" / "sorting" / "causal.npz")
TINY = ["--epochs", "1", "--n-samples", "200", "--quiet"]
ONE_BY_ONE = ["--layers", "1", "--cat-heads", "1", "--num-heads", "1", "--cat-mlps", "1",
              "--num-mlps", "1"]


@pytest.fixture
def program_json(tmp_path) -> str:
    path = tmp_path / "reverse.json"
    ir.save(reverse_program(words=list("abcdefgh")), path)
    return str(path)


def run_json(argv: list[str], capsys) -> tuple[dict, str]:
    """The parsed JSON document ``tpcore ARGV --json`` prints, and its stderr."""
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err


def test_info(capsys):
    doc, _ = run_json(["info"], capsys)
    assert doc["tpcore"] == tpcore.__version__ and doc["backend"] == backend_name()
    assert "numba" in doc and "cupy_backend" in doc
    assert doc["kernels"].startswith("on: ")
    assert ("captured as CUDA graphs" in doc["cuda_graphs"]) == (backend_name() == "cupy")


def test_info_says_when_the_kernels_are_off(capsys):
    from tpcore.dispatch import use_kernels

    before = use_kernels()
    use_kernels(False)
    try:
        doc, _ = run_json(["info"], capsys)
    finally:
        use_kernels(before)
    assert doc["kernels"].startswith("off")


def test_program_show_run_eval_export(program_json, tmp_path, capsys):
    doc, _ = run_json(["program", "show", program_json, "--no-source"], capsys)
    assert doc["name"] == "reverse" and doc["vocabulary"] == 11 and "source" not in doc
    assert doc["lines"]["pruned"] <= doc["lines"]["full"]
    assert doc["modules"] == len(doc["dependencies"])
    doc, _ = run_json(["program", "show", program_json], capsys)
    assert "def predicate_0_0(q_token, k_token):" in doc["source"]
    doc, _ = run_json(["program", "run", program_json, "c", "a", "d", "b", "--explain", "1"],
                      capsys)
    assert doc["input"] == ["c", "a", "d", "b"] and doc["output"] == ["b", "d", "a", "c"]
    assert doc["explain"]["prediction"] == "b" and doc["explain"]["features"]
    doc, _ = run_json(["program", "eval", program_json, "--task", "reverse", "--n-samples",
                       "200"], capsys)
    assert doc["task"] == "reverse" and doc["token_accuracy"] == 1.0 and doc["sequences"] == 20
    doc, _ = run_json(["program", "export", program_json, "--out", str(tmp_path / "e")], capsys)
    assert Path(doc["program"]).is_file() and Path(doc["weights"]).is_file()


def test_text_and_json_state_the_same_figures(program_json, capsys):
    assert main(["program", "eval", program_json, "--task", "reverse", "--n-samples",
                 "200"]) == 0
    text = capsys.readouterr().out
    doc, _ = run_json(["program", "eval", program_json, "--task", "reverse", "--n-samples",
                       "200"], capsys)
    assert f"token accuracy {100 * doc['token_accuracy']:.2f}% ({doc['tokens']} tokens)" in text


def test_learn_and_sweep(tmp_path, capsys):
    doc, _ = run_json(["learn", "hist", *ONE_BY_ONE, *TINY, "--out", str(tmp_path / "h")],
                      capsys)
    assert doc["task"] == "hist" and not doc["reused"] and doc["config"]["n_layers"] == 1
    assert 0 <= doc["test"]["acc"] <= 1 and doc["program"]["fidelity"] == 1.0
    assert doc["steps"] >= 1 and "history" not in doc
    doc, err = run_json(["sweep", "hist", "--layers", "1", "--heads", "2", "--mlps", "2",
                         "--seeds", "0", "1", "--epochs", "1", "--n-samples", "200", "--out",
                         str(tmp_path / "s")], capsys)
    assert [r["seed"] for r in doc["runs"]] == [0, 1] and "test_acc" in doc["runs"][0]
    assert doc["selected"]["run"] in {r["run"] for r in doc["runs"]}
    assert "2 runs ->" in err and "L1_H1+1_M1+1_s0: val" in err   # progress on stderr


def test_learn_nlp_demo(tmp_path, capsys):
    doc, _ = run_json(["learn", "ner-demo", "--budget", "0.01", "--quiet", "--out",
                       str(tmp_path / "nd")], capsys)
    assert {"data", "unigram", "transformer", "program"} <= set(doc)


def test_sorting(capsys):
    doc, _ = run_json(["sorting", "search-failures", CAUSAL, "--n", "2000"], capsys)
    assert doc["n"] == 2000 and doc["task"] == "causal" and doc["seed"] == 0
    assert doc["n_failures"] == len(doc["failures"])
    doc, _ = run_json(["sorting", "sort", CAUSAL, "9 0 9 9 9 9 9 9 9 9"], capsys)
    assert doc["output"] == [0] + [9] * 9 and doc["correct"] is True


def test_looped_run(capsys):
    doc, _ = run_json(["looped", "run", "multiply", "--trace"], capsys)
    assert doc["agree"] is True and doc["machine"]["layers"] == 5
    assert doc["interpreter"]["steps"] == doc["transformer"]["steps"] == len(doc["trace"])
    assert doc["interpreter"]["memory"] == doc["transformer"]["memory"]


def test_trees(tmp_path, capsys):
    doc, _ = run_json(["trees", "sample", "--k", "2", "--n", "3"], capsys)
    assert len(doc["sequences"]) == 3 and len(doc["sequences"][0]["leaves"]) == 16
    doc, _ = run_json(["trees", "sample", "--n", "3", "--out", str(tmp_path / "t.npz")], capsys)
    assert doc["n"] == 3 and Path(doc["out"]).is_file()
    doc, _ = run_json(["trees", "bp", "0 3 ? 1 2 2 0 1 0 1 2 3 0 1 2 3", "--cavities"], capsys)
    assert doc["log_z"] < 0 and abs(sum(doc["root"]) - 1) < 1e-9
    assert list(doc["leaves"]) == ["2"] and len(doc["cavities"]) == 16


def test_reproduce(tmp_path, capsys):
    doc, _ = run_json(["reproduce", "bp-table", "--samples", "200", "--out", str(tmp_path)],
                      capsys)
    assert doc["samples"] == 200 and doc["rows"][0]["k_data"] == 0


def test_errors_stay_one_line_on_stderr(capsys):
    assert main(["program", "eval", "nowhere.json", "--task", "sort", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "nowhere.json" in err

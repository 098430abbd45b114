"""``tpcore program show|run|eval|export|stats|prune`` on each kind of PATH, and their bad input."""

from __future__ import annotations

import json
import sys

import pytest

from tpcore.cli import main
from tpcore.errors import TpcoreError
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.nn.module import save
from tpcore.pipelines.decompile import load_program
from tpcore.programs import ir
from tpcore.programs.examples import random_program, reverse_program
from tpcore.programs.prune import head_choices, keep_heads
from tpcore.programs.source import writer

LETTERS = list("abcdefgh")


@pytest.fixture
def paths(tmp_path):
    p = reverse_program(words=LETTERS)
    ir.save(p, tmp_path / "reverse.json")
    py, _ = writer.write(p, tmp_path / "gen")
    pub, _ = writer.write(reverse_program(words=LETTERS, rule="published"),
                          tmp_path / "pub" / "reverse.py", style="published")
    return {"json": tmp_path / "reverse.json", "py": py, "published": pub}


@pytest.mark.parametrize("kind", ["json", "py", "published"])
def test_run_prints_predictions(paths, kind, capsys):
    assert main(["program", "run", str(paths[kind]), "c", "a", "d", "b"]) == 0
    assert capsys.readouterr().out.split() == ["b", "d", "a", "c"]  # content positions only


def test_run_explain_lists_feature_scores(paths, capsys):
    assert main(["program", "run", str(paths["json"]), "c", "a", "--explain", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["a", "c"]
    assert out[1].startswith("# position 1 ('c' -> 'a')")
    assert out[2].split()[1:4] == ["attn_1_0_outputs", "=", "a"]


def test_show_prints_source_stats_and_graph(paths, capsys):
    assert main(["program", "show", str(paths["json"])]) == 0
    out = capsys.readouterr().out
    assert "def predicate_0_0(q_token, k_token):" in out
    assert "# lines:" in out and "mlp_0_0_outputs          <- mlp_0_0: lookup(" in out


def test_eval_scores_the_reverse_program(paths, capsys):
    assert main(["program", "eval", str(paths["py"]), "--task", "reverse",
                 "--n-samples", "300"]) == 0
    assert "token accuracy 100.00%" in capsys.readouterr().out


def test_run_directory_with_only_a_model(tmp_path):
    vocab = ["<pad>", "<s>", "a", "b"]
    model = ProgramModel(ProgramConfig(vocab_size=4, max_len=5, n_classes=3, seed=2))
    save(model, tmp_path / "model.npz", {"task": "hist", "vocab": vocab,
                                         "classes": ["1", "2", "3"]})
    p = load_program(tmp_path)
    assert p.name == "hist" and p.tokens.values == tuple(vocab)
    save(model, tmp_path / "hist-s0-model.npz", {"task": "hist", "vocab": vocab,
                                                 "classes": ["1", "2", "3"]})
    assert load_program(tmp_path / "hist-s0-model.npz").name == "hist"  # a saved model file
    (tmp_path / "hist-s0-model.json").unlink()
    with pytest.raises(TpcoreError, match="hist-s0-model.json beside it"):
        load_program(tmp_path / "hist-s0-model.npz")


@pytest.mark.parametrize("argv, message", [
    (["program", "run", "nowhere.json", "a"], "nowhere.json"),
    (["program", "eval", "{json}", "--task", "nope"], "unknown task"),
    (["program", "run", "{json}", "a", "zz"], "'zz'"),
])
def test_bad_input_is_one_line_exit_2(paths, argv, message, capsys):
    argv = [a.format(json=paths["json"]) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("kind", ["json", "published"])
def test_export_writes_a_program_that_runs_from_any_folder(paths, kind, tmp_path, capsys):
    import subprocess
    import sys

    out = tmp_path / "exported"
    assert main(["program", "export", str(paths[kind]), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["reverse.py", "reverse_weights.csv"]
    run = subprocess.run([sys.executable, "-I", str(out / "reverse.py"), "c", "a", "d", "b"],
                         cwd=tmp_path / "gen", capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == ["b", "d", "a", "c"]


def test_export_into_a_file_is_one_line(paths, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["program", "export", str(paths["json"]), "--out", str(tmp_path / "file")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "it is a file" in err[0]


def test_export_published_style_reads_back(paths, tmp_path, capsys):
    out = tmp_path / "published"
    assert main(["program", "export", str(paths["published"]), "--out", str(out),
                 "--style", "published", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["program"] == str(out / "reverse.py")
    back = load_program(out / "reverse.py")
    assert back.meta["format"] == "published"
    assert main(["program", "run", str(out / "reverse.py"), "c", "a", "d", "b"]) == 0
    assert capsys.readouterr().out.split() == ["b", "d", "a", "c"]


def _one_line_error(capsys, argv: list[str]) -> str:
    """``tpcore program ARGV``'s error: exit 2, one line on stderr, nothing on stdout."""
    assert main(["program", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    return captured.err


def _export_error(capsys, argv: list[str]) -> str:
    return _one_line_error(capsys, ["export", *argv])


def test_export_bad_input_is_one_line_naming_the_path(paths, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    blocked = tmp_path / "file" / "sub"  # cannot be created: its parent is a file
    assert f"cannot write to output directory {str(blocked)!r}" in _export_error(
        capsys, [str(paths["json"]), "--out", str(blocked)])
    big = tmp_path / "big.py"
    big.write_text(paths["py"].read_text().replace("MAX_LEN = 10\n", "MAX_LEN = 4096\n"))
    (tmp_path / "big_weights.csv").write_text(
        paths["py"].with_name("reverse_weights.csv").read_text())
    err = _export_error(capsys, [str(big), "--out", str(tmp_path / "o")])
    assert f"{big}: mlp_0_0: table entries" in err and "exceeds the limit" in err
    empty = tmp_path / "run"
    empty.mkdir()
    assert str(empty) in _export_error(capsys, [str(empty), "--out", str(tmp_path / "o")])


def test_export_of_a_closest_rule_program_in_the_published_style_is_refused(paths, tmp_path,
                                                                             capsys):
    err = _export_error(capsys, [str(paths["json"]), "--out", str(tmp_path / "o"),
                                 "--style", "published"])
    assert "published format only has the 'published' select_closest rule" in err


def _runs(tmp_path):
    """Two run directories: one with its program.json, one with only a saved model."""
    ir.save(reverse_program(words=LETTERS), tmp_path / "a" / "program.json")
    vocab = ["<pad>", "<s>", "a", "b"]
    model = ProgramModel(ProgramConfig(vocab_size=4, max_len=5, n_classes=3, n_layers=2,
                                       seed=2))
    save(model, tmp_path / "b" / "model.npz", {"task": "hist", "vocab": vocab,
                                               "classes": ["1", "2", "3"]})
    return [tmp_path / "a", tmp_path / "b"]


def test_stats_counts_what_the_heads_of_several_runs_read(tmp_path, capsys):
    runs = _runs(tmp_path)
    assert main(["program", "stats", *map(str, runs), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    programs = [load_program(r) for r in runs]
    heads = sum(type(m).__name__ == "Head" for p in programs for m in p.modules)
    assert result["programs"] == 2 and sum(r["heads"] for r in result["rows"]) == 3 * heads
    assert {r["layer"] for r in result["rows"]} == {1, 2}
    assert main(["program", "stats", *map(str, runs)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "# 2 programs" and out[1].startswith("categorical heads")


def test_stats_plot_writes_the_figure(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    figure = tmp_path / "figs" / "reads.png"
    assert main(["program", "stats", *map(str, _runs(tmp_path)), "--plot", str(figure)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"# figure: {figure}"
    assert figure.read_bytes().startswith(b"\x89PNG")


def _stats_error(capsys, argv: list[str]) -> str:
    return _one_line_error(capsys, ["stats", *argv])


def test_stats_bad_input_is_one_line_naming_the_path(tmp_path, capsys, monkeypatch):
    runs = _runs(tmp_path)
    empty = tmp_path / "no-model"
    empty.mkdir()
    assert f"{empty}: no program.json, model.npz" in _stats_error(
        capsys, [str(runs[0]), str(empty)])
    big = tmp_path / "big.json"
    doc = json.loads((runs[0] / "program.json").read_text())
    doc["inputs"]["positions"]["values"] = list(range(4096))  # mlp_0_0: 4096 x 4096 entries
    big.write_text(json.dumps(doc))
    err = _stats_error(capsys, [str(big)])
    assert str(big) in err and "exceeds the limit" in err
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert "matplotlib is needed for --plot: pip install 'tpcore[plot]'" in _stats_error(
        capsys, [str(runs[0]), "--plot", str(tmp_path / "x.png")])


def test_program_prune_lists_the_choices_and_writes_the_one_kept(tmp_path, capsys):
    p = random_program(4, layers=2, cat_heads=3, num_heads=0, cat_mlps=0, num_mlps=0)
    ir.save(p, tmp_path / "p.json")
    assert main(["program", "prune", str(tmp_path / "p.json"), "--choices", "1", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["choices"]
    assert listed == [[list(h) for h in c] for c in head_choices(p, 1)] and listed
    first = "/".join(",".join(map(str, hs)) for hs in listed[0])
    out = tmp_path / "cut" / "q.json"
    assert main(["program", "prune", str(tmp_path / "p.json"), "--keep", first,
                 "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert ir.to_dict(ir.load(out)) == ir.to_dict(keep_heads(p, tuple(map(tuple, listed[0]))))


def test_program_prune_says_which_heads_it_renamed(tmp_path, capsys):
    p = random_program(4, layers=1, cat_heads=3, num_heads=0, cat_mlps=0, num_mlps=0)
    ir.save(p, tmp_path / "p.json")
    assert main(["program", "prune", str(tmp_path / "p.json"), "--keep", "2",
                 "--out", str(tmp_path / "q.json"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["renamed"] == {"attn_0_0": None, "attn_0_1": None, "attn_0_2": "attn_0_0"}
    assert main(["program", "prune", str(tmp_path / "p.json"), "--keep", "2",
                 "--out", str(tmp_path / "q.json")]) == 0
    assert ("kept heads renumbered per layer, as a narrower model names them: attn_0_2 -> "
            "attn_0_0; dropped: attn_0_0, attn_0_1") in capsys.readouterr().out


@pytest.mark.parametrize("extra, msg", [
    (["--keep", "0/x", "--out", "q.json"], "--keep '0/x': expected head indices per layer"),
    (["--keep", "0/0"], "--keep writes a program; expected --out FILE.json"),
    (["--keep", "0/0/0", "--out", "q.json"], "head choice ((0,), (0,), (0,)) names 3 layers"),
    (["--choices", "4"], "keeping 4 categorical heads per layer; expected 1 .. the fewest"),
])
def test_program_prune_refuses_what_does_not_fit_in_one_line(tmp_path, capsys, extra, msg):
    extra = [str(tmp_path / x) if x == "q.json" else x for x in extra]
    ir.save(random_program(4, layers=2, cat_heads=3, num_heads=0, cat_mlps=0, num_mlps=0),
            tmp_path / "p.json")
    assert main(["program", "prune", str(tmp_path / "p.json"), *extra]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "q.json").exists()

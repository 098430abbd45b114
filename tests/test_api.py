"""The public API (tpcore.api, exported by tpcore): names, laziness, learn, load, programs."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tpcore
from tpcore import api
from tpcore.backend import to_host
from tpcore.cli import main
from tpcore.models.hooks import ablate_head, patch_head
from tpcore.models.program import ProgramModel
from tpcore.models.transformer import Transformer

REPO = Path(__file__).resolve().parents[1]
SORT_RUN = REPO / "results" / "learn_sort"
TINY = dict(layers=1, cat_heads=2, num_heads=1, cat_mlps=1, num_mlps=1, epochs=2,
            n_samples=300)


def test_api_names_load_on_first_use_only():
    probe = ("import sys, tpcore\nprint('tpcore.api' in sys.modules)\ntpcore.learn\n"
             "print('tpcore.api' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["False", "True"]


def test_all_lists_the_public_names_and_each_resolves():
    assert set(api.__all__) <= set(tpcore.__all__) and dir(tpcore) == sorted(tpcore.__all__)
    for name in tpcore.__all__:
        assert getattr(tpcore, name) is not None
    assert tpcore.learn is api.learn and tpcore.trees is api.trees
    with pytest.raises(AttributeError, match="no attribute 'lern'"):
        tpcore.lern  # noqa: B018


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    return tpcore.learn("sort", tmp_path_factory.mktemp("api") / "sort", **TINY)


def test_learn_trains_and_decompiles_as_the_cli_does(tiny_run, tmp_path, capsys):
    run = tiny_run
    assert run.reused is False and run.task == "sort" and run.config.n_layers == 1
    assert run.config.n_cat_heads == 2 and run.config.n_samples == 300
    assert isinstance(run.model, ProgramModel) and 0 <= run.accuracy("val") <= 1
    again = tpcore.learn("sort", run.path, **TINY)
    assert again.reused is True and again.metrics == run.metrics
    assert main(["learn", "sort", "--layers", "1", "--cat-heads", "2", "--num-heads", "1",
                 "--cat-mlps", "1", "--num-mlps", "1", "--epochs", "2", "--n-samples", "300",
                 "--out", str(run.path), "--quiet"]) == 0
    assert "reused the finished run" in capsys.readouterr().out   # the same settings


def test_learn_names_an_unknown_option(tmp_path):
    with pytest.raises(tpcore.TpcoreError, match="unknown learn option 'layer'; expected one "
                                                  "of .*'layers'"):
        tpcore.learn("sort", tmp_path, layer=2)
    with pytest.raises(tpcore.TpcoreError, match="unknown task 'sorting'"):
        tpcore.learn("sorting", tmp_path)


def test_program_run_frames_unframes_and_matches_the_cli(tiny_run, capsys):
    prog = tiny_run.program
    out = prog.run(["d", "a", "c", "b"])
    assert prog.run("d a c b") == out and len(out) == 4
    assert main(["program", "run", str(tiny_run.path), "d", "a", "c", "b"]) == 0
    assert capsys.readouterr().out.split() == out
    assert prog.run("d a c b", engine="numba") == out
    with pytest.raises(tpcore.TpcoreError, match="token 'x' \\(position 1\\) is not in the "
                                                  "vocabulary of program 'sort'"):
        prog.run("d x")


def test_the_committed_sort_program_sorts_and_scores_as_its_run(tmp_path):
    run = tpcore.load(SORT_RUN)
    assert isinstance(run, tpcore.Run) and run.program.run("d a c b") == ["a", "b", "c", "d"]
    score = run.program.evaluate("sort")
    assert score["token_accuracy"] == pytest.approx(run.accuracy("test"), abs=1e-12)
    py, csv = run.program.export(tmp_path / "prog")
    out = subprocess.run([sys.executable, str(py), "d", "a", "c", "b"], capture_output=True,
                         text=True, check=True, cwd=tmp_path)
    assert out.stdout.split() == ["a", "b", "c", "d"] and csv.is_file()


def test_reading_a_program(tiny_run):
    prog = tiny_run.program
    text = prog.head("attn_0_0")
    assert isinstance(text, api.Text) and repr(text) == str(text)
    assert text.startswith("attn_0_0 (categorical head)")
    assert prog.heads[:2] == ["attn_0_0", "attn_0_1"] and "num_attn_0_0" in prog.heads
    assert prog.source().startswith('"""') and "def predicate_0_0" in prog.source()
    assert "attn_0_0_outputs" in prog.graph()
    rows = prog.explain("d a c b", 1)
    assert {r["feature"] for r in rows} == set(prog.ir.classifier.features)


def test_load_gives_what_the_path_holds(tiny_run, tmp_path):
    tiny_run.program.save(tmp_path / "p.json")
    assert isinstance(tpcore.load(tmp_path / "p.json"), tpcore.TransformerProgram)
    assert tpcore.load(tmp_path / "p.json").run("d a") == tiny_run.program.run("d a")
    assert isinstance(tpcore.load(tiny_run.path / "model.npz"), ProgramModel)
    sorter = tpcore.load(REPO / "results" / "sorting" / "causal.npz")
    assert isinstance(sorter, Transformer) and tpcore.sort_list(sorter, [3, 1, 2]) == [1, 2, 3]
    with pytest.raises(FileNotFoundError):
        tpcore.load(tmp_path / "missing")
    with pytest.raises(tpcore.TpcoreError):
        tpcore.Run(tmp_path)


def test_a_batch_is_decoded_row_by_row_or_refused():
    run = tpcore.load(SORT_RUN)
    ids, pad = run.encode_batch(["d a c b", "e a", "c"])
    assert ids.shape == (3, 6) and pad.sum(axis=1).tolist() == [0, 2, 3]
    assert run.decode(run.model.forward(ids, pad), pad) == [["a", "b", "c", "d"], ["a", "e"],
                                                            ["c"]]
    two = np.concatenate([run.encode("d a c b"), run.encode("e a c b")])
    with pytest.raises(tpcore.TpcoreError, match="logits of 2 inputs: give their pad mask"):
        run.decode(run.model.forward(two))  # once silently the first row only
    with pytest.raises(tpcore.TpcoreError, match="input 1, position 0"):
        run.encode_batch(["d a", "z"])


def test_transformerlens_style_tokens_batches_and_calls():
    """``run.encode(["d a c b", "d a c e"])`` once read the two strings as one input's tokens;
    ``to_tokens`` takes a list of strings as a batch, as TransformerLens does."""
    run = tpcore.load(SORT_RUN)
    ids = run.to_tokens(["d a c b", "e a"])
    assert ids.tolist() == [[1, 6, 3, 5, 4, 2], [1, 7, 3, 2, 0, 0]]   # <pad> is id 0
    assert run.to_tokens("d a c b").tolist() == [ids[0].tolist()]
    assert run.pad_mask(ids).sum(axis=1).tolist() == [0, 2]
    assert run.to_str_tokens(ids) == [["<s>", "d", "a", "c", "b", "</s>"],
                                      ["<s>", "e", "a", "</s>"]]
    assert run.to_str_tokens("e a") == ["<s>", "e", "a", "</s>"]
    assert run.to_string(ids) == ["d a c b", "e a"] and run.to_string(ids[1]) == "e a"
    logits = run(ids)
    np.testing.assert_array_equal(logits, run(["d a c b", "e a"]))
    ids2, pad = run.encode_batch(["d a c b", "e a"])
    np.testing.assert_array_equal(ids, ids2)
    np.testing.assert_array_equal(logits, to_host(run.model.forward(ids2, pad)))
    assert run.decode(logits, tokens=ids) == [["a", "b", "c", "d"], ["a", "e"]]
    assert run.predict(["d a c b", "e a", "c"]) == [["a", "b", "c", "d"], ["a", "e"], ["c"]]
    assert run.predict("d a c b") == run.program.run("d a c b")
    for bad, where in ((["d a", "z"], "'z' (input 1, position 0)"),
                       (["d <pad> a"], "'<pad>' (input 0, position 1)")):
        with pytest.raises(tpcore.TpcoreError, match=re.escape(where)):
            run.to_tokens(bad)
    with pytest.raises(tpcore.TpcoreError, match="a string or a list of strings"):
        run.to_tokens([["d", "a"]])
    with pytest.raises(tpcore.TpcoreError, match="expected integer ids"):
        run(np.zeros((2, 3), dtype=np.float32))


def test_a_runs_program_is_scored_on_the_runs_own_data(tiny_run, capsys):
    """Once scored on a default split, 20,000 sequences, whatever the run trained on."""
    score = tiny_run.evaluate("test")
    assert score["token_accuracy"] == tiny_run.accuracy("test")
    assert score["sequences"] == len(tiny_run.data.splits["test"]["tokens"])
    assert main(["program", "eval", str(tiny_run.path), "--json"]) == 0  # no --task needed
    doc = json.loads(capsys.readouterr().out)
    assert doc["data"] == "the run's own" and doc["token_accuracy"] == score["token_accuracy"]
    assert main(["program", "eval", str(tiny_run.path), "--n-samples", "400", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["data"] == "generated"


def test_the_sorting_model_derives_its_padding_from_its_tokens():
    """Once 65.8 % on padded input without ``pad=``; now the pad token marks it."""
    from tpcore.tasks.sorting import encode as encode_lists
    from tpcore.tasks.sorting import get_task, random_lists

    model = tpcore.load(REPO / "results" / "sorting" / "bidirectional.npz")
    task = get_task("bidirectional")
    lists, lengths = random_lists(task, 300, np.random.default_rng(0))
    batch = encode_lists(task, lists, lengths)
    assert batch["pad"].any()
    np.testing.assert_array_equal(to_host(model.forward(batch["tokens"])),
                                  to_host(model.forward(batch["tokens"], pad=batch["pad"])))


def test_run_encode_decode_and_a_patched_head():
    run = tpcore.load(SORT_RUN)
    clean, corrupted = run.encode("d a c b"), run.encode("e a c b")
    assert clean.shape == (1, 6) and clean[0, 0] == run.program.vocabulary.index("<s>")
    assert run.decode(run.model.forward(clean)) == run.program.run("d a c b")
    assert run.decode(patch_head(run.model, corrupted, corrupted, "attn_1_0")) == \
        run.program.run("e a c b")
    ablated = run.decode(ablate_head(run.model, clean, "num_attn_0_0"))
    assert ablated != ["a", "b", "c", "d"]
    with pytest.raises(tpcore.TpcoreError, match="token 'z'"):
        run.encode("z")


def test_trees_and_subleq_are_reachable_from_tpcore():
    assert np.isclose(tpcore.trees.bp("0 1 ? 3").root.sum(), 1.0)
    assert tpcore.subleq.run("multiply").agree


@pytest.mark.parametrize("edit, message", [
    (lambda m: [], "a list; expected an object"),
    (lambda m: {**m, "config": []}, "config is a list; expected an object"),
    (lambda m: {**m, "config": {**m["config"], "epochs": "3"}},
     'config.epochs is "3"; expected int'),
    (lambda m: {**m, "config": {**m["config"], "evil": 1}}, "config.evil is not a setting"),
    (lambda m: {**m, "config": {**m["config"], "n_samples": 2 * 10**8}},
     "n_samples=200000000; expected 20"),
    (lambda m: {**m, "config": {**m["config"], "d_mlp": 10**9}}, "of memory; the limit"),
    (lambda m: {**m, "task": "evil"}, 'task "evil" is not its config\'s'),
])
def test_a_crafted_metrics_file_is_refused_in_one_line(tiny_run, tmp_path, capsys, edit,
                                                       message):
    """Once a TypeError or KeyError from deep inside, or a 4.8 GB regeneration of the data."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_run.path, run)
    metrics = json.loads((run / "metrics.json").read_text())
    (run / "metrics.json").write_text(json.dumps(edit(metrics)))
    with pytest.raises(tpcore.TpcoreError, match=message):
        tpcore.load(run)
    assert main(["program", "eval", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "metrics.json" in err


@pytest.mark.parametrize("call, message", [
    (lambda: tpcore.learn("hist", epochs="3"), "learn option epochs is '3'; expected int"),
    (lambda: tpcore.learn("hist", epochs=1.5), "learn option epochs is 1.5; expected int"),
    (lambda: tpcore.learn("hist", layers=None), "learn option layers is None; expected int"),
    (lambda: tpcore.learn("hist", lr=float("nan")), "lr is nan; expected a finite number"),
    (lambda: tpcore.learn(5), "task 5: expected a task name"),
    (lambda: tpcore.load(None), r"load\(None\): expected a path"),
    (lambda: tpcore.load(SORT_RUN).program.explain("a b", 99), "position 99 outside"),
    (lambda: tpcore.load(SORT_RUN).program.evaluate("sort", n_samples=-5),
     "n_samples -5: expected an integer 20"),
    (lambda: tpcore.sort_list(tpcore.load(REPO / "results" / "sorting" / "causal.npz"),
                              [1.5, 3]), r"list \[1.5, 3\]: expected integers"),
])
def test_the_python_api_raises_tpcore_errors_naming_the_argument(call, message):
    """Once a TypeError, ValueError or a silently truncated list from deep inside."""
    with pytest.raises(tpcore.TpcoreError, match=message):
        call()


def test_a_sorting_model_trains_from_one_call():
    model, report = tpcore.train_sorter("causal", scale=0.002, seed=5)
    assert report["config"]["steps"] == 16 and len(report["history"]) == 16  # every step
    assert 0.0 <= report["random_lists_correct"] <= 1.0
    assert len(tpcore.sort_list(model, [3, 1, 2])) == 3
    with pytest.raises(tpcore.TpcoreError, match="scale 0: expected a number in"):
        tpcore.train_sorter("causal", scale=0)
    with pytest.raises(tpcore.TpcoreError, match="nope"):
        tpcore.train_sorter("nope")

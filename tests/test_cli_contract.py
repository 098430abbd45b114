"""The CLI contract: bad input of any kind is one line ``tpcore: error: ...`` naming the value,
exit status 2, no traceback; sizes are refused before work; Ctrl-C is 130 and a closed pipe 141.

Every bad invocation here is refused before any training or large allocation; resource failures
(permissions, a full disk, memory, recursion, missing packages) are simulated with monkeypatch.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tpcore
import tpcore.io
from tpcore.cli import main
from tpcore.commands.output import printable
from tpcore.errors import TpcoreError
from tpcore.programs import ir
from tpcore.subleq.examples import multiply

REPO = Path(__file__).resolve().parents[1]
CAUSAL = REPO / "results" / "sorting" / "causal"
SORT_RUN = str(REPO / "results" / "learn_sort")


def one_line_error(capsys, argv: list[str]) -> str:
    """Run ``tpcore ARGV``; assert exit 2 and a single ``tpcore: error:`` line; return it."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("tpcore: error: "), err
    assert "Traceback" not in err
    return err.strip()


BAD = [
    # unknown names get a did-you-mean
    (["lern", "sort"], "unknown choice 'lern'; did you mean 'learn'?"),
    (["trees", "bpp"], "unknown choice 'bpp'; did you mean 'bp'?"),
    (["learn", "srot"], "unknown task 'srot'; did you mean 'sort'?"),
    (["learn", "ner-dmeo"], "did you mean 'ner-demo'?"),
    (["looped", "run", "multiplu"], "unknown example 'multiplu'; did you mean 'multiply'?"),
    (["reproduce", "table1", "--tasks", "hist", "dyk1"], "did you mean 'dyck1'?"),
    (["reproduce", "sorting", "--tasks", "casual"], "did you mean 'causal'?"),
    # floats are finite, counts positive
    (["learn", "sort", "--lr", "nan"], "argument --lr: expected a finite number > 0, got 'nan'"),
    (["learn", "sort", "--lr", "inf"], "got 'inf'"),
    (["learn", "sort", "--lr", "-1"], "got '-1'"),
    (["learn", "sort", "--grad-clip", "-0.5"], "argument --grad-clip: expected a finite number"),
    (["learn", "sort", "--batch-size", "0"], "argument --batch-size: expected an integer >= 1"),
    (["learn", "sort", "--seed", "-1"], "argument --seed: expected an integer >= 0"),
    (["learn", "sort", "--n-samples", "5"], "n_samples=5; expected 20 (to split"),
    (["learn", "sort", "--samples", "1000000000"], "samples=1000000000 Gumbel samples"),
    (["learn", "sort", "--samples", "1e9"], "argument --samples: expected an integer >= 1"),
    (["learn", "sort", "--d-mlp", "1e9"], "argument --d-mlp: expected an integer >= 1"),
    (["nlp", "conll", "--train", "t", "--dev", "d", "--test", "t", "--batch-size", "0"],
     "argument --batch-size"),
    (["learn", "ner-demo", "--budget", "0"], "argument --budget: expected a finite number > 0"),
    (["learn", "ner-demo", "--epochs", "3"], "--epochs 3: the demos train each model for its "
                                             "own number of epochs; scale them all with --budget"),
    (["program", "eval", "any.json", "--task", "sort", "--n-samples", "0"],
     "argument --n-samples"),
    (["program", "eval", SORT_RUN, "--task", "sort", "--n-samples", "5"],
     "n_samples 5: expected an integer 20"),
    (["program", "eval", SORT_RUN, "--task", "sort", "--n-samples", "30000000"],
     "n_samples 30000000: expected an integer 20 (to split"),
    (["looped", "run", "multiply", "--lam", "nan"], "argument --lam"),
    (["trees", "sample", "--sigma", "inf"], "argument --sigma"),
    (["trees", "sample", "--grammar-seed", "4294967296"], "seed=4294967296 is invalid"),
    (["reproduce", "grammar-learning", "--sizes", "100,x"], "argument --sizes"),
    # a 0 is refused, not replaced by the default
    (["reproduce", "table1", "--epochs", "0"], "argument --epochs: expected an integer >= 1"),
    (["reproduce", "counting", "--epochs", "0"], "argument --epochs"),
    (["reproduce", "program-lengths", "--epochs", "0"], "argument --epochs"),
    (["reproduce", "hierarchy", "--mlm-steps", "0"], "argument --mlm-steps"),
    (["reproduce", "hierarchy", "--long-samples", "0"], "argument --long-samples"),
    (["looped", "run", "multiply", "--N", "0"], "layout N = 0; expected N >= 2"),
    (["looped", "run", "multiply", "--N", "64"], "expected 2 <= N <= 48"),
    (["looped", "run", "multiply", "--mem", "m.csv"],
     "memory CSV 'm.csv' goes with a commands CSV"),
    # sizes are checked before work, naming the estimate and the limit
    (["learn", "sort", "--max-len", "100000"], "N 100000"),
    (["learn", "sort", "--vocab-size", "1000000"], "|V| 1000000"),
    (["learn", "sort", "--d-mlp", "1000000000"], "d_mlp 1000000000"),
    (["learn", "sort", "--layers", "100000"], "100000 layers"),
    (["learn", "sort", "--n-samples", "1000000000"], "n_samples=1000000000; expected 20"),
    (["sweep", "sort", "--layers", "2", "100000"], "100000 layers"),
    (["looped", "run", "multiply", "--s", "100000"], "s=100000"),
    (["trees", "sample", "--q", "100000"], "q=100000 symbols"),
    (["trees", "bp", "--q", "100000", "0 1"], "q=100000 symbols"),
    (["trees", "sample", "--l", "60"], "depth l=60"),
    (["reproduce", "bp-table", "--samples", "1000000000"], "1000000000 trees"),
    (["learn", "hist", "--init-from", "p.json", "--init-parts", "read", "--init-strength",
      "1e308"], "init_strength 1e+308; expected a number in (0, 1000]"),
]


@pytest.mark.parametrize("argv,expected", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_and_exit_2(argv, expected, capsys):
    assert expected in one_line_error(capsys, argv)


def test_size_errors_name_estimate_and_limit(capsys):
    line = one_line_error(capsys, ["learn", "sort", "--max-len", "100000"])
    assert "needs about" in line and "GiB of memory; the limit is" in line


def test_a_run_larger_than_the_gpus_free_memory_is_refused_before_training(capsys, monkeypatch,
                                                                             tmp_path):
    monkeypatch.setattr("tpcore.limits.device_memory", lambda: (2**20, 80 * 2**30))
    line = one_line_error(capsys, ["learn", "sort", "--out", str(tmp_path / "run")])
    assert "of GPU memory; the GPU has 1 MiB free of 80 GiB" in line
    assert not (tmp_path / "run").exists()


def test_learn_config_estimate_is_near_the_measured_peak():
    from tpcore.pipelines.learn import LearnConfig

    assert 200 * 2**20 < LearnConfig().memory_estimate() < 300 * 2**20  # measured peak 217 MiB


def test_a_file_program_with_N_0_is_refused_not_run_at_8_bits(tmp_path, capsys):
    asm = tmp_path / "mul.asm"
    asm.write_text(multiply(3, 2))
    assert main(["looped", "run", str(asm)]) == 0
    capsys.readouterr()
    assert "layout N = 0" in one_line_error(capsys, ["looped", "run", str(asm), "--N", "0"])


def test_looped_examples_take_the_scratchpad_size(capsys):
    assert main(["looped", "run", "multiply", "--s", "3"]) == 0
    assert capsys.readouterr().out.startswith("layout: s=3 ")


def test_training_diverged_is_one_line(tmp_path, capsys):
    line = one_line_error(capsys, ["learn", "sort", "--lr", "1e30", "--layers", "1",
                                   "--epochs", "2", "--n-samples", "40", "--quiet",
                                   "--out", str(tmp_path / "run")])
    assert "loss became nan at step" in line and "last finite loss" in line


@pytest.mark.parametrize("exc,expected", [
    (PermissionError(errno.EACCES, "Permission denied", "out/t.npz"),
     "Permission denied: 'out/t.npz'"),
    (OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "out/t.npz"),
     f"{os.strerror(errno.ENOSPC)}: 'out/t.npz'"),
    (MemoryError("Unable to allocate 64.0 GiB for an array"), "out of memory: Unable to allocate"),
    (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
    (ModuleNotFoundError("No module named 'dask'", name="dask"),
     "dask is needed for this command and is not installed: pip install 'tpcore[dask]'"),
    (OverflowError("Python int too large to convert to C long"), "a number is too large"),
    (TypeError("'<' not supported"), "internal error TypeError: '<' not supported"),
])
def test_resource_failures_are_one_line(exc, expected, monkeypatch, tmp_path, capsys):
    def fail(*args, **kwargs):
        raise exc

    monkeypatch.setattr(tpcore.io, "write_npz", fail)
    line = one_line_error(capsys, ["trees", "sample", "--n", "2", "--out",
                                   str(tmp_path / "t.npz")])
    assert expected in line


def test_keyboard_interrupt_exits_130(monkeypatch, tmp_path, capsys):
    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tpcore.io, "write_npz", interrupt)
    assert main(["trees", "sample", "--n", "2", "--out", str(tmp_path / "t.npz")]) == 130
    assert capsys.readouterr().err == "tpcore: interrupted\n"


def test_a_closed_pipe_ends_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "tpcore.cli", "trees", "sample", "--n",
                             "100000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait() == 141 and err == b""


@pytest.fixture
def no_numba(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)


def test_kernel_without_numba_names_the_package(no_numba, capsys):
    line = one_line_error(capsys, ["looped", "run", "multiply", "--kernel"])
    assert line == "tpcore: error: numba is needed for --kernel: pip install numba"


def test_trees_bp_without_numba_falls_back_with_a_note(no_numba, capsys):
    assert main(["trees", "bp", "--l", "2", "0 1 ? 3"]) == 0
    captured = capsys.readouterr()
    assert "leaf 2 marginal" in captured.out
    assert captured.err.startswith("tpcore: note: numba is not installed")


def test_program_eval_without_numba_falls_back_with_a_note(no_numba, tmp_path, capsys):
    from tpcore.programs import ir
    from tpcore.programs.examples import reverse_program

    ir.save(reverse_program(words=list("abcdefgh")), tmp_path / "reverse.json")
    assert main(["program", "eval", str(tmp_path / "reverse.json"), "--task", "reverse",
                 "--n-samples", "40"]) == 0
    captured = capsys.readouterr()
    assert "token accuracy 100.00%" in captured.out
    assert captured.err.startswith("tpcore: note: numba is not installed")


def test_plots_without_matplotlib_are_refused_before_work(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    hint = "matplotlib is needed for --plots: pip install 'tpcore[plot]'"
    assert hint in one_line_error(capsys, ["sorting", "circuits", f"{CAUSAL}.npz", "--plots",
                                           str(tmp_path / "figs")])
    assert hint in one_line_error(capsys, ["reproduce", "sorting", "--plots", "--out",
                                           str(tmp_path / "sorting")])
    assert not (tmp_path / "sorting").exists()


def test_no_tqdm_means_no_bar_and_a_note(monkeypatch, capsys):
    from tpcore.train import progress

    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    bar = progress(10, "x", quiet=False)
    bar.update()
    bar.close()
    assert capsys.readouterr().err.startswith("tpcore: note: tqdm is not installed")


@pytest.fixture
def causal_copy(tmp_path):
    for suffix in (".npz", ".json"):
        shutil.copy(f"{CAUSAL}{suffix}", tmp_path / f"m{suffix}")
    return tmp_path / "m"


@pytest.mark.parametrize("edit,expected", [
    (lambda meta: "{not json", "not valid JSON"),
    (lambda meta: [1, 2], "expected a JSON object"),
    (lambda meta: {**meta, "config": None}, "key 'config' must be an object"),
    (lambda meta: {**meta, "config": {**meta["config"], "d_modle": 8}},
     "config key 'd_modle' is not a setting of TransformerConfig"),
    (lambda meta: {**meta, "config": {k: v for k, v in meta["config"].items()
                                      if k != "vocab_size"}}, "config key 'vocab_size' is missing"),
    (lambda meta: {**meta, "config": {**meta["config"], "n_layers": "2"}},
     "config key 'n_layers' is '2'; expected int"),
    (lambda meta: {**meta, "config": {**meta["config"], "dtype": "float7"}},
     "cannot build Transformer from its config"),
])
def test_malformed_model_json_names_the_file_and_key(causal_copy, edit, expected, capsys):
    meta_path = causal_copy.with_suffix(".json")
    new = edit(json.loads(meta_path.read_text()))
    meta_path.write_text(new if isinstance(new, str) else json.dumps(new))
    line = one_line_error(capsys, ["sorting", "sort", str(causal_copy), "3 1 2"])
    assert str(meta_path) in line and expected in line


def test_unreadable_weights_name_the_file(causal_copy, capsys):
    causal_copy.with_suffix(".npz").write_bytes(b"not a zip")
    line = one_line_error(capsys, ["sorting", "sort", str(causal_copy), "3 1 2"])
    assert f"{causal_copy}.npz: not a readable weights file" in line


def test_library_errors_stay_tpcore_errors():
    from tpcore.pipelines.learn import LearnConfig

    with pytest.raises(TpcoreError, match="need finite lr"):
        LearnConfig(lr=float("nan")).check()
    with pytest.raises(TpcoreError, match="needs about"):
        LearnConfig(max_len=100_000).check()


def test_an_underflowing_likelihood_is_refused_not_printed(capsys):
    """Once ``log Z = -inf`` and a meaningless root marginal, exit 0."""
    line = one_line_error(capsys, ["trees", "bp", "--sigma", "1e308",
                                   "0 3 ? 1 2 2 0 1 0 1 2 3 0 1 2 3"])
    assert "is -inf in float64" in line and "choose a smaller --sigma" in line


def test_json_output_is_standard_json(capsys):
    """``--json`` never writes NaN or Infinity (not JSON): a number that is not finite is null."""
    from tpcore.commands.output import emit

    emit(argparse.Namespace(json=True), {"loss": float("nan"), "rows": [1.0, float("-inf")]},
         "")
    doc = json.loads(capsys.readouterr().out,
                     parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    assert doc == {"loss": None, "rows": [1.0, None]}


def test_control_characters_in_labels_never_reach_the_terminal(tmp_path, capsys):
    """A class label ``\\x1b]0;...\\x07`` (a terminal's set-title sequence) was printed raw."""
    prog = tpcore.load(REPO / "results" / "learn_sort").program.ir
    evil = "\x1b]0;pwned\x07"
    data = ir.to_dict(prog)
    data["classifier"]["classes"] = [evil if c == "a" else c
                                     for c in data["classifier"]["classes"]]
    (tmp_path / "p.json").write_text(json.dumps(data))
    assert main(["program", "run", str(tmp_path / "p.json"), "d", "a", "c", "b"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;pwned\\x07" in out
    assert printable("a\tb\nc\x9b") == "a\tb\nc\\x9b"


def test_a_text_file_in_another_encoding_names_the_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.conll"
    bad.write_bytes(b"EU\tB-ORG\nrejects\tO\n\xff\xfe\tO\n")
    assert main(["nlp", "conll", "--train", str(bad), "--dev", str(bad), "--test",
                 str(bad)]) == 2
    assert f"{bad}:3: not UTF-8 text" in capsys.readouterr().err

"""Program files are untrusted data: nothing in them runs, every size is bounded before it is
allocated, and bad values are refused naming the value (a TpcoreError, never another error)."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.nn.module import save
from tpcore.pipelines.decompile import load_program
from tpcore.programs import generated, ir
from tpcore.programs import interpret as it
from tpcore.programs.examples import reverse_program
from tpcore.programs.source import build, grammar, reader, weights_csv, writer

ROOT = Path(__file__).resolve().parents[2]


def _injection(marker: str | Path) -> str:
    return f'sort"""; open("{marker}", "w"); """'


# 1. nothing a file says is executed ------------------------------------------------------------


def test_injected_program_name_is_refused_and_never_runs(tmp_path, monkeypatch):
    """A program.json whose name closes the generated docstring: `tpcore reproduce
    program-lengths --run-dirs DIR` used to import the generated program, running the code."""
    from tpcore.experiments import program_lengths
    from tpcore.pipelines.learn import LearnConfig, learn

    run = tmp_path / "run"
    learn(LearnConfig(task="reverse", n_layers=1, n_cat_heads=1, n_num_heads=0, n_cat_mlps=1,
                      n_num_mlps=0, d_mlp=8, epochs=1, batch_size=64, eval_every=1,
                      n_samples=200), run)
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "pwned"
    d = json.loads((run / "program.json").read_text())
    d["name"] = _injection("pwned")  # a file name: no slash, which broke the generated file
    (run / "program.json").write_text(json.dumps(d))
    with pytest.raises(TpcoreError, match="program name .* is not a name"):
        program_lengths.run(program_lengths.budget("small"), tmp_path / "out", 0,
                            run_dirs=[run])
    with pytest.raises(TpcoreError, match="program.json: .*program name"):
        load_program(run)
    assert not marker.exists()


@pytest.mark.parametrize("edit", [
    lambda d: d.update(name="../../escape"),
    lambda d: d["modules"][0].update(name="attn_0_0\nimport os"),
    lambda d: d["modules"][1].update(output="mlp_0_0_outputs)\nimport os"),
    lambda d: d["inputs"]["tokens"]["values"].append("x" * 1000),
    lambda d: d["inputs"]["tokens"]["values"].append(["a", "list"]),
    lambda d: d["modules"][1]["output_values"].__setitem__(0, 1e400),
    lambda d: d["classifier"]["features"].append("attn_1_0_outputs; import os"),
], ids=["traversal", "module-newline", "output-code", "long-label", "list-label", "inf-label",
        "feature-code"])
def test_names_and_labels_are_checked_on_load(edit):
    d = ir.to_dict(reverse_program())
    edit(d)
    with pytest.raises(TpcoreError, match="not a name|label|not a finite number"):
        ir.from_dict(d)


def test_labels_reach_generated_code_only_as_literals(tmp_path):
    """Labels that would end a docstring, a string or a comment stay data: the written program
    parses back under the strict grammar, runs without side effects and agrees."""
    marker = tmp_path / "pwned"
    words = [_injection(marker), "a\\", "\nimport os  # x", "'''", '"', "#", "x\ny"]
    p = reverse_program(words=words)
    path, _ = writer.write(p, tmp_path / "gen")
    back = reader.parse_file(path)
    assert back.tokens.values == p.tokens.values
    seqs = [["<s>", *words[:4], "</s>"], ["<s>", *words[3:], "</s>"]]
    assert generated.run_generated(p, seqs) == it.predict(p, seqs)
    assert not marker.exists()


def test_generated_programs_run_outside_this_process(tmp_path, monkeypatch):
    """The fidelity check runs the generated program in a child process."""
    def source(program, *args, **kwargs):
        return "import os\n\n\ndef run(tokens):\n    return [str(os.getpid())] * len(tokens)\n"

    monkeypatch.setattr(writer, "source", source)
    pid = generated.run_generated(reverse_program(), [["<s>", "1", "</s>"]])[0][0]
    assert pid != str(os.getpid()) and "generated" not in sys.modules


def test_output_paths_stay_inside_the_folder(tmp_path):
    p = reverse_program()
    p.name = "../escape"  # changed after validation: write still refuses it
    with pytest.raises(TpcoreError, match="program name '../escape' is not a name"):
        writer.write(p, tmp_path / "out")
    assert not (tmp_path / "escape.py").exists()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "reverse.py").symlink_to(tmp_path / "elsewhere.py")
    with pytest.raises(TpcoreError, match="resolves outside the output folder"):
        writer.write(reverse_program(), tmp_path / "out")
    assert not (tmp_path / "elsewhere.py").exists()


def test_no_code_execution_in_the_package():
    pattern = re.compile(r"exec_module\(|\bexec\(|\beval\(|allow_pickle *= *True|pickle\.load")
    hits = [f"{path.relative_to(ROOT)}:{n}" for folder in ("tpcore", "kernels")
            for path in sorted((ROOT / folder).rglob("*.py"))
            for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []


# 2. sizes are bounded before anything is allocated ---------------------------------------------


def _generated(tmp_path: Path) -> Path:
    path, _ = writer.write(reverse_program(), tmp_path / "gen")
    return path


@pytest.mark.parametrize("max_len, message", [
    (1_000_000_000, "MAX_LEN: 1,000,000,000 exceeds the limit of 4,096"),
    (4096, "mlp_0_0: table entries: 16,777,216 exceeds the limit"),  # (position, position)
])
def test_huge_max_len_is_refused_quickly(tmp_path, max_len, message):
    path = _generated(tmp_path)
    path.write_text(path.read_text().replace("MAX_LEN = 10\n", f"MAX_LEN = {max_len}\n"))
    start = time.perf_counter()
    with pytest.raises(TpcoreError, match=message):
        load_program(path)
    assert time.perf_counter() - start < 2


@pytest.mark.parametrize("expression", [
    "-" * 3000 + "0", "-" * 100 + "0", "(" * 300 + "0" + ")" * 300, "+".join(["0"] * 100_000),
], ids=["unary-3000", "unary-100", "parentheses-300", "sum-100000"])
def test_deep_nesting_is_a_tpcore_error(tmp_path, expression):
    path = _generated(tmp_path)
    text = path.read_text()
    old = 'return k_token == "</s>"'
    assert old in text
    path.write_text(text.replace(old, f"return k_token == {expression}", 1))
    with pytest.raises(grammar.ProgramSyntaxError, match="gen/reverse.py.*(nest|pars)"):
        load_program(path)


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deep_json_is_a_tpcore_error(tmp_path, depth):
    text = json.dumps({**ir.to_dict(reverse_program()), "meta": {"x": "DEEP"}})
    (tmp_path / "p.json").write_text(text.replace('"DEEP"', "[" * depth + "]" * depth))
    with pytest.raises(TpcoreError, match="p.json: .*(nested deeper|recursion)"):
        ir.load(tmp_path / "p.json")


@pytest.mark.parametrize("name", ["program.json", "reverse.py", "reverse_weights.csv"])
def test_oversize_files_are_refused_without_reading_them_whole(tmp_path, name):
    _generated(tmp_path)
    ir.save(reverse_program(), tmp_path / "gen" / "program.json")
    big = tmp_path / "gen" / name
    with open(big, "r+b") as f:
        f.truncate(100 * 2**20)  # sparse: 100 MB of NUL bytes
    tracemalloc.start()
    try:
        with pytest.raises(TpcoreError, match=f"{name}: .*larger than the limit"):
            load_program(big.with_name("reverse.py") if name.endswith(".csv") else big)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * ir.LIMITS.file_bytes + 2**20


# 3. weights -----------------------------------------------------------------------------------


def test_non_finite_ir_weights_name_the_row(tmp_path):
    d = ir.to_dict(reverse_program())
    d["classifier"]["weights"]["attn_1_0_outputs"][4][1] = float("nan")
    (tmp_path / "p.json").write_text(json.dumps(d))  # writes NaN, which json reads back
    with pytest.raises(TpcoreError, match="p.json: .*weights of 'attn_1_0_outputs' row 4: nan"):
        ir.load(tmp_path / "p.json")
    d = ir.to_dict(reverse_program())
    d["classifier"]["bias"][0] = 1e400
    with pytest.raises(TpcoreError, match="bias entry 0: inf"):
        ir.from_dict(d)


def _weights_lines(tmp_path: Path) -> tuple[Path, list[str]]:
    path = _generated(tmp_path)
    csv = path.with_name("reverse_weights.csv")
    return path, csv.read_text().splitlines()


@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity", "1e999"])
def test_non_finite_csv_weights_name_the_line(tmp_path, value):
    path, lines = _weights_lines(tmp_path)
    fields = lines[3].split(",")
    fields[3] = value
    lines[3] = ",".join(fields)
    path.with_name("reverse_weights.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(TpcoreError, match=rf"reverse.py:4: row \('{fields[0]}', "
                                          rf"'{re.escape(fields[1])}'\): weight '{value}'"):
        reader.parse_file(path)


def test_repeated_csv_rows_are_refused(tmp_path):
    path, lines = _weights_lines(tmp_path)
    path.with_name("reverse_weights.csv").write_text("\n".join(lines + [lines[2]]) + "\n")
    with pytest.raises(TpcoreError, match=f"reverse.py:{len(lines) + 1}: row .* repeats line 3"):
        reader.parse_file(path)


def test_non_finite_model_arrays_are_refused(tmp_path):
    vocab = ["<pad>", "<s>", "a", "b"]
    model = ProgramModel(ProgramConfig(vocab_size=4, max_len=5, n_classes=3, seed=2))
    save(model, tmp_path / "m.npz", {"task": "hist", "vocab": vocab, "classes": ["1", "2", "3"]})
    with np.load(tmp_path / "m.npz") as f:
        arrays = {k: f[k] for k in f.files}
    key = next(k for k, a in arrays.items() if a.dtype.kind == "f" and a.size)
    arrays[key].flat[0] = np.inf
    np.savez(tmp_path / "m.npz", **arrays)
    with pytest.raises(TpcoreError, match=f"m.npz: array '{re.escape(key)}' holds NaN or inf"):
        load_program(tmp_path / "m.npz")
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                  "shape": (10**10,)})
    with zipfile.ZipFile(tmp_path / "m.npz", "w") as z:
        z.writestr(f"{key}.npy", header.getvalue())  # claims 80 GB, holds nothing
    with pytest.raises(TpcoreError, match="m.npz: arrays of 80,000,000,000 bytes exceed"):
        load_program(tmp_path / "m.npz")


def _dyck(tmp_path: Path) -> Path:
    """A program in the authors' format whose CSV, like their Dyck programs', has ``_`` rows for
    unnamed vocabulary slots (scored high: they must not be reachable)."""
    p = reverse_program(words=["(", ")"], rule="published")
    path, csv = writer.write(p, tmp_path / "pub" / "dyck.py", style="published")
    n = len(p.classifier.kept())
    extra = [f"{f},_,{','.join(['9.5'] * n)}" for f in ("tokens", "attn_1_0_outputs")
             for _ in range(3)]
    csv.write_text(csv.read_text() + "\n".join(extra) + "\n")
    return path


def test_unnamed_csv_rows_are_dropped_and_the_reemitted_program_runs(tmp_path):
    q = reader.parse_file(_dyck(tmp_path))
    assert "_" not in q.tokens.values and "_" not in q.variables["attn_1_0_outputs"].values
    with pytest.raises(TpcoreError, match="token '_'"):
        it.predict(q, [["<s>", "_", "</s>"]])
    path, _ = writer.write(q, tmp_path / "again")
    out = subprocess.run([sys.executable, str(path), "(", ")", ")"], capture_output=True,
                         text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == it.predict(q, [["<s>", "(", ")", ")", "</s>"]])[0][1:-1] == [
        ")", ")", "("]


def test_codegen_refuses_rows_the_csv_cannot_tell_apart():
    p = reverse_program(words=["_", "a"])
    with pytest.raises(TpcoreError, match="'attn_1_0_outputs' has the label _"):
        weights_csv.write(p)


def test_the_work_of_a_run_is_bounded_before_it_starts(monkeypatch):
    """A 177 KB IR of 1,000 heads at N = 4096 ran for over a minute on 4,095 tokens."""
    prog = reverse_program()
    heads = sum(isinstance(m, ir.Head) for m in prog.modules)
    with pytest.raises(TpcoreError, match=rf"\({heads} heads, .* on 1000000 sequences of "
                                          r"length 4096 computes about .* the limit is 4.29e\+09"):
        it.check_work(prog, 10**6, 4096)
    it.check_work(prog, 10**5, 8)   # the bench's batch
    monkeypatch.setattr(it, "LIMITS", dataclasses.replace(it.LIMITS, work=10))
    with pytest.raises(TpcoreError, match="the limit is 10"):
        it.predict(prog, [prog.frame(["1", "2"])])


def test_the_tables_of_an_imported_program_are_bounded_together(tmp_path, monkeypatch):
    """200 MLPs of ``return 0``, each within the bound of one table, took 49 s and 4.1 GB."""
    path, _ = writer.write(reverse_program(), tmp_path / "gen", compress=False)
    whole = sum(m.table.size for m in reader.parse_file(path).modules if isinstance(m, ir.Mlp))
    assert whole > 0
    monkeypatch.setattr(build, "LIMITS", dataclasses.replace(build.LIMITS,
                                                             total_table=whole - 1))
    with pytest.raises(TpcoreError, match="table entries of all MLPs up to"):
        reader.parse_file(path)


@pytest.mark.parametrize("field, name", [("variable", "len"), ("module", "classify"),
                                         ("variable", "predictions")])
def test_names_a_generated_program_uses_itself_are_refused(field, name):
    """An IR variable named ``len`` was accepted, and its exported program crashed when run."""
    d = ir.to_dict(reverse_program())
    module = next(m for m in d["modules"] if m["type"] == "mlp")
    if field == "module":
        module["name"] = name
    else:
        old = module["output"]
        module["output"] = name
        d = json.loads(json.dumps(d).replace(f'"{old}"', f'"{name}"'))
    with pytest.raises(TpcoreError, match=f"'{name}' is a name the generated program uses"):
        ir.from_dict(d)


def test_the_reserved_names_cover_what_a_generated_program_defines():
    import ast

    from tpcore.programs.values import RESERVED

    prog = reverse_program()
    tree = ast.parse(writer.source(prog))
    top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    top |= {a.asname or a.name for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)
            for a in n.names}
    top |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
            if isinstance(t, ast.Name)}
    run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    assigned = {t.id for n in run.body if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)}
    own = set(prog.variables) | {m.name for m in prog.modules}
    derived = {a for a in assigned if a.endswith("_pattern")}
    assert top <= RESERVED and assigned - own - derived <= RESERVED | set(ir.INPUTS)


def _many_mlps(folder: Path, count: int, max_len: int) -> Path:
    """A program file of ``count`` numerical MLPs ``return 0`` over two prefix counts of
    ``max_len`` values each: a few KB whose tables hold ``count * max_len^2`` entries."""
    from tpcore.programs.examples import base_variables

    v = base_variables(4, 6)
    mods: list = []
    for t in ("0", "1"):
        v[f"prefix_count_{t}"] = ir.Variable(f"prefix_count_{t}", "numerical", tuple(range(6)))
        mods.append(ir.PrefixCount(f"prefix_count_{t}", t, f"prefix_count_{t}"))
    v["num_mlp_0_0_outputs"] = ir.Variable("num_mlp_0_0_outputs", "categorical", (0,))
    mods.append(ir.Mlp("num_mlp_0_0", "numerical", ("prefix_count_0", "prefix_count_1"),
                       "num_mlp_0_0_outputs", np.zeros((6, 6), dtype=np.int64), 0))
    classes = v["tokens"].values[3:]
    weights = {"tokens": np.zeros((v["tokens"].size, len(classes))),
               "num_mlp_0_0_outputs": np.ones((1, len(classes)))}
    clf = ir.Classifier(classes, tuple(weights), weights, np.zeros(len(classes)))
    prog = ir.Program("many", v, mods, clf, bos="<s>", eos="</s>", pad="<pad>")
    path, csv = writer.write(prog, folder, compress=False)
    text = path.read_text().replace("MAX_LEN = 6", f"MAX_LEN = {max_len}")
    start = text.index("    # num_mlp_0_0 #")
    block = ("    def num_mlp_0_{i}(prefix_count_0, prefix_count_1):\n        return 0\n\n"
             "    num_mlp_0_{i}_outputs = [\n        num_mlp_0_{i}(k0, k1) for k0, k1 in "
             "zip(prefix_count_0, prefix_count_1)\n    ]\n\n")
    features = "".join(f'        ("num_mlp_0_{i}_outputs", num_mlp_0_{i}_outputs),\n'
                       for i in range(count))
    text = (text[:start] + "".join(block.format(i=i) for i in range(count))
            + '    features = [\n        ("tokens", tokens),\n' + features + "    ]\n"
            + text[text.index("    predictions = classify"):])
    path.write_text(text)
    rows = [r for r in csv.read_text().splitlines() if not r.startswith("num_mlp")]
    rows += [f"num_mlp_0_{i}_outputs,0" + ",1.0" * len(classes) for i in range(count)]
    csv.write_text("\n".join(rows) + "\n")
    return path


def test_many_small_tables_are_refused_quickly(tmp_path):
    """200 MLPs of ``return 0`` over two prefix counts (32 KB) took 49 s and 4.1 GB."""
    path = _many_mlps(tmp_path, 200, 1448)
    start = time.perf_counter()
    tracemalloc.start()
    try:
        with pytest.raises(TpcoreError, match="table entries of all MLPs up to num_mlp_0_"):
            reader.parse_file(path)
        assert tracemalloc.get_traced_memory()[1] < 200 * 2**20
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 16.0  # a third of the 49 s, on a shared, loaded machine
    small = reader.parse_file(_many_mlps(tmp_path / "small", 3, 6))
    assert sum(isinstance(m, ir.Mlp) for m in small.modules) == 3

"""Figures: each writes a PNG on a tiny input; program figures read the IR's predicates; the
dependency graph's DOT text names every variable and read."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from tpcore.analysis import depgraph
from tpcore.analysis.curves import curves_figure, find_histories, series
from tpcore.analysis.program_figures import (
    attention_maps,
    example_input,
    heads,
    predicate_matrix,
    write_program_figures,
)
from tpcore.errors import TpcoreError
from tpcore.programs.examples import random_program, reverse_program
from tpcore.programs.interpret import encode, evaluate, key_mask

PNG = b"\x89PNG\r\n\x1a\n"


def is_png(path) -> bool:
    data = path.read_bytes()
    return data.startswith(PNG) and len(data) > 1000


@pytest.fixture
def plt():
    return pytest.importorskip("matplotlib")


HISTORY = [{"step": 10, "loss": 2.0, "acc": 0.5, "seq_acc": 0.1, "epoch": 1.0},
           {"step": 20, "loss": 1.0, "acc": 0.7, "seq_acc": 0.3, "epoch": 2.0}]


def test_find_histories_finds_nested_lists_with_their_holder():
    doc = {"task": "x", "transformer": {"history": HISTORY, "selected_at_step": 20},
           "runs": [{"history": HISTORY}], "history": "not a list"}
    found = {path: holder for path, _, holder in find_histories(doc)}
    assert set(found) == {"transformer", "runs[0]"}
    assert found["transformer"]["selected_at_step"] == 20
    assert find_histories({"history": [{"loss": 1.0}]}) == []  # rows without a step


def test_series_leaves_out_the_x_axis_timing_and_nested_values():
    rows = [{"step": 1, "loss": 0.5, "epoch": 0.1, "train_seconds": 3.0, "0": {"acc": 1.0},
             "flag": True}]
    assert series(rows) == {"loss": ([1.0], [0.5])}


def test_curves_figure_writes_a_png(plt, tmp_path):
    path = curves_figure([("", HISTORY), ("other", HISTORY[:1])], tmp_path / "c.png", "title",
                         [20, None], "validation split")
    assert is_png(path)
    with pytest.raises(TpcoreError, match="no numeric training curves"):
        curves_figure([("", [{"step": 1}])], tmp_path / "d.png", "title")
    assert not (tmp_path / "d.png").exists()


def test_panels_and_table_heatmaps_write_pngs(plt, tmp_path):
    from tpcore.analysis.plots import Level, Line, Panel, panels_figure, table_heatmaps

    panels = [Panel("a", [Line("x", [1, 10, 100], [1.0, 0.5, 0.2])], [Level("bound", 0.3)]),
              Panel("b", [Line("y", [1, 10], [2.0, 1.0], style="--", marker="")])]
    assert is_png(panels_figure(panels, tmp_path / "p.png", "t", "x", "y", logx=True,
                                logy=True))
    m = np.array([[10.0, np.nan], [90.0, 50.0]])
    assert is_png(table_heatmaps([("ours", m), ("paper", m)], ["r1", "r2"], ["c1", "c2"],
                                 tmp_path / "h.png", "t", "accuracy %", 0, 100))


def test_predicate_matrix_is_the_ir_predicate():
    p = random_program(3)
    for h in heads(p):
        m = predicate_matrix(p, h)
        assert m.shape == (p.variables[h.query].size, p.variables[h.key].size)
        for q, k in enumerate(h.predicate):
            assert m[q].sum() == (k >= 0)
            if k >= 0:
                assert m[q, k]


def test_attention_maps_follow_the_heads_rules():
    p = random_program(4)
    tokens = example_input(p)
    assert len(tokens) == p.max_len and tokens[0] == p.bos and tokens[-1] == p.eos
    maps = attention_maps(p, tokens)
    ids, lengths = encode(p, [tokens])
    env = evaluate(p, ids, lengths)
    mask = key_mask(lengths, len(tokens), p.causal)
    for h in heads(p):
        a = maps[h.name]
        scores = h.match_scores(env[h.query], env[h.key], mask)[0]
        if h.kind == "categorical":
            assert (a.sum(axis=1) == 1).all()
            read = a.argmax(axis=1)
            # what the head reads is its output: the value at the chosen key
            assert (env[h.value][0, read] == env[h.output][0]).all()
        else:
            assert (a == scores).all()
            assert np.allclose(a @ env[h.value][0], env[h.output][0])


def test_dot_text_names_every_variable_and_read():
    p = random_program(5)
    text = depgraph.dot_text(p)
    assert text.startswith('digraph "random5" {') and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")
    for name in p.variables:
        assert f'"{name}" [label=' in text
    for m in p.modules:
        for r in m.reads:
            assert f'"{r}" -> "{m.output}"' in text
    for f in p.classifier.features:
        assert f'"{f}" -> "classifier"' in text
    edges = re.findall(r'^  "[^"]+" -> "[^"]+"', text, flags=re.M)
    assert len(edges) == sum(len(m.reads) for m in p.modules) + len(p.classifier.features)


def test_dot_text_quotes_names_and_marks_unused_variables():
    p = reverse_program(words=list("abcd"))
    text = depgraph.dot_text(p)
    unused = set(p.variables) - {"tokens", "positions", "ones"} - set(
        r for m in p.modules for r in m.reads) - set(p.classifier.features)
    for name in unused:
        assert re.search(rf'"{name}" \[.*dashed', text)
    assert depgraph._quote('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'


def test_layers_put_every_module_below_what_it_reads():
    p = random_program(6, layers=3)
    row = depgraph.layers(p)
    assert {row[x] for x in ("tokens", "positions", "ones")} == {0}
    for m in p.modules:
        assert all(row[r] < row[m.output] for r in m.reads)
    assert row["classifier"] == max(row.values())
    # a layer's heads share a row, its MLPs the next one
    assert row["attn_0_0_outputs"] == row["num_attn_0_3_outputs"] == 1
    assert row["mlp_0_0_outputs"] == 2 and row["attn_1_0_outputs"] == 3


def test_graph_png_without_graphviz_is_drawn_with_matplotlib(plt, tmp_path, monkeypatch):
    monkeypatch.setattr(depgraph.shutil, "which", lambda name: None)
    path, how = depgraph.graph_png(random_program(7), tmp_path / "g.png")
    assert how == "matplotlib" and is_png(path)


def test_write_program_figures(plt, tmp_path):
    p = reverse_program(words=list("abcd"))
    out = write_program_figures(p, tmp_path, tokens=["c", "a", "b"])
    names = sorted(f.name for f in out["files"])
    assert names == ["reverse_attention.png", "reverse_graph.dot", "reverse_graph.png",
                     "reverse_predicates.png"]
    assert out["input"] == ["<s>", "c", "a", "b", "</s>"]
    for f in out["files"]:
        assert f.suffix == ".dot" or is_png(f)


def test_labels_are_drawn_literally(plt, tmp_path):
    from tpcore.analysis.plots import literal

    assert literal("a$b") == "a\\$b" and literal(3) == "3"
    p = reverse_program(words=["$", "a$b", "c"])
    out = write_program_figures(p, tmp_path, tokens=["$", "a$b", "c"])
    assert out["input"] == ["<s>", "$", "a$b", "c", "</s>"]
    assert all(f.suffix == ".dot" or is_png(f) for f in out["files"])


@pytest.mark.skipif(os.name != "posix", reason="a shell script stands in for dot")
def test_graph_png_runs_graphviz_dot_on_the_dot_text(tmp_path, monkeypatch):
    """With a ``dot`` on the PATH the PNG is its rendering of :func:`dot_text` (a stand-in
    script here records its input and arguments); a failing ``dot`` is one error naming it."""
    script = tmp_path / "dot"
    script.write_text('#!/bin/sh\ncat > "$(dirname "$0")/input.dot"\n'
                      'echo "$@" > "$(dirname "$0")/args"\nwhile [ "$1" != "-o" ]; do shift; done\n'
                      'printf "PNG" > "$2"\n')
    script.chmod(0o755)
    monkeypatch.setattr(depgraph.shutil, "which", lambda name: str(script))
    p = random_program(8)
    path, how = depgraph.graph_png(p, tmp_path / "g.png")
    assert how == "graphviz" and path.read_bytes() == b"PNG"
    assert (tmp_path / "input.dot").read_text() == depgraph.dot_text(p)
    assert (tmp_path / "args").read_text().split()[:2] == ["-Tpng", "-Gdpi=110"]
    script.write_text("#!/bin/sh\necho 'syntax error' >&2\nexit 1\n")
    with pytest.raises(TpcoreError, match="Graphviz dot could not draw.*syntax error"):
        depgraph.graph_png(p, tmp_path / "h.png")
    assert not (tmp_path / "h.png").exists()


def test_patterns_figure_draws_each_head_of_a_cached_layer(plt, tmp_path):
    from tpcore.analysis.plots import patterns_figure
    from tpcore.errors import TpcoreError
    from tpcore.models.transformer import Transformer, TransformerConfig

    model = Transformer(TransformerConfig(vocab_size=5, max_len=4, d_model=8, n_heads=2))
    _, cache = model.run_with_cache(np.array([[1, 2, 3, 4]]))
    path = patterns_figure(cache["pattern", 0][0], ["a", "b", "c", "d"], "layer 0",
                           tmp_path / "p.png")
    assert is_png(path)
    fig = patterns_figure(cache["pattern", 0][0], list("abcd"), "layer 0")
    assert len([a for a in fig.axes if a.get_title().startswith("head")]) == 2
    with pytest.raises(TpcoreError, match=r"expected \(heads, N, N\) for the 3 labels"):
        patterns_figure(cache["pattern", 0][0], list("abc"), "x")

"""Property-based fuzzing of the program readers: the IR loader, the program-file parser and the
weights reader. Whatever the input (random JSON, random text, or valid programs with a few
mutations, which reach deep code), each ends in a usable program or a TpcoreError, never another
exception, within the deadline."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpcore.errors import TpcoreError
from tpcore.programs import interpret as it
from tpcore.programs import ir
from tpcore.programs.examples import random_program, reverse_program
from tpcore.programs.ir import (
    ExpertCount,
    Head,
    PrefixCount,
    RunningCount,
    Variable,
    expert_values,
)
from tpcore.programs.source import reader, weights_csv, writer

pytestmark = pytest.mark.host_only("fuzzes the IR and program-file parsers (host data)")

FUZZ = settings(max_examples=150, deadline=2000, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _counting_program() -> ir.Program:
    """The reverse program plus a prefix count, a running count, an expert gate and a numerical
    head over the prefix count."""
    p = reverse_program(vocab=5, max_len=6)
    v = dict(p.variables)
    v["prefix_count_1"] = Variable("prefix_count_1", "numerical", tuple(range(6)))
    v["running_count"] = Variable("running_count", "numerical", tuple(range(1, 7)))
    rng = np.random.default_rng(0)
    gate = ExpertCount("experts", "expert_count", rng.normal(size=(5, v["tokens"].size)),
                       rng.normal(size=5))
    v["expert_count"] = Variable("expert_count", "numerical", expert_values(
        gate, v["tokens"], p.bos, p.eos, p.pad, p.max_len))
    v["num_attn_2_0_outputs"] = Variable("num_attn_2_0_outputs", "numerical",
                                         ir.numerical_range(v["prefix_count_1"], 6))
    head = Head("num_attn_2_0", "numerical", "tokens", "positions", "prefix_count_1",
                "num_attn_2_0_outputs", np.arange(v["tokens"].size) % 6, "closest")
    feats = (*p.classifier.features, "prefix_count_1", "running_count", "num_attn_2_0_outputs")
    weights = {**p.classifier.weights, **{f: rng.normal(size=(1, len(p.classifier.classes)))
                                          for f in feats[-3:]}}
    clf = ir.Classifier(p.classifier.classes, feats, weights, p.classifier.bias)
    return ir.Program("counting", v, [PrefixCount("prefix_count_1", "1", "prefix_count_1"),
                                      RunningCount("running_count", "running_count"), gate,
                                      *p.modules, head], clf, bos="<s>", eos="</s>", pad="<pad>")


PROGRAMS = [reverse_program(vocab=5, max_len=6), _counting_program(),
            random_program(1, layers=1, vocab=5, max_len=5, causal=True),
            random_program(2, layers=2, cat_heads=1, num_heads=1, vocab=4, max_len=4)]
DICTS = [ir.to_dict(p) for p in PROGRAMS]
FILES = [(writer.source(p), weights_csv.write(p)) for p in PROGRAMS if not any(
    isinstance(m, ExpertCount) for m in p.modules)]
PUBLISHED = reverse_program(vocab=5, max_len=6, rule="published")
FILES.append((writer.source(PUBLISHED, style="published", weights_file="pub_weights.csv"),
              weights_csv.write(PUBLISHED, published=True)))

ODD = [None, True, -1, 0, 1, 2**31, 10**400, 1e308, float("nan"), float("inf"), -0.5, "", "_",
       "tokens", "positions", "ones", "x" * 300, "<s>", [], {}, [[0, 0]], {"a": 1}]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20)


def _slots(d: Any) -> list[tuple[Any, Any]]:
    """Every ``(container, key or index)`` in ``d``."""
    out, stack = [], [d]
    while stack:
        x = stack.pop()
        for k, e in (x.items() if isinstance(x, dict) else enumerate(x)):
            out.append((x, k))
            if isinstance(e, (dict, list)):
                stack.append(e)
    return out


def _leaves(d: Any) -> list[Any]:
    return [c[k] for c, k in _slots(d) if not isinstance(c[k], (dict, list))]


@st.composite
def mutated_dicts(draw: st.DrawFn) -> Any:
    """A valid program dict with 1-4 edits: a value replaced (by another value of the program,
    an odd value or random JSON), removed, or a list entry repeated."""
    base = draw(st.sampled_from(DICTS))
    d = copy.deepcopy(base)
    pool = _leaves(base) + ODD
    for _ in range(draw(st.integers(1, 4))):
        slots = _slots(d)
        c, k = slots[draw(st.integers(0, len(slots) - 1))]
        action = draw(st.sampled_from(["swap", "odd", "json", "drop", "repeat"]))
        if action == "swap":
            c[k] = draw(st.sampled_from(pool))
        elif action == "odd":
            c[k] = copy.deepcopy(draw(st.sampled_from(ODD)))
        elif action == "json":
            c[k] = draw(JSON)
        elif action == "drop":
            del c[k]
        elif isinstance(c, list):
            c.insert(k, copy.deepcopy(c[k]))
    return d


@pytest.fixture(scope="module", autouse=True)
def compiled_kernel():
    """Compile (or load) the numba kernel before the deadlines start."""
    it.predict(PROGRAMS[0], [["<s>", "1", "</s>"]], engine="numba")


def _usable(p: ir.Program) -> None:
    """A loaded program runs and writes: both engines agree on one input; its source and
    weights are written."""
    content = [t for t in p.tokens.values if t not in (p.bos, p.eos, p.pad)][:2]
    try:
        ids, lengths = it.encode(p, [p.frame(content)])
    except TpcoreError:
        pass
    else:
        np.testing.assert_array_equal(it.run_ids(p, ids, lengths, "numpy"),
                                      it.run_ids(p, ids, lengths, "numba"))
    writer.source(p)
    try:
        weights_csv.write(p)
    except TpcoreError:
        pass


def _ends_well(load: Callable[[], ir.Program]) -> None:
    try:
        p = load()
    except TpcoreError:
        return
    _usable(p)


@FUZZ
@given(JSON)
def test_ir_from_random_json(d):
    _ends_well(lambda: ir.from_dict(d))


@FUZZ
@given(mutated_dicts())
def test_ir_from_mutated_programs(d):
    _ends_well(lambda: ir.from_dict(d))


@FUZZ
@given(mutated_dicts(), st.data())
def test_ir_load_of_mutated_json_text(tmp_path_factory, d, data):
    text = json.dumps(d)
    cut = data.draw(st.integers(0, len(text)))
    text = data.draw(st.sampled_from([text, text[:cut], text[:cut] + text[cut + 1:],
                                      text[:cut] + data.draw(st.text(max_size=5)) + text[cut:]]))
    path = tmp_path_factory.mktemp("ir") / "p.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _ends_well(lambda: ir.load(path))


TOKEN = re.compile(r'"[^"\n]*"|\w+|[^\w\s]')


def _mutate_text(data: st.DataObject, text: str, edits: int) -> str:
    """``text`` with ``edits`` edits: a line deleted, repeated or replaced by another, or a
    token (literal, name or symbol) replaced by another of the file or by random text."""
    for _ in range(edits):
        lines = text.split("\n")
        i = data.draw(st.integers(0, len(lines) - 1))
        action = data.draw(st.sampled_from(["delete", "repeat", "replace", "token", "text"]))
        if action == "delete":
            del lines[i]
        elif action == "repeat":
            lines.insert(i, lines[i])
        elif action == "replace":
            lines[i] = data.draw(st.sampled_from(lines))
        else:
            spans = [m.span() for m in TOKEN.finditer(lines[i])]
            if spans:
                a, b = spans[data.draw(st.integers(0, len(spans) - 1))]
                new = (data.draw(st.sampled_from(TOKEN.findall(text))) if action == "token"
                       else data.draw(st.text(max_size=6)))
                lines[i] = lines[i][:a] + new + lines[i][b:]
        text = "\n".join(lines)
    return text


@FUZZ
@given(st.data())
def test_parse_of_mutated_program_files(data):
    source, weights = data.draw(st.sampled_from(FILES))
    source = _mutate_text(data, source, data.draw(st.integers(1, 3)))
    _ends_well(lambda: reader.parse_source(source, weights, "fuzz.py"))


@FUZZ
@given(st.data())
def test_parse_of_mutated_weights(data):
    source, weights = data.draw(st.sampled_from(FILES))
    weights = _mutate_text(data, weights, data.draw(st.integers(1, 3)))
    _ends_well(lambda: reader.parse_source(source, weights, "fuzz.py"))


@FUZZ
@given(st.text(max_size=300), st.text(max_size=300))
def test_parse_of_random_text(source, weights):
    _ends_well(lambda: reader.parse_source(source, weights, "fuzz.py"))

"""Property-based fuzzing of the readers of what tpcore writes and reads back: a run's
``metrics.json`` (its configuration included), ``run.json``, a paused state, a cached result and
an ``.npz``. Structurally valid files with hostile values (other types, sizes, shapes, dtypes,
deep or long values) end in a result or a TpcoreError (``ValueError`` for the low-level npz
reader), never another exception, within the deadline and without growing memory. The program
readers have their own fuzz (tests/programs/test_fuzz.py)."""

from __future__ import annotations

import copy
import io
import json
import resource
import shutil
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpcore.errors import TpcoreError
from tpcore.io import read_npz
from tpcore.pipelines.learn import LearnConfig, learn, recorded_run
from tpcore.rundir import RECORD, RunDir, cached
from tpcore.train_state import load_state

pytestmark = pytest.mark.host_only("fuzzes files on the host")

FUZZ = settings(max_examples=120, deadline=2000, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

TINY = LearnConfig(task="induction", n_layers=1, n_cat_heads=1, n_num_heads=0, n_cat_mlps=0,
                   n_num_mlps=0, epochs=2, batch_size=32, eval_every=1, n_samples=60)

HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
    st.lists(st.integers(), max_size=5), st.dictionaries(st.text(max_size=5), st.integers(),
                                                         max_size=3),
    st.just(10**9), st.just(-1), st.just(2**63), st.just("x" * 10_000))
"""Values put where a file holds another: other types, extremes, long and nested values."""


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fuzz") / "run"
    learn(TINY, out, pause_after=None)
    return out


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into the JSON ``value``."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(doc: Any, data: st.DataObject) -> Any:
    """``doc`` with one value, anywhere, replaced by a hostile one (or a key removed)."""
    doc = copy.deepcopy(doc)
    path = data.draw(st.sampled_from(_paths(doc)[1:]))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and data.draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(HOSTILE)
    return doc


def _bounded(call) -> Any:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        return call()
    finally:
        assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 200


@FUZZ
@given(data=st.data())
def test_metrics_json(run, tmp_path_factory, data):
    doc = _mutate(json.loads((run / "metrics.json").read_text()), data)
    folder = tmp_path_factory.mktemp("m")
    (folder / "metrics.json").write_text(json.dumps(doc))
    try:
        _bounded(lambda: recorded_run(folder))
    except TpcoreError:
        pass


@FUZZ
@given(data=st.data())
def test_run_json(run, tmp_path_factory, data):
    doc = _mutate(json.loads((run / RECORD).read_text()), data)
    folder = tmp_path_factory.mktemp("r") / "run"
    shutil.copytree(run, folder)
    (folder / RECORD).write_text(json.dumps(doc))
    try:
        _bounded(lambda: RunDir(folder, TINY.settings()))
    except TpcoreError:
        pass


@FUZZ
@given(data=st.data())
def test_cached_result(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("c")
    path = folder / "result.json"
    cached(path, {"a": 1}, lambda: {"value": 3.5, "rows": [1, 2]})
    doc = _mutate(json.loads(path.read_text()), data)
    path.write_text(json.dumps(doc))
    try:
        _bounded(lambda: cached(path, {"a": 1}, lambda: {"value": 3.5, "rows": [1, 2]}))
    except TpcoreError:
        pass


@pytest.fixture(scope="module")
def paused(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("p") / "run"
    cfg = LearnConfig(**{**TINY.settings(), "epochs": 4})
    learn(cfg, out, pause_after=2)
    folder = out.with_name(f".{out.name}.partial")
    return next(p.parent for p in folder.rglob("state.json"))


@FUZZ
@given(data=st.data())
def test_paused_state(paused, tmp_path_factory, data):
    doc = _mutate(json.loads((paused / "state.json").read_text()), data)
    folder = tmp_path_factory.mktemp("s")
    for f in paused.iterdir():
        if f.is_file():
            shutil.copy(f, folder / f.name)
    (folder / "state.json").write_text(json.dumps(doc))
    try:
        _bounded(lambda: load_state(folder))
    except TpcoreError:
        pass


def _npy_header(shape: tuple, descr: str, fortran: bool) -> bytes:
    text = f"{{'descr': {descr!r}, 'fortran_order': {fortran}, 'shape': {shape}, }}"
    text += " " * (63 - (10 + len(text)) % 64) + "\n"
    return np.lib.format.magic(1, 0) + struct.pack("<H", len(text)) + text.encode()


DESCRS = st.sampled_from(["<f4", "<f8", ">f8", "<i8", "|b1", "|u1", "<c16", "<M8[s]", "|O",
                          "<U3", "|V8", "<f2"])


@FUZZ
@given(shape=st.lists(st.integers(-5, 2**40), min_size=0, max_size=3).map(tuple),
       descr=DESCRS, fortran=st.booleans(), extra=st.integers(-64, 64),
       method=st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2,
                               zipfile.ZIP_LZMA]))
def test_npz(tmp_path_factory, shape, descr, fortran, extra, method):
    path = tmp_path_factory.mktemp("n") / "x.npz"
    body = bytes(max(0, min(4096, 8 * int(np.prod(shape, dtype=object)) if shape else 8)
                     + extra))
    with zipfile.ZipFile(path, "w", compression=method) as z:
        z.writestr("a.npy", _npy_header(shape, descr, fortran) + body)
    try:
        out = _bounded(lambda: read_npz(path, 2**24))
    except ValueError:
        return
    assert set(out) == {"a"} and out["a"].dtype.kind in "fiub"
    buf = io.BytesIO()
    np.save(buf, out["a"])

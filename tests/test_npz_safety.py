"""Weights files read safely: headers checked before any data is inflated, compressed members
bounded by what their headers declare, only float weights accepted and checked after the cast
to the model's dtype. Each hostile file is refused in one line, quickly and without memory."""

import io
import resource
import shutil
import struct
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

import tpcore
from tpcore.cli import main
from tpcore.errors import TpcoreError
from tpcore.io import read_npz

pytestmark = pytest.mark.host_only("crafts files on the host")

CAUSAL = Path(__file__).resolve().parents[1] / "results" / "sorting" / "causal"


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def _header(shape: tuple, descr: str = "<f4") -> bytes:
    """An ``.npy`` header declaring ``shape`` (negative sizes allowed), without data."""
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    text += " " * (63 - (10 + len(text)) % 64) + "\n"
    return np.lib.format.magic(1, 0) + struct.pack("<H", len(text)) + text.encode()


def _model_copy(tmp_path: Path, name: str, replace: dict, method=zipfile.ZIP_STORED) -> Path:
    """The causal sorter's weights with members replaced by raw ``.npy`` bytes."""
    shutil.copy(CAUSAL.with_suffix(".json"), tmp_path / f"{name}.json")
    arrays = dict(np.load(CAUSAL.with_suffix(".npz")))
    path = tmp_path / f"{name}.npz"
    with zipfile.ZipFile(path, "w", compression=method) as z:
        for key, array in arrays.items():
            if key not in replace:
                z.writestr(f"{key}.npy", _npy(array))
        for key, data in replace.items():
            z.writestr(f"{key}.npy", data)
    return path


def _refused(path: Path, match: str) -> None:
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(TpcoreError, match=match):
        tpcore.load(path)
    assert time.perf_counter() - start < 2.0
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 200


def test_a_bzip2_bomb_is_refused_before_inflating(tmp_path):
    """14.7 KB declaring 3 GiB of zeros took 28 s and 6.3 GB before its shape was refused."""
    zeros = _header((3 * 2**30 // 4,)) + bytes(2**20)   # the header and a first MiB
    path = _model_copy(tmp_path, "bz", {"tok_emb": zeros}, zipfile.ZIP_BZIP2)
    _refused(path, "compressed with method 12; expected stored or deflated")


def test_a_deflated_member_larger_than_its_header_is_not_inflated(tmp_path):
    shape = tuple(np.load(CAUSAL.with_suffix(".npz"))["tok_emb"].shape)
    bomb = _header(shape) + bytes(64 * 2**20)
    path = _model_copy(tmp_path, "long", {"tok_emb": bomb}, zipfile.ZIP_DEFLATED)
    _refused(path, r"'tok_emb' holds .*\+ bytes; its header declares")


@pytest.mark.parametrize("replace, match", [
    ({"tok_emb": _header((-2**28,))}, r"declares shape \(-268435456,\), with a negative size"),
    ({"tok_emb": _header((2**40,))}, "needs about 4.1e[+]03 GiB of memory"),  # from headers
    ({"tok_emb": _header((12, 57))}, r"declares shape \(12, 57\); expected \(12, 56\)"),
    ({"extra": _npy(np.zeros(3, np.float32))}, "unexpected array 'extra'"),
    ({"tok_emb": _npy(np.zeros((12, 56), "datetime64[s]"))}, "dtype datetime64"),
    ({"tok_emb": _npy(np.zeros((12, 56), complex))}, "dtype complex128"),
    ({"tok_emb": _npy(np.zeros((12, 56), [("a", "<f4")]))}, r"dtype \[\('a'"),
    ({"tok_emb": _npy(np.full((12, 56), 2**62))}, "'tok_emb' holds int64; expected floats"),
    ({"tok_emb": _npy(np.ones((12, 56), bool))}, "'tok_emb' holds bool; expected floats"),
    ({"tok_emb": _npy(np.full((12, 56), 1e300))}, "'tok_emb' holds NaN or inf as float32"),
])
def test_hostile_members_are_refused_by_name(tmp_path, replace, match):
    _refused(_model_copy(tmp_path, "bad", replace), match)


def test_cli_commands_refuse_in_one_line(tmp_path, capsys):
    path = _model_copy(tmp_path, "bad", {"tok_emb": _npy(np.full((12, 56), 1e300))})
    assert main(["sorting", "sort", str(path), "3 1 2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds NaN or inf as float32" in err


def test_read_npz_returns_what_numpy_wrote(tmp_path):
    arrays = {"a": np.arange(6.0).reshape(2, 3), "b": np.asfortranarray(np.eye(3)),
              "c": np.array([True, False]), "d": np.arange(4, dtype=">i4")}
    np.savez_compressed(tmp_path / "x.npz", **arrays)
    back = read_npz(tmp_path / "x.npz", 10**6)
    for key, array in arrays.items():
        np.testing.assert_array_equal(back[key], array)
        assert back[key].dtype == array.dtype
    with pytest.raises(ValueError, match="over the limit of 10"):
        read_npz(tmp_path / "x.npz", 10)

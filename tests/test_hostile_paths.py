"""Paths and names that once hung, ran for minutes or failed after the work: FIFOs where a file is
expected, a symbolic link as a run's --out, a head numbered 200,000,000, another user's stale
temporary. Each is refused (or skipped) at once, in one line."""

import os
import time
from pathlib import Path

import pytest

from tpcore import io
from tpcore.cli import main

pytestmark = pytest.mark.host_only("makes FIFOs, links and files on the host")

LEARN = ["learn", "hist", "--layers", "1", "--cat-heads", "1", "--num-heads", "1",
         "--cat-mlps", "1", "--num-mlps", "0", "--epochs", "1", "--n-samples", "300", "--quiet"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "R"
    assert main([*LEARN, "--out", str(out)]) == 0
    return out


def _one_line(capsys, argv, *, within: float = 5.0) -> str:
    start = time.perf_counter()
    assert main(argv) == 2
    assert time.perf_counter() - start < within
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tpcore: error: ")
    return err


def test_a_fifo_is_never_read(tmp_path, run, capsys):
    """``mkfifo R/program.json; tpcore program show R`` hung."""
    fifo = tmp_path / "p.json"
    os.mkfifo(fifo)
    assert "not a regular file" in _one_line(capsys, ["program", "show", str(fifo)])
    folder = tmp_path / "F"
    folder.mkdir()
    for name in ("metrics.json", "run.json", "model.json", "model.npz"):
        (folder / name).write_bytes((run / name).read_bytes())
    os.mkfifo(folder / "program.json")
    assert "not a regular file" in _one_line(capsys, ["program", "show", str(folder)])
    os.mkfifo(tmp_path / "w.npz")
    with pytest.raises(ValueError, match="not a regular file"):
        io.read_npz(tmp_path / "w.npz", 100)


@pytest.mark.parametrize("target", ["elsewhere", "R"])
def test_a_linked_out_is_refused_before_training(tmp_path, run, capsys, target):
    """A linked --out trained first, then failed, leaving its temporary behind."""
    link = tmp_path / "link"
    link.symlink_to(run if target == "R" else tmp_path / target)
    err = _one_line(capsys, [*LEARN, "--out", str(link), "--overwrite"], within=2.0)
    assert "is a symbolic link" in err and str(link) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link"]


def test_a_head_numbered_beyond_the_program_is_refused(tmp_path, run, capsys):
    """attn_200000000_0 made prune build 200,000,000 layers (over 60 s, 6.4 GB)."""
    text = (run / "program.json").read_text().replace("attn_0_0", "attn_200000000_0")
    (tmp_path / "evil.json").write_text(text)
    err = _one_line(capsys, ["program", "prune", str(tmp_path / "evil.json"), "--choices", "1"])
    assert "'attn_200000000_0': layer and head numbers must be below" in err


def test_another_users_stale_temporary_is_skipped(tmp_path, monkeypatch):
    stale = tmp_path / f".x.{io._HOST}-{2**22 + 12345}-0123abcd.tmp"
    stale.write_text("")
    real_unlink = Path.unlink

    def refuse(self, missing_ok=False):
        if self == stale:
            raise PermissionError(1, "Operation not permitted", str(self))
        return real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(io, "_running", lambda pid: False)
    monkeypatch.setattr(Path, "unlink", refuse)
    assert io.remove_stale_temps(tmp_path) == [] and stale.exists()


@pytest.mark.parametrize("reader", ["state", "record", "metrics"])
def test_no_record_tpcore_reads_back_blocks_on_a_fifo(tmp_path, run, reader):
    from tpcore.errors import TpcoreError
    from tpcore.pipelines.learn import recorded_run
    from tpcore.rundir import RunDir
    from tpcore.train_state import load_state

    folder = tmp_path / "x"
    folder.mkdir()
    name = {"state": "state.json", "record": "run.json", "metrics": "metrics.json"}[reader]
    os.mkfifo(folder / name)
    start = time.perf_counter()
    match = "holds files but no finished run" if reader == "record" else "not a regular file"
    with pytest.raises((TpcoreError, OSError), match=match):
        if reader == "state":
            load_state(folder)
        elif reader == "record":
            RunDir(folder, {})
        else:
            recorded_run(folder)
    assert time.perf_counter() - start < 2.0

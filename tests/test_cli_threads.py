"""The global ``--threads N`` option: it sets the thread count of the command it runs
(``TPCORE_THREADS``), its training and the BLAS of everything else it computes, and a count
below 1 is one line and exit 2."""

import os

import pytest

from tpcore import cli
from tpcore.cpu import THREADS_VARIABLE, blas_threads, default_threads


@pytest.fixture(autouse=True)
def _environment(monkeypatch):
    """The variables a command sets, put back after each test."""
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)


def test_threads_option_sets_the_training_threads(monkeypatch, capsys):
    monkeypatch.setenv(THREADS_VARIABLE, "1")
    seen = []
    monkeypatch.setattr("tpcore.commands.info.run",
                        lambda args: seen.append((default_threads(), "threads" in vars(args))))
    assert cli.main(["--threads", "3", "info"]) == 0
    assert seen == [(3, False)] and os.environ[THREADS_VARIABLE] == "3"


def test_threads_option_holds_blas_for_the_whole_command(monkeypatch):
    """Outside training too (a study's evaluations between its training calls), and back to
    the caller's count afterwards."""
    monkeypatch.delenv(THREADS_VARIABLE, raising=False)
    before = blas_threads(2)
    if before is None:
        pytest.skip("no OpenBLAS loaded")
    seen = []

    def command(args):
        seen.append(blas_threads(1))  # the count the command runs on, put back right away
        blas_threads(seen[-1])

    monkeypatch.setattr("tpcore.commands.info.run", command)
    try:
        assert cli.main(["--threads", "1", "info"]) == 0
        assert seen == [1] and blas_threads(2) == 2
        assert os.environ["OPENBLAS_NUM_THREADS"] == "1"  # for libraries loaded later
        monkeypatch.setenv(THREADS_VARIABLE, "3")
        assert cli.main(["info"]) == 0
        assert seen == [1, 3] and blas_threads(2) == 2
    finally:
        blas_threads(before)


@pytest.mark.parametrize("value", ["0", "-2"])
def test_bad_thread_count_is_one_line(value, capsys):
    assert cli.main(["--threads", value, "info"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"tpcore: error: --threads {value}: expected an integer >= 1"

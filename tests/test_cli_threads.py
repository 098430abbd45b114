"""The global ``--threads N`` option: it sets the training thread count of the command it runs
(``TPCORE_THREADS``), and a count below 1 is one line and exit 2."""

import os

import pytest

from tpcore import cli
from tpcore.cpu import THREADS_VARIABLE, default_threads


def test_threads_option_sets_the_training_threads(monkeypatch, capsys):
    monkeypatch.setenv(THREADS_VARIABLE, "1")
    seen = []
    monkeypatch.setattr("tpcore.commands.info.run",
                        lambda args: seen.append((default_threads(), "threads" in vars(args))))
    assert cli.main(["--threads", "3", "info"]) == 0
    assert seen == [(3, False)] and os.environ[THREADS_VARIABLE] == "3"


@pytest.mark.parametrize("value", ["0", "-2"])
def test_bad_thread_count_is_one_line(value, capsys):
    assert cli.main(["--threads", value, "info"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"tpcore: error: --threads {value}: expected an integer >= 1"

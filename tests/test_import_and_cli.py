"""Light import, and the CLI's contract: --version, info, one-line errors with exit code 2."""

import subprocess
import sys

import pytest

import tpcore
from tpcore.cli import main

HEAVY = ("numba", "scipy", "cupy", "matplotlib", "tqdm", "torch", "pandas")


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.host_only("checks what a child process imports")
def test_import_tpcore_is_light():
    assert _loaded_after("import tpcore") == []


@pytest.mark.host_only("checks what a child process imports")
def test_building_the_cli_is_light():
    """Every subcommand module imports its heavy dependencies inside the command, not at load."""
    assert _loaded_after("from tpcore.cli import build_parser; build_parser()") == []


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and tpcore.__version__ in capsys.readouterr().out


def test_info(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "backend" in out and "numba" in out


def test_errors_are_one_line_and_exit_2(monkeypatch, capsys):
    import importlib.util

    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here")
    assert main(["--backend", "cupy", "info"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tpcore: error: backend 'cupy'")
    tpcore.set_backend("numpy")


@pytest.mark.host_only("a child process printing the version")
def test_console_script_runs():
    out = subprocess.run([sys.executable, "-m", "tpcore.cli", "--version"], capture_output=True,
                         text=True)
    assert out.returncode == 0 and out.stdout.startswith("tpcore ")


def test_learn_lists_the_nlp_tasks(capsys):
    for task, argv in (("ner-demo", ["learn", "ner-demo", "--help"]),
                       ("conll", ["--backend", "numpy", "learn", "conll", "-h"])):
        with pytest.raises(SystemExit):
            main(argv)
        assert capsys.readouterr().out.startswith(f"usage: tpcore learn {task} ")
    with pytest.raises(SystemExit):
        main(["learn", "--help"])
    out = capsys.readouterr().out
    assert all(task in out for task in ("conll", "classify", "ner-demo", "classify-demo"))

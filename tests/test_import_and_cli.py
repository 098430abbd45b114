"""Light import, and the CLI's contract: --version, info, one-line errors with exit code 2."""

import subprocess
import sys
from pathlib import Path

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


def test_help_texts_read_as_plain_text():
    """The help of every command quoted its docstring's Sphinx markup (``x``, :func:`y`)."""
    import argparse
    import contextlib
    import io

    from tpcore.cli import build_parser

    def parsers(p: argparse.ArgumentParser):
        yield p
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in dict.fromkeys(action.choices.values()):
                    yield from parsers(sub)

    seen = 0
    for p in parsers(build_parser()):
        text = p.format_help()
        seen += 1
        assert "``" not in text and not any(f":{r}:`" in text for r in
                                            ("mod", "func", "class", "meth", "attr", "data")), \
            p.prog
    assert seen > 30
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):
        build_parser().parse_args(["learn", "--help"])
    assert out.getvalue().count("`tpcore learn TASK`") == 1


def test_an_uninstalled_source_folder_names_the_install_step(tmp_path):
    """From a clone without installing, the first use failed with "No module named
    'tpcore.kernels'". The folder copied is the checkout's source, so the test means the same
    when tpcore runs from an installed wheel (which holds its kernels inside the package)."""
    import os
    import shutil

    import numpy

    source = Path(__file__).resolve().parents[1] / "tpcore"  # the checkout's, not an install's
    shutil.copytree(source, tmp_path / "tpcore",
                    ignore=shutil.ignore_patterns("__pycache__"))
    site = os.path.dirname(os.path.dirname(numpy.__file__))
    code = f"import sys; sys.path[:0] = [{str(tmp_path)!r}, {site!r}]; import tpcore"
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
    assert out.returncode == 1 and "install it first: pip install -e ." in out.stderr

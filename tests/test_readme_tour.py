"""Every command of README.md's "A tour of the CLI" runs, so a broken README command fails CI.

The commands are parsed from the README's bash block; :data:`OVERRIDES` shrinks each to a tiny
budget (option -> new values, ``[]`` for a flag, ``None`` to drop it). Every README command
needs an entry (a new one fails :func:`test_every_tour_command_has_an_entry` until it gets one).
The commands run in README order in one directory, so ``program show runs/sort`` reads what
``learn sort`` wrote; ``results/...`` paths are the committed files of this repository, and the
CoNLL files of ``learn conll`` are tiny ones written here.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from tpcore.cli import main

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

OVERRIDES: dict[tuple[str, ...], dict[str, list[str] | None]] = {
    ("info",): {},
    ("learn", "sort"): {"--epochs": ["1"], "--n-samples": ["200"], "--quiet": []},
    ("program", "show"): {} if importlib.util.find_spec("matplotlib") else {"--plots": None},
    ("program", "run"): {},
    ("program", "eval"): {"--n-samples": ["200"]},
    ("program", "export"): {},
    ("program", "stats"): {} if importlib.util.find_spec("matplotlib") else {"--plot": None},
    ("sweep", "sort"): {"--layers": ["1", "2"], "--epochs": ["1"], "--n-samples": ["200"],
                        "--quiet": []},
    ("learn", "ner-demo"): {"--budget": ["0.01"], "--quiet": []},
    ("learn", "conll"): {"--epochs": ["1"], "--quiet": []},
    ("sorting", "search-failures"): {"--n": ["1000"]},
    ("sorting", "circuits"): {} if importlib.util.find_spec("matplotlib") else {"--plots": None},
    ("looped", "run"): {},
    ("trees", "sample"): {},
    ("trees", "bp"): {},
}
"""How each tour command runs here. ``program show``, ``sorting circuits`` and ``program stats``
drop ``--plots`` and ``--plot`` where matplotlib (the ``plot`` extra, not installed by CI's
``.[test]``) is missing; tests/test_cli_contract.py, tests/commands/test_commands_program.py and
tests/commands/test_commands_plot.py check the one-line error they then give."""

NOT_RUN = {
    ("reproduce", "NAME"): "a template: NAME stands for the reproductions listed in its comment; "
                           "test_reproduce_names_exist checks each is a verb, and each runs in "
                           "its own feature's tests",
}
"""Tour lines that are not runnable commands, with the reason."""

CONLL = """-DOCSTART- -X- O O

John NNP B-NP B-PER
lives VBZ B-VP O
in IN B-PP O
Paris NNP B-NP B-LOC
. . O O

Mary NNP B-NP B-PER
met VBD B-VP O
Bob NNP B-NP B-PER
Smith NNP I-NP I-PER
in IN B-PP O
Berlin NNP B-NP B-LOC
. . O O
"""


def tour_block() -> str:
    section = README.read_text(encoding="utf-8").split("## A tour of the CLI", 1)[1]
    return section.split("```bash", 1)[1].split("```", 1)[0]


def tour_commands() -> list[list[str]]:
    """The tour's commands, without ``tpcore``, in README order."""
    commands = []
    for line in tour_block().splitlines():
        argv = shlex.split(line, comments=True)
        if argv:
            assert argv[0] == "tpcore", line
            commands.append(argv[1:])
    return commands


def key(argv: list[str]) -> tuple[str, ...]:
    """The command's leading words (subcommand and verb or task)."""
    words = []
    for word in argv[:2]:
        if word.startswith("-"):
            break
        words.append(word)
    return tuple(words)


def shrink(argv: list[str], options: dict[str, list[str] | None]) -> list[str]:
    """``argv`` with each option of ``options`` given its new values (appended if absent, removed
    for None) and README paths under results/ pointing into this repository."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in options:
            i += 1
            while i < len(argv) and not argv[i].startswith("--"):
                i += 1
            continue
        out.append(str(REPO / word) if word.startswith("results/") else word)
        i += 1
    for option, values in options.items():
        if values is not None:
            out += [option, *values]
    return out


COMMANDS = tour_commands()


def test_every_tour_command_has_an_entry():
    for argv in COMMANDS:
        assert key(argv) in OVERRIDES or key(argv) in NOT_RUN, f"add {key(argv)} to OVERRIDES"


def test_tour_task_list_is_the_known_tasks():
    from tpcore.tasks.registry import TASK_NAMES

    listed = re.search(r"\(tasks: ([^)]*)\)", " ".join(
        line.split("#", 1)[1] for line in tour_block().splitlines() if "#" in line))
    assert listed and tuple(listed[1].split()) == TASK_NAMES


def test_reproduce_names_exist(capsys):
    lines = tour_block().split("reproduce NAME", 1)[1].splitlines()
    names = []
    for line in lines:
        comment = line.partition("#")[2]
        if line.strip().startswith("tpcore"):
            break
        names += [w for w in comment.split() if not w.startswith("#")]
    assert len(names) >= 10
    for name in names:
        with pytest.raises(SystemExit) as exc:
            main(["reproduce", name, "--help"])
        assert exc.value.code == 0, name
    capsys.readouterr()


@pytest.fixture(scope="module")
def tour_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tour")
    for name in ("train.txt", "dev.txt", "test.txt"):
        (path / name).write_text(CONLL, encoding="utf-8")
    return path


@pytest.mark.parametrize("argv", [a for a in COMMANDS if key(a) not in NOT_RUN],
                         ids=" ".join)
def test_tour_command_runs(argv, tour_dir, monkeypatch, capsys):
    monkeypatch.chdir(tour_dir)
    code = main(shrink(argv, OVERRIDES[key(argv)]))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out

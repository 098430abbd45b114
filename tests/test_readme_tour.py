"""README.md's "A tour of the CLI" lists what exists: its task list is the task registry and each
reproduction its ``reproduce NAME`` line names is a verb. Every tour command runs with a tiny
budget in tests/test_docs.py, with every other command the docs quote."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tpcore.cli import main
from tpcore.tasks.registry import TASK_NAMES

README = Path(__file__).resolve().parents[1] / "README.md"


def tour_block() -> str:
    section = README.read_text(encoding="utf-8").split("## A tour of the CLI", 1)[1]
    return section.split("```bash", 1)[1].split("```", 1)[0]


def test_tour_task_list_is_the_known_tasks():
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

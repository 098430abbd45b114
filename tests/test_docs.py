"""The docs say what the code does: every ``tpcore`` command quoted in a bash block of README.md
and docs/*.md parses, links between the pages reach a file and a heading, and the Table 1
figures quoted in README.md and docs/programs_model.md are those of results/table1/table1.json.

Commands are read as a shell would (``\\`` continues a line, ``#`` starts a comment, the command
may follow ``&&`` or an environment assignment); optional parts written in ``[brackets]`` are left
out. Commands whose placeholders do not parse are listed in :data:`SKIP` with the reason.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tpcore.cli import build_parser
from tpcore.errors import TpcoreError

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
TABLE1 = json.loads((REPO / "results" / "table1" / "table1.json").read_text(encoding="utf-8"))

SKIP = {
    "tpcore reproduce NAME --budget ...": "a template: NAME stands for the reproductions its "
                                          "comment lists (tests/test_readme_tour.py runs "
                                          "--help of each)",
}
"""Quoted commands that are not meant to parse as written, with the reason."""

README_TASKS = {"reverse": "reverse", "hist": "hist", "double hist": "double_hist",
                "sort": "sort", "most-freq": "most_freq", "Dyck-1": "dyck1", "Dyck-2": "dyck2",
                "in-context": "induction"}
"""README's names of the Table 1 tasks."""


def fenced_blocks(path: Path) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced code block of ``path``."""
    text = path.read_text(encoding="utf-8")
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)


def command_lines(body: str) -> list[str]:
    """The lines of a shell block that run ``tpcore``, continuations joined, comments kept."""
    return [line for line in body.replace("\\\n", " ").splitlines()
            if re.search(r"(^|&&|\s)tpcore\s", line.split("#", 1)[0])]


def quoted_commands() -> list[tuple[str, str]]:
    """``(page, command line)`` of every ``tpcore`` command in a bash block."""
    return [(path.name, line) for path in DOCS for lang, body in fenced_blocks(path)
            if lang == "bash" for line in command_lines(body)]


def tpcore_argv(line: str) -> list[str]:
    """The arguments after ``tpcore`` on a command line, optional ``[...]`` parts left out."""
    words = shlex.split(re.sub(r"\[[^\]]*\]", "", line), comments=True)
    return words[words.index("tpcore") + 1:]


def command_text(line: str) -> str:
    """The command of a line without its comment, as :data:`SKIP` names it."""
    return " ".join(shlex.split(line, comments=True))


COMMANDS = quoted_commands()


@pytest.mark.parametrize("page, line", COMMANDS, ids=[f"{p}: {c[:60]}" for p, c in COMMANDS])
def test_quoted_command_parses(page, line):
    if command_text(line) in SKIP:
        pytest.skip(SKIP[command_text(line)])
    try:
        build_parser().parse_args(tpcore_argv(line))
    except (TpcoreError, SystemExit) as exc:
        pytest.fail(f"{page}: `{line.strip()}` does not parse: {exc}")


def test_enough_commands_are_checked_and_every_skip_is_quoted():
    assert len(COMMANDS) >= 40
    quoted = {command_text(line) for _, line in COMMANDS}
    assert set(SKIP) <= quoted, "a SKIP entry no page quotes any longer"


def test_every_block_quoting_tpcore_is_a_bash_block():
    for path in DOCS:
        for lang, body in fenced_blocks(path):
            if lang != "bash":
                assert not command_lines(body), f"{path.name}: mark the block as ```bash"


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_pages_reach_a_file_and_heading():
    for path in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
            if re.match(r"\w+://", target):
                continue
            name, _, anchor = target.partition("#")
            page = (path.parent / name).resolve() if name else path
            assert page.exists(), f"{path.name}: link to missing {target}"
            if anchor:
                headings = re.findall(r"^#+ (.*)$", page.read_text(encoding="utf-8"), re.M)
                assert anchor in {slug(h) for h in headings}, f"{path.name}: no heading {target}"


def table_rows(text: str, header_start: str) -> list[dict[str, str]]:
    """The rows of the Markdown table whose header line starts with ``header_start``, as
    ``{column: cell}``."""
    lines = text[text.index(header_start):].splitlines()
    names = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(names, (c.strip() for c in line.strip("|").split("|")))))
    return rows


def table1_tasks() -> dict[str, dict]:
    return {t["task"]: t for t in TABLE1["tasks"]}


def test_readme_table1_matches_the_results():
    section = (REPO / "README.md").read_text(encoding="utf-8").split("(paper Table 1)", 1)[1]
    rows = table_rows(section, "| task | test token acc")
    tasks = table1_tasks()
    assert sorted(README_TASKS[r["task"]] for r in rows) == sorted(tasks)
    for row in rows:
        t = tasks[README_TASKS[row["task"]]]
        acc = row["test token acc"]
        assert acc.strip("*") == f"{t['test_acc']:.2f}", row["task"]
        assert acc.startswith("**") == (t["test_acc"] >= t["target"]), f"{row['task']}: bold"
        assert int(row["runs (seeds 0..)"]) == t["runs"], row["task"]
        assert float(row["paper"]) == t["paper"] and float(row["target"]) == t["target"]
        assert t["selected"]["fidelity"] == 1.0   # "every decompiled program agrees ... 100 %"


def test_programs_model_table1_matches_the_results():
    text = (REPO / "docs" / "programs_model.md").read_text(encoding="utf-8")
    rows = table_rows(text, "| task | N | selected")
    tasks = table1_tasks()
    assert sorted(r["task"] for r in rows) == sorted(tasks)
    for row in rows:
        t = tasks[row["task"]]
        s = t["selected"]
        assert row["test token acc"].split()[0] == f"{t['test_acc']:.2f}", row["task"]
        assert row["test seq acc"] == f"{100 * s['test_seq_acc']:.2f}", row["task"]
        assert int(row["runs"]) == t["runs"] and int(row["program lines"]) == s["program_lines"]
        assert row["selected (L, H, M, seed)"] == f"{s['layers']}, {s['heads']}, {s['mlps']}, " \
                                                  f"{s['seed']}", row["task"]

"""The docs say what the code does. Every command quoted in README.md and docs/*.md runs, the
Python blocks of the docs run (:data:`PYTHON_PAGES`; :data:`PYTHON_ELSEWHERE` says where the
others run), links between the pages reach a file and a heading, and the figures the README
quotes from results/ are those of the files there.

Commands are the lines of the ``bash`` blocks, read as a shell would (``\\`` continues a line,
``#`` starts a comment, ``&&`` separates commands, ``NAME=value`` before a command sets an
environment variable and alone on a line a shell variable for ``$NAME``); optional parts written
in ``[brackets]`` are left out. The commands of one block run in order in one fresh folder, as a
reader would type them, so ``tpcore program show runs/sort`` reads what ``tpcore learn sort``
wrote before it. ``tpcore`` commands run in this process (an environment variable before one is
set for it), ``python`` ones in a child process; files a command reads that a reader brings
(CoNLL files, GloVe vectors, an assembler program) are written first (:data:`FILES`), and
``results/...`` paths read the committed results of this repository (an ``--out results/...``
writes into the fresh folder instead).

Where a command trains or searches, :data:`TINY` gives it a tiny budget: each option it names is
given the new values (appended if absent, removed for None). Every ``tpcore`` command needs an
entry (``{}``: it runs as written), or a reason in :data:`NOT_RUN` (it parses all the same:
:func:`test_quoted_command_parses`); other programs are in :data:`OTHER_PROGRAMS`. The Python
blocks of a page run in order in one child process with ``results`` at hand; they are written to
run as they are, in seconds.

Every number left in a command after shrinking is at most :data:`LARGEST_SIZE`. On a loaded
2-core machine the commands and blocks take about three minutes, the reproductions at
their tiny budgets and the NLP commands most of it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tpcore.backend import backend_name
from tpcore.cli import build_parser, main
from tpcore.errors import TpcoreError
from tpcore.pipelines.records import read_records

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RESULTS = REPO / "results"
TABLE1 = json.loads((RESULTS / "table1" / "table1.json").read_text(encoding="utf-8"))
PLOT = importlib.util.find_spec("matplotlib") is not None
"""matplotlib (the ``plot`` extra, which CI's ``.[test,dask]`` does not install) is here."""
NO_PLOTS: dict[str, list[str] | None] = {} if PLOT else {"--plots": None, "--plot": None}
"""Without matplotlib ``--plots`` and ``--plot`` are dropped (tests/test_cli_contract.py and
the commands' tests check the one-line error they then give)."""
ONE_EPOCH = {"--epochs": ["1"], "--quiet": []}
TINY_LEARN = {**ONE_EPOCH, "--n-samples": ["200"]}
TINY_GRID = {"--layers": ["1"], "--heads": ["4"], "--embed-vars": ["2"], "--epochs": ["1"],
             "--seed": ["0"], "--d-model": ["16"], "--t-layers": ["1"], "--t-heads": ["2"],
             "--k": ["4"], "--quiet": []}
"""The NLP grids of docs/nlp.md shrunk to one tiny program and one tiny transformer."""

TINY: dict[tuple[str, ...], dict[str, list[str] | None]] = {
    ("info",): {},
    ("learn", "sort"): TINY_LEARN,
    ("learn", "hist"): TINY_LEARN,
    ("learn", "reverse"): TINY_LEARN,
    ("learn", "in-context"): {**TINY_LEARN, "--epochs": ["2"], "--select-after": ["1"]},
    ("learn", "ner-demo"): {"--budget": ["0.01"], "--quiet": []},
    ("learn", "conll"): ONE_EPOCH,
    ("learn", "classify"): ONE_EPOCH,
    ("nlp", "conll"): TINY_GRID,
    ("nlp", "classify"): TINY_GRID,
    ("program", "show"): NO_PLOTS,
    ("program", "run"): {},
    ("program", "eval"): {"--n-samples": ["200"]},
    ("program", "export"): {},
    ("program", "stats"): NO_PLOTS,
    ("program", "prune"): {},
    ("sweep", "sort"): {"--layers": ["1", "2"], "--heads": ["2"], "--mlps": ["1"],
                        "--seeds": ["0"], "--jobs": ["1"], **TINY_LEARN},
    ("sweep", "dyck1"): {"--layers": ["1"], "--heads": ["2"], "--mlps": ["1"], "--seeds": ["0"],
                         "--jobs": ["1"], **TINY_LEARN},
    ("sorting", "search-failures"): {"--n": ["1000"]},
    ("sorting", "circuits"): NO_PLOTS,
    ("looped", "run"): {},
    ("trees", "sample"): {"--n": ["5"]},
    ("trees", "bp"): {},
    ("reproduce", "counting"): {"--budget": ["smoke"], "--epochs": ["1"]},
    ("reproduce", "table1"): {"--budget": ["smoke"], "--tasks": ["hist"], "--epochs": ["1"]},
    ("reproduce", "table3"): {"--budget": ["smoke"], "--tasks": ["sort"], "--epochs": ["3"],
                              "--jobs": ["1"]},
    ("reproduce", "table5"): {"--budget": ["smoke"]},
    ("reproduce", "compiled-programs"): {"--budget": ["smoke"], "--tasks": ["hist"]},
    ("program", "compile"): {},
    ("reproduce", "sorting"): {"--budget": ["0.002"], "--tasks": ["bidirectional"], **NO_PLOTS},
    ("reproduce", "bp-table"): {"--samples": ["500"]},
    ("reproduce", "grammar-learning"): {"--budget": ["tiny"]},
    ("reproduce", "hierarchy"): {"--budget": ["tiny"], "--grammar-seeds": ["1"],
                                 "--n-layers": ["1", "2"], "--mlm-steps": None},
    ("reproduce", "ner-demo"): {"--budget": ["0.01"]},
    ("reproduce", "classify-demo"): {"--budget": ["0.01"]},
    ("reproduce", "program-lengths"): {"--run-dirs": ["results/table1/runs/hist/L1_H2+2_M1+1_s0"]},
}
"""How each command runs here (see the module docstring); keyed by its first two words."""
LARGEST_SIZE = 5000
"""The largest number a command may keep after :data:`TINY` shrinks it: a count of steps,
samples or lists the page gives at the reader's size must be shrunk (160,000 MLM steps take ten
minutes even at the tiny budget's model size)."""

CLUSTER = ("needs a Dask cluster at that address (tests/pipelines/test_pipelines_dask.py runs "
           "sweeps on a local one)")
NOT_RUN = {
    "tpcore --backend cupy learn sort": "needs an NVIDIA GPU (bench/gpu_check.sh runs the suite "
                                        "and the main job there)",
    "tpcore reproduce NAME --budget ...": "a template: NAME stands for the reproductions its "
                                          "comment lists (tests/test_readme_tour.py runs "
                                          "--help of each)",
    "tpcore program run path/to/sort.py ...": "a template for a file of the reader's",
    "tpcore program circuit PROGRAMS/rasp/dyck2/dyck2.py": "reads the authors' published "
                                                          "programs, which this repository does "
                                                          "not hold (tests/analysis/"
                                                          "test_analysis_dyck_circuit.py runs "
                                                          "the command on a program of its own)",
    "tpcore program circuit runs/dyck2": "a template for a run of the reader's",
    "tpcore sweep sort --scheduler tcp://10.0.0.5:8786": CLUSTER,
    "tpcore sweep sort --scheduler tcp://HOST:8786 --out /shared/sweeps/sort": CLUSTER,
    "tpcore sweep sort --halving 3 --scheduler tcp://HOST:8786 --out /shared/sweeps/sort":
        CLUSTER,
    "tpcore sweep sort --scheduler tcp://127.0.0.1:8786 --out runs/sweep/sort": CLUSTER,
    "tpcore sweep sort --scheduler tcp://LOGIN:8786 --out /shared/sweeps/sort": CLUSTER,
    "tpcore rebuild results/table1/runs/induction/L2_H1+0_M0+0_s0 --out rebuilt/induction":
        "trains a Table 1 run for 40 s (tests/pipelines/test_pipelines_rebuild.py runs it and "
        "checks that it repeats its record)",
    "tpcore reproduce fleq --budget small --seed 0": "minutes even at its smallest budget "
                                                     "(tests/fleq checks every block and "
                                                     "application)",
}
"""Quoted ``tpcore`` commands that do not run here, with the reason."""

OTHER_PROGRAMS = {
    "pip": None,
    "pytest": None,
    "python": "run",
    "dask": None,
    "sbatch": None,
    "bash": None,
}
"""Programs other than ``tpcore`` that the docs quote: ``run`` in a child process, or None: not
run here (``pip`` installs the package these tests run on; ``pytest`` runs this suite or the
benchmarks, minutes of timing; ``dask`` and ``sbatch`` start the servers of a cluster; ``bash``
runs the GPU check, on a GPU machine)."""

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
TSV = "".join(f"{label}\t{text}\n" for label, text in [
    ("pos", "a good film"), ("neg", "not a good film"), ("pos", "great acting"),
    ("neg", "a dull plot"), ("pos", "good and great"), ("neg", "not great at all"),
    ("pos", "a fine film"), ("neg", "dull and slow"), ("pos", "fine acting"),
    ("neg", "not fine")] * 3)
GLOVE = "".join(f"{w} {' '.join(str(0.1 * (i + j)) for j in range(4))}\n"
                for i, w in enumerate(["john", "paris", "good", "film", "a", "not"]))
FILES = {
    **{name: CONLL for name in ("train.txt", "dev.txt", "valid.txt", "test.txt", "eng.train",
                                "eng.testa", "eng.testb")},
    **{name: TSV for name in ("train.tsv", "dev.tsv", "test.tsv", "trec_train.tsv",
                              "trec_test.tsv")},
    "glove.6B.300d.txt": GLOVE,
    "prog.asm": ".data\nx = 3\ny = 2\np = 0\n.code\nloop: add x, p\n      subleq 1, y, done\n"
                "      jmp loop\ndone: halt\n",
    "cmds.csv": "a,b,c\n4,5,7\n2,3,7\n",
    "mem.csv": "mem\n0\n-1\n2\n5\n",
}
"""Files the quoted commands read that a reader brings (tiny stand-ins)."""


README_TASKS = {"reverse": "reverse", "hist": "hist", "double hist": "double_hist",
                "sort": "sort", "most-freq": "most_freq", "Dyck-1": "dyck1", "Dyck-2": "dyck2",
                "in-context": "induction"}
"""README's names of the Table 1 tasks."""


def fenced_blocks(path: Path) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced code block of ``path``."""
    text = path.read_text(encoding="utf-8")
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)


def shell_lines(body: str) -> list[str]:
    """The commands of a shell block: continuations joined, comment-only lines left out,
    ``&&`` splitting a line into its commands (comments kept on the last)."""
    out = []
    for line in body.replace("\\\n", " ").splitlines():
        if not line.split("#", 1)[0].strip():
            continue
        out += [part.strip() for part in line.split("&&")]
    return out


def command_lines(body: str) -> list[str]:
    """The lines of a shell block that run ``tpcore``, continuations joined, comments kept."""
    return [line for line in body.replace("\\\n", " ").splitlines()
            if re.search(r"(^|&&|\s)tpcore\s", line.split("#", 1)[0])]


def quoted_commands() -> list[tuple[str, str]]:
    """``(page, command line)`` of every ``tpcore`` command in a bash block."""
    return [(path.name, line) for path in DOCS for lang, body in fenced_blocks(path)
            if lang == "bash" for line in command_lines(body)]


def words_of(line: str, variables: dict[str, str] | None = None) -> list[str]:
    """The words of a command line: optional ``[...]`` parts and the comment left out, shell
    variables expanded."""
    text = re.sub(r"\[[^\]]*\]", "", line)
    for name, value in (variables or {}).items():
        text = text.replace(f"${name}", value)
    return shlex.split(text, comments=True)


def tpcore_argv(line: str) -> list[str]:
    """The arguments after ``tpcore`` on a command line, optional ``[...]`` parts left out."""
    words = words_of(line)
    return words[words.index("tpcore") + 1:]


def command_text(line: str) -> str:
    """The command of a line without its comment, as :data:`NOT_RUN` names it."""
    return " ".join(shlex.split(line, comments=True))


def key(argv: list[str]) -> tuple[str, ...]:
    """The command's leading words (subcommand and verb or task)."""
    words = []
    for word in argv[:2]:
        if word.startswith("-"):
            break
        words.append(word)
    return tuple(words)


def shrink(argv: list[str], options: dict[str, list[str] | None]) -> list[str]:
    """``argv`` with each option of ``options`` given its new values (appended if absent,
    removed for None), and ``results/...`` paths that are not an ``--out`` pointing into this
    repository."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in options:
            i += 1
            while i < len(argv) and not argv[i].startswith("--"):
                i += 1
            continue
        reads = word.startswith("results/") and (not out or out[-1] != "--out")
        out.append(str(REPO / word) if reads else word)
        i += 1
    for option, values in options.items():
        if values is not None:
            out += [option, *(str(REPO / v) if v.startswith("results/") and option != "--out"
                              else v for v in values)]
    return out


def shell_blocks() -> list[tuple[str, int, list[str]]]:
    """``(page, block number, commands)`` of every bash block."""
    return [(path.name, n, shell_lines(body)) for path in DOCS
            for n, (lang, body) in enumerate(fenced_blocks(path)) if lang == "bash"]


COMMANDS = quoted_commands()
BLOCKS = shell_blocks()
PYTHON_PAGES = [REPO / "README.md", REPO / "docs" / "api.md", REPO / "docs" / "backends.md",
                REPO / "docs" / "compile.md"]
"""Pages whose Python blocks run here, as written, in order."""
PYTHON_ELSEWHERE = {
    "interpretability.md": "tests/models/test_hooks.py runs its examples (the second one needs "
                           "a model and tokens of the reader's)",
    "counting.md": "an excerpt of a generated program",
    "cluster.md": "a Dask cluster's sweeps of the paper's grid, one on SLURM "
                  "(tests/pipelines/test_pipelines_dask.py runs small ones on a local cluster)",
}
"""Pages with Python blocks that do not run here, with the reason."""


@pytest.mark.parametrize("page, line", COMMANDS, ids=[f"{p}: {c[:60]}" for p, c in COMMANDS])
def test_quoted_command_parses(page, line):
    try:
        build_parser().parse_args(tpcore_argv(line))
    except (TpcoreError, SystemExit) as exc:
        if command_text(line) in NOT_RUN and "NAME" in line:
            pytest.skip(NOT_RUN[command_text(line)])
        pytest.fail(f"{page}: `{line.strip()}` does not parse: {exc}")


def test_every_command_has_an_entry_and_every_entry_is_used():
    quoted = {command_text(line) for _, line in COMMANDS}
    assert len(COMMANDS) >= 40
    assert set(NOT_RUN) <= quoted, "a NOT_RUN entry no page quotes any longer"
    used = set()
    for _, _, commands in BLOCKS:
        for command in commands:
            words = [w for w in words_of(command) if not re.match(r"^\w+=", w)]
            if not words:
                continue
            assert words[0] in ("tpcore", *OTHER_PROGRAMS), f"add {words[0]!r} to OTHER_PROGRAMS"
            if words[0] == "tpcore" and command_text(command) not in NOT_RUN:
                assert key(words[1:]) in TINY, f"add {key(words[1:])} to TINY (or NOT_RUN)"
                used.add(key(words[1:]))
    assert used == set(TINY), f"TINY entries no page needs: {set(TINY) - used}"


def test_every_block_quoting_tpcore_is_a_bash_block():
    for path in DOCS:
        for lang, body in fenced_blocks(path):
            if lang != "bash":
                assert not command_lines(body), f"{path.name}: mark the block as ```bash"


def run_command(command: str, variables: dict[str, str], folder: Path,
                monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Run one quoted command in ``folder`` as the module docstring says, failing with its
    output unless it succeeds."""
    words = words_of(command, variables)
    env = {}
    while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words:
        variables.update(env)
        return
    if command_text(command) in NOT_RUN or OTHER_PROGRAMS.get(words[0], "run") is None:
        return
    if words[0] == "python":
        out = subprocess.run([sys.executable, *words[1:]], cwd=folder, capture_output=True,
                             text=True, timeout=120, env={**os.environ, **env})
        assert out.returncode == 0, f"`{command}`: {out.stderr[-2000:]}"
        return
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    argv = shrink(words[1:], TINY[key(words[1:])])
    sizes = [w for w in argv if w.isdigit() and int(w) > LARGEST_SIZE]
    assert not sizes, f"`{command}` keeps the reader's size {sizes}: shrink it in TINY"
    try:
        code = main(argv)
    finally:
        for name in env:
            monkeypatch.delenv(name)
    err = capsys.readouterr().err
    assert code == 0, f"`{command}` ran as `tpcore {' '.join(argv)}`: exit {code}, {err[-2000:]}"


READER = pytest.mark.host_only("runs the pages as a reader does, on NumPy; the device-strict "
                                "pass checks the same code through the unit tests")


@READER
@pytest.mark.parametrize("page, n, commands", BLOCKS, ids=[f"{p}#{n}" for p, n, _ in BLOCKS])
def test_quoted_commands_run(page, n, commands, tmp_path, monkeypatch, capsys):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    variables: dict[str, str] = {}
    for command in commands:
        run_command(command, variables, tmp_path, monkeypatch, capsys)


@READER
@pytest.mark.parametrize("page", PYTHON_PAGES, ids=[p.name for p in PYTHON_PAGES])
def test_python_blocks_run(page, tmp_path):
    code = "\n\n".join(body for lang, body in fenced_blocks(page) if lang == "python")
    (tmp_path / "results").symlink_to(RESULTS, target_is_directory=True)
    (tmp_path / "blocks.py").write_text(code, encoding="utf-8")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    if backend_name() == "cupy":  # the pages' figures are NumPy's; CuPy draws other noise
        env["TPCORE_BACKEND"] = "numpy"
    out = subprocess.run([sys.executable, "blocks.py"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]


def test_every_page_with_python_runs_it_here_or_says_where():
    pages = {path.name for path in DOCS if any(lang == "python" for lang, _ in
                                                fenced_blocks(path))}
    assert pages == {p.name for p in PYTHON_PAGES} | set(PYTHON_ELSEWHERE)


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


def test_docs_and_code_speak_about_the_code_not_the_tracker():
    """No numbered issues or agents: the text says what the code does and why."""
    tracker = re.compile(r"\b(issues? #?\d+|agents?)\b", re.I)
    files = [*DOCS, REPO / "CHANGELOG.md",
             *(p for d in ("tpcore", "kernels", "tests", "bench", "examples")
               for p in (REPO / d).rglob("*.py") if p != Path(__file__))]
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not tracker.search(line), f"{path.relative_to(REPO)}:{number}: {line.strip()}"


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


RECIPE_ROWS = {"double hist, `tpcore learn` recipe": ("recipe_double_hist/six_after_100",
                                                     list(range(400, 410))),
               "in-context, `tpcore learn` recipe": ("recipe_grow", list(range(110, 115)))}
"""README's Table 1 rows of the tasks' own recipes: their results folder and fresh seeds."""


def test_readme_table1_matches_the_results():
    """README's Table 1 is results/success_rates (the paper's architectures over fresh seeds),
    and its last rows the tasks' own recipes (:data:`RECIPE_ROWS`)."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split("(paper Table 1)", 1)[1]
    rows = table_rows(section, "| task | test token acc")
    tasks = {t["task"]: t for t in results("success_rates/table1.json")["tasks"]}
    recipes = {name: results(f"{folder}/table1.json")["tasks"][0]
               for name, (folder, _) in RECIPE_ROWS.items()}
    plain = [r for r in rows if r["task"] not in recipes]
    assert [r["task"] for r in rows[len(plain):]] == list(RECIPE_ROWS)
    assert sorted(README_TASKS[r["task"]] for r in plain) == sorted(tasks)
    for row in rows:
        t = recipes.get(row["task"]) or tasks[README_TASKS[row["task"]]]
        acc = row["test token acc"]
        assert acc.strip("*") == f"{t['test_acc']:.2f}", row["task"]
        assert acc.startswith("**") == (t["test_acc"] >= t["target"]), f"{row['task']}: bold"
        assert row["runs within 1 point of the paper"] == f"{t['success']} of {t['runs']}"
        assert t["seeds"] == (RECIPE_ROWS[row["task"]][1] if row["task"] in recipes else
                              [100, 101, 102, 103, 104])
        assert float(row["paper"]) == t["paper"] and float(row["target"]) == t["target"]
        assert t["selected"]["fidelity"] == 1.0   # "every decompiled program agrees ... 100 %"
    protocol = {t["task"]: t for t in results("table1_paper/table1.json")["tasks"]}
    for row in plain:
        t = protocol.get(README_TASKS[row["task"]])
        cells = (row["the paper's protocol (40 runs)"], row["its wall time"])
        assert cells == (("not yet", "-") if t is None else
                         (f"{t['test_acc']:.2f}", f"{t['wall_seconds']:,.0f} s")), row["task"]


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


def results(name: str) -> dict:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def readme_text() -> str:
    """README.md with every run of white space one space (figures wrap across lines)."""
    return " ".join((REPO / "README.md").read_text(encoding="utf-8").split())


def test_readme_learn_sort_figures_are_the_committed_runs():
    m = results("learn_sort/metrics.json")
    text = readme_text()
    assert f"**{100 * m['test']['acc']:.2f} % test token accuracy** " \
           f"({100 * m['test']['seq_acc']:.2f} % of test sequences exactly sorted)" in text
    assert f"peak memory {round(m['peak_rss_mb'])} MiB" in text and m["steps"] == 5500
    assert m["program"]["fidelity"] == 1.0     # "the program agrees with the model on 100 %"


def test_readme_in_context_recipe_figures_are_the_committed_runs():
    [row] = results("recipe_grow/table1.json")["tasks"]
    packed = read_records(RESULTS / "recipe_grow" / "runs.json.gz")  # the study's run records
    runs = [record for name, record in sorted(packed.items())
            if name.startswith("runs/induction/")]
    seeds = [r["config"]["seed"] for r in runs]
    assert seeds == row["seeds"] and row["runs"] == len(runs)
    solved = sum(r["test"]["acc"] == 1.0 for r in runs)
    secs = sorted(round(r["train_seconds"]) for r in runs)
    assert all((r["config"]["candidates"], r["config"]["grow"], r["config"]["n_cat_heads"])
               == (16, 4, 1) for r in runs)  # the paper's model, grown from 4 heads
    assert (f"**100 % test token accuracy on {solved} of {len(runs)} fresh seeds** "
            f"({seeds[0]}-{seeds[-1]}, {secs[0]}-{secs[-1]} s a run") in readme_text()


def test_readme_counting_target_cell_is_the_committed_runs():
    text = readme_text()
    selected = {c["variant"]: c for c in results("counting_arch/counting.json")["cells"]}
    for variant, label in (("prefix", "PrefixSumCounts"), ("none", "none")):
        cell = selected[variant]
        runs = [results(f"counting_arch/runs/double_hist-bigvocab-{variant}-s{seed}.json")
                for seed in cell["seeds"]]
        accs = ", ".join(f"{100 * r['test']['acc']:.2f}" for r in runs)
        row = (f"| 3 8 4{' (4 + 4 heads, 2 + 2 MLPs)' * (variant == 'prefix')} | {label} | "
               f"0-{cell['seeds'][-1]}: {accs} | ")
        assert row in text, row
        best = max(runs, key=lambda r: r["val"]["acc"])
        assert best["seed"] == cell["seed"]   # "best on validation"
        shown = f"{100 * best['test']['acc']:.2f}"
        assert f"{row}{f'**{shown}**' if variant == 'prefix' else shown} " \
               f"({100 * best['test']['seq_acc']:.2f}) |" in text


def test_readme_counting_paper_table_is_every_finished_setting():
    """README's table at the paper's budget lists, in the paper's order, every setting whose
    four paper variants are committed, with the committed accuracies and the paper's."""
    from tpcore.experiments.counting import PAPER, PAPER_ACC, REGIMES
    from tpcore.experiments.counting_figures import module_gains

    committed = results("counting_paper/counting.json")["cells"]
    cells = {(c["task"], c["regime"], c["variant"]): c for c in committed}
    variants = ("none", "prefix", "experts", "both", "running")
    rows = []
    for task, regime in PAPER:
        if not all((task, regime, v) in cells for v in variants[:4]):
            continue
        v, n = REGIMES[regime]
        ours = [f"{100 * cells[task, regime, x]['test']['acc']:.2f}"
                if (task, regime, x) in cells else "-" for x in variants]
        paper = " / ".join(f"{x:.2f}" for x in PAPER[task, regime])
        rows.append(f"| {task.replace('_', ' ')}, {regime} (V = {v}, N = {n}) | "
                    + " | ".join(ours) + f" | {paper} |")
    raw = (REPO / "README.md").read_text(encoding="utf-8")
    start = raw.index("| task, regime (paper's budget) |")
    assert raw[start:raw.index("\n\n", start)].splitlines()[2:] == rows
    gains = module_gains(committed, PAPER_ACC)
    assert f"**{len(rows)} of 15 settings**" in readme_text()
    assert (f"at or above the base in {len(gains.ours)} of these {len(rows)} settings (the "
            f"paper: {len(gains.paper)} of the same {len(rows)})") in readme_text()


def test_readme_sorting_table_is_the_committed_results():
    rows = {r["task"]: r for r in results("sorting/sorting.json")["rows"]}
    text = readme_text()
    for task, label in (("causal", "causal, values 0-9"), ("distinct", "causal, distinct values"),
                        ("bidirectional", "bidirectional, length 1-10 (clip 0.02)")):
        r = rows[task]
        row = (f"| {label} | {r['parameters']:,} | {r['steps']:,} | "
               f"{round(r['train_cpu_seconds'])} s | {100 * r['random']['sorted']:.2f} % |")
        assert row in text, row
        if task != "distinct":
            assert f"{100 * r['hard']['sorted']:.2f} % | {r['search']['n_failures']} |" in text
    assert rows["causal"]["search"]["seed"] == 3000 and "the 269 failures" in text


def test_readme_looped_table_is_the_committed_results():
    sweep = [r for r in results("looped/looped.json")["lam_sweep"] if r["family"] == "random x8"]
    text = readme_text()
    for T in sorted({r["T"] for r in sweep}):
        snap, plain = (next(r for r in sweep if r["T"] == T and r["snap"] == s)
                       for s in (True, False))
        row = (f"| random x8 | {T} | {snap['lam_min']:.2f} | {plain['lam_min']:.2f} | "
               f"{snap['paper_bound']:.1f} |")
        assert row in text, row


def test_readme_bp_table_is_the_committed_results():
    rows = results("hierarchy/bp_table.json")["rows"]
    text = readme_text()
    for k in range(5):
        cells = []
        for r in sorted((r for r in rows if r["k_data"] == k), key=lambda r: r["k_bp"]):
            value = f"{r['root_acc']:.4f}"
            cells.append(f"**{value}**" if r["k_bp"] == k else value)
        row = f"| k = {k} | {' | '.join(cells)} |"
        assert row in text, row


def test_hierarchy_appendix_e_table_is_the_committed_results():
    rows = results("hierarchy/bp_table.json")["attention"]
    text = " ".join((REPO / "docs" / "hierarchy.md").read_text(encoding="utf-8").split())
    columns = [("in-sample (k = 0)", "none"), ("in-sample (k = 0)", "25%"), ("uniform", "none"),
               ("uniform", "25%")]
    for beta, label in ((None, "uniform on the complementary subtree"), (5.0, "softmax, beta = 5"),
                        (10.0, "softmax, beta = 10"), (20.0, "softmax, beta = 20")):
        error = {(r["data"], r["hidden"]): r["max_abs_error"] for r in rows if r["beta"] == beta}
        row = f"| {label} | " + " | ".join(f"{error[c]:.1e}" for c in columns) + " |"
        assert row in text, row


def test_readme_ner_figures_are_the_committed_results():
    r = results("ner-demo/results.json")
    f1 = [f"{r[m]['test']['f1']:.1f}" for m in ("unigram", "transformer", "program")]
    assert (f"entity-level F1 unigram {f1[0]}, standard transformer {f1[1]}, Transformer "
            f"Program {f1[2]}") in readme_text()


def test_the_debugger_walk_through_reads_the_committed_sort_program(tmp_path):
    """programs.md's pdb session: the exported main-job program stops at line 616 before the
    classifier, its lines 111-122 are the head that looks for `a` at position 1, and a child
    process runs the session's commands to the votes quoted."""
    assert main(["program", "export", str(REPO / "results/learn_sort"), "--out",
                 str(tmp_path)]) == 0
    lines = (tmp_path / "sort.py").read_text().splitlines()
    assert lines[615].strip() == "predictions = classify(features)"
    assert "def predicate_0_2(position, token):" in lines[111]
    assert 'return token == "a"' in "\n".join(lines[113:116])
    page = (REPO / "docs/programs.md").read_text()
    block = page[page.index("$ python -m pdb"):]
    block = block[:block.index("```")]
    commands = [ln[len("(Pdb) "):] for ln in block.splitlines() if ln.startswith("(Pdb) ")]
    quoted = [ln for ln in block.splitlines() if re.match(r"\d \w \[\(", ln)]
    out = subprocess.run([sys.executable, "-m", "pdb", "sort.py", "e", "b", "b", "a", "d", "c"],
                         input="\n".join(commands[:-1] + ["q"]) + "\n", capture_output=True,
                         text=True, cwd=tmp_path, timeout=60).stdout
    assert len(quoted) == 6 and all(q in out for q in quoted)

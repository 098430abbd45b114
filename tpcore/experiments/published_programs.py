"""``tpcore reproduce published-programs``: the programs the authors of "Learning Transformer
Programs" published, re-emitted as tpcore programs, with their lengths and agreement.

For each program of their release's ``programs/rasp`` and ``programs/rasp_categorical_only``
(``--programs``: that ``programs`` folder; ``SET/TASK/TASK.py`` with ``TASK_weights.csv``
beside it), :func:`measure`

1. imports the published file (:func:`tpcore.programs.source.reader.parse_file`: read with
   ``ast``, never run); this IR, run by the NumPy interpreter, is the reference reading of the
   published program;
2. exports it as a tpcore program (``OUT/SET/program/TASK.py``, compressed as ``tpcore program
   export`` does) and counts the lines of both files the same way: every physical line of the
   ``.py`` file (``len(text.splitlines())``, what ``wc -l`` prints), blank lines, comments,
   docstrings, helpers and the closing examples or ``__main__`` block included, the weights
   CSVs not counted; per module, the lines under its ``# NAME ####`` banner
   (:func:`module_lines`), to tell which modules make a longer program longer;
3. runs the exported program in a child process (:func:`tpcore.programs.generated.run_file`)
   on every input when there are at most ``budget["exhaustive"]`` of them
   (:func:`tpcore.programs.examples.all_inputs`: every content of 1 up to the longest length),
   else on ``budget["sample"]`` random ones (:func:`tpcore.programs.examples.sample_inputs`),
   and compares its predictions with the reference's at every position;
4. where pandas is installed, also runs the published file itself in a child process (working
   directory: the folder holding ``programs``, as its weights path is relative to it) on
   ``budget["published"]`` random inputs and compares it with the reference.

Writes ``published_programs.json`` and ``published_programs.md`` into ``out``.
"""

from __future__ import annotations

import importlib.util
import re
import time
from pathlib import Path
from typing import Any

from tpcore.errors import TpcoreError
from tpcore.experiments.budget import Budget, preset
from tpcore.experiments.options import Option, Reproduction
from tpcore.io import write_json, write_text
from tpcore.programs.examples import all_inputs, input_count, sample_inputs
from tpcore.programs.generated import run_file
from tpcore.programs.interpret import predict
from tpcore.programs.ir import Program
from tpcore.programs.source import reader, writer
from tpcore.rundir import check_out_dir

SETS = ("rasp", "rasp_categorical_only")
"""The folders of the authors' release whose programs are re-emitted."""
BUDGETS = {
    "smoke": Budget("smoke", {"exhaustive": 2_000, "sample": 500, "published": 10}),
    "small": Budget("small", {"exhaustive": 100_000, "sample": 20_000, "published": 100}),
    "full": Budget("full", {"exhaustive": 1_000_000, "sample": 200_000, "published": 300}),
}
"""Inputs per program: all of them up to ``exhaustive``, else ``sample`` random ones; and the
random inputs the published file itself runs on (it reads its CSV on every call: slow)."""
BANNER = re.compile(r"^\s*# (\w+) #{4,}$")
CLASSIFIER = re.compile(r"^    (feature_logits|features) = ")
"""The banner over a module's lines, and the first line of the classifier part after them."""
BATCH = 20_000
"""Inputs per interpreter call and per child process."""


def budget(name: str) -> Budget:
    """The preset ``name`` of :data:`BUDGETS`."""
    return preset(name, BUDGETS)


def module_lines(text: str, modules: set[str]) -> dict[str, int]:
    """Lines per module of program source ``text``: from its banner to the next banner or to
    the classifier part; only banners naming one of ``modules`` count."""
    out: dict[str, int] = {}
    current = None
    for line in text.splitlines():
        m = BANNER.match(line)
        if m:
            current = m.group(1) if m.group(1) in modules else None
        elif CLASSIFIER.match(line):
            current = None
        if current is not None:
            out[current] = out.get(current, 0) + 1
    return out


def find_programs(folder: Path) -> list[tuple[str, str, Path]]:
    """``(set, task, path)`` of every ``SET/TASK/TASK.py`` under ``folder``, sets of
    :data:`SETS` only, sorted."""
    found = [(s, p.parent.name, p) for s in SETS for p in sorted((folder / s).glob("*/*.py"))
             if p.stem == p.parent.name]
    if not found:
        raise TpcoreError(f"{folder}: no published programs (expected "
                          f"{' or '.join(f'{s}/TASK/TASK.py' for s in SETS)}, the authors' "
                          "programs folder)")
    return found


def _predictions(run: Any, inputs: list[list[str]]) -> list[list[str]]:
    """``run(batch)`` over ``inputs`` in batches of :data:`BATCH`."""
    out: list[list[str]] = []
    for i in range(0, len(inputs), BATCH):
        out += run(inputs[i: i + BATCH])
    return out


def _agreement(got: list[list[str]], want: list[list[str]]) -> dict[str, Any]:
    """How many inputs agree at every position, and the first that does not."""
    bad = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
    return {"agree": len(got) - len(bad), "of": len(got),
            "first_disagreement": None if not bad else bad[0]}


def measure(path: Path, set_name: str, out: Path, budget: Budget, seed: int,
            published_cwd: Path | None) -> dict[str, Any]:
    """One row (see the module docstring); the exported program goes to
    ``out/<set>/program/``; the published file runs in ``published_cwd`` (None: not run)."""
    p: Program = reader.parse_file(path)
    published_text = path.read_text(encoding="utf-8")
    py, _ = writer.write(p, check_out_dir(out / set_name / "program") / path.name)
    ours_text = py.read_text(encoding="utf-8")
    names = {m.name for m in p.modules}
    mine, theirs = module_lines(ours_text, names), module_lines(published_text, names)
    growth = {m: mine.get(m, 0) - theirs.get(m, 0) for m in names}
    count = input_count(p)
    exhaustive = count <= budget["exhaustive"]
    inputs = list(all_inputs(p)) if exhaustive else sample_inputs(p, budget["sample"], seed)
    want = _predictions(lambda b: predict(p, b, "numpy"), inputs)
    got = _predictions(lambda b: run_file(py, b, what=str(py)), inputs)
    row: dict[str, Any] = {
        "set": set_name, "task": path.parent.name, "published": str(path),
        "exported": str(py), "published_lines": len(published_text.splitlines()),
        "tpcore_lines": len(ours_text.splitlines()), "input_space": count,
        "exhaustive": exhaustive, "exported_agreement": _agreement(got, want),
        "module_lines": {m: {"published": theirs.get(m, 0), "tpcore": mine.get(m, 0)}
                         for m in sorted(names)},
        "most_grown_module": max(sorted(names), key=lambda m: growth[m]),
        "published_run": None}
    if published_cwd is not None:
        sample = sample_inputs(p, budget["published"], seed + 1)
        try:
            theirs_pred = run_file(path, sample, cwd=published_cwd, what=str(path))
            row["published_run"] = _agreement(theirs_pred, predict(p, sample, "numpy"))
        except TpcoreError as exc:
            row["published_run"] = {"error": str(exc)}
    return row


def _agree_text(a: dict[str, Any] | None) -> str:
    if a is None:
        return "not run (pandas is not installed)"
    if "error" in a:
        return f"failed: {a['error'][-120:]}"
    return f"{a['agree']:,} / {a['of']:,}"


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown table of the rows."""
    lines = ["| set | task | published lines | tpcore lines | no longer | inputs | exported "
             "program agrees (inputs) | published .py agrees (random inputs) | module most "
             "longer in tpcore (lines) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m = r["most_grown_module"]
        grown = r["module_lines"][m]
        growth = grown["tpcore"] - grown["published"]
        inputs = (f"all {r['input_space']:,}" if r["exhaustive"] else
                  f"{r['exported_agreement']['of']:,} random of {r['input_space']:,}")
        lines.append(
            f"| {r['set']} | {r['task']} | {r['published_lines']} | {r['tpcore_lines']} | "
            f"{'yes' if r['tpcore_lines'] <= r['published_lines'] else 'no'} | {inputs} | "
            f"{_agree_text(r['exported_agreement'])} | {_agree_text(r['published_run'])} | "
            f"{f'{m} ({growth:+d})' if growth > 0 else 'none'} |")
    return "\n".join(lines)


CLI = Reproduction(
    "the Transformer Programs authors' published programs re-emitted by tpcore: lines and "
    "agreement on every input", "results/published_programs", "small",
    "inputs per program: smoke: all up to 2,000, else 500 random; small: all up to 100,000, "
    "else 20,000 random; full: all up to 1,000,000, else 200,000 random",
    (Option("--programs", "the authors' programs folder (with rasp/ and rasp_categorical_only/)",
            required=True, metavar="DIR"),))
"""``tpcore reproduce published-programs``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int, programs: str | Path = "programs"
        ) -> dict[str, Any]:
    """Rows for every published program under ``programs`` (see the module docstring);
    writes ``published_programs.json`` and ``published_programs.md`` into ``out``."""
    start = time.perf_counter()
    folder = Path(programs)
    out = check_out_dir(out)
    found = find_programs(folder)
    pandas = importlib.util.find_spec("pandas") is not None
    cwd = folder.resolve().parent if pandas else None
    rows = [measure(path, s, out, budget, seed, cwd) for s, _, path in found]
    write_text(out / "published_programs.md", table(rows) + "\n")
    result = {"budget": budget.name, "seed": seed, "programs": rows,
              "no_longer": sum(r["tpcore_lines"] <= r["published_lines"] for r in rows),
              "all_agree": all(r["exported_agreement"]["agree"] == r["exported_agreement"]["of"]
                               for r in rows),
              "pandas": pandas, "seconds": time.perf_counter() - start,
              "command": f"tpcore reproduce published-programs --programs {folder} --budget "
                         f"{budget.name}" + (f" --seed {seed}" if seed else "")
                         + f" --out {out}"}
    write_json(out / "published_programs.json", result)
    return result


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce published-programs`` prints: the table and a summary line."""
    rows = result["programs"]
    return (f"{table(rows)}\n{result['no_longer']} of {len(rows)} tpcore programs no longer "
            f"than the published file; exported programs agree with the published ones on "
            f"{'every' if result['all_agree'] else 'NOT every'} input checked")

"""``results/`` stays lean: tables, metrics, the figures the docs show and the few small models
that docs and tests load, at most 5 MB in all and no file over 512 KB. Weights, program IRs,
paused states and generated programs are rebuilt by the command recorded beside each result
and are not committed (``.gitignore``). Committed figures are palette PNGs
(``pngquant --quality 70-95``), a third of matplotlib's size."""

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.host_only("reads the repository's files")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
MAX_TOTAL = 5 * 1024 * 1024
MAX_FILE = 512 * 1024


def committed() -> list[Path]:
    """The files of ``results/`` that git tracks (every file there outside a git checkout)."""
    if shutil.which("git") and (ROOT / ".git").exists():
        out = subprocess.run(["git", "ls-files", "-z", "results"], cwd=ROOT, check=True,
                             capture_output=True).stdout.decode()
        return [ROOT / name for name in out.split("\0") if name and (ROOT / name).is_file()]
    return [p for p in RESULTS.rglob("*") if p.is_file()]


def test_results_are_at_most_5_mb_and_no_file_over_512_kb():
    files = committed()
    assert files, "no results found"
    sizes = {p.relative_to(ROOT).as_posix(): p.stat().st_size for p in files}
    big = {name: size for name, size in sizes.items() if size > MAX_FILE}
    assert not big, f"files over 512 KB in results/: {big}"
    total = sum(sizes.values())
    assert total <= MAX_TOTAL, f"results/ holds {total / 2**20:.2f} MB, over 5 MB"


def test_rebuilt_artefacts_are_not_committed():
    names = [p.relative_to(ROOT).as_posix() for p in committed()]
    assert not [n for n in names if n.endswith("/program.json") or ".partial/" in n
                or "/program/" in n and n.endswith((".py", "_weights.csv"))]
    models = sorted(n for n in names if n.endswith(".npz"))
    assert len(models) <= 8, f"more weights committed than docs and tests load: {models}"

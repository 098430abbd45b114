"""``reproduce published-programs``: published-format programs re-emitted by tpcore, their line
counts and agreement; on programs written here in the authors' layout and, when
``TPCORE_PUBLISHED_PROGRAMS`` names the authors' ``programs`` folder, on theirs."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from tpcore.errors import TpcoreError
from tpcore.experiments import published_programs as pp
from tpcore.experiments.budget import Budget
from tpcore.programs.examples import random_program, reverse_program
from tpcore.programs.source import library, reader, writer

PANDAS = importlib.util.find_spec("pandas") is not None
TINY = Budget("tiny", {"exhaustive": 200, "sample": 60, "published": 5})


def _authors_folder(root: Path) -> Path:
    """``root/programs`` with two programs in the authors' layout: ``SET/TASK/TASK.py`` reading
    ``programs/SET/TASK/TASK_weights.csv`` relative to the working directory, as theirs do."""
    programs = {("rasp", "reverse"): reverse_program(vocab=3, max_len=6, rule="published"),
                ("rasp_categorical_only", "hist"): random_program(2, vocab=3, max_len=7,
                                                                  rule="published")}
    for (set_name, task), p in programs.items():
        folder = root / "programs" / set_name / task
        path, _ = writer.write(p, folder / f"{task}.py", style="published")
        beside = library.weights_beside(f'"{task}_weights.csv"')
        path.write_text(path.read_text().replace(
            beside, f'"programs/{set_name}/{task}/{task}_weights.csv"'))
    return root / "programs"


def test_rows_count_lines_and_check_every_input(tmp_path):
    folder = _authors_folder(tmp_path)
    result = pp.run(TINY, tmp_path / "out", 0, programs=folder)
    reverse, hist = result["programs"]
    assert (reverse["set"], reverse["task"]) == ("rasp", "reverse")
    assert reverse["exhaustive"] and reverse["input_space"] == 3 + 9 + 27 + 81
    assert reverse["exported_agreement"] == {"agree": 120, "of": 120, "first_disagreement": None}
    assert not hist["exhaustive"] and hist["exported_agreement"]["of"] == 60  # 363 > 200
    for row in result["programs"]:
        published = Path(row["published"]).read_text()
        exported = Path(row["exported"]).read_text()
        assert row["published_lines"] == len(published.splitlines())
        assert row["tpcore_lines"] == len(exported.splitlines())
        assert "def run(tokens):" in exported and "import pandas" not in exported
        modules = {m.name for m in reader.parse_file(row["published"]).modules}
        assert set(row["module_lines"]) == modules
        heads = [m for m in row["module_lines"] if "attn" in m]
        assert all(row["module_lines"][m]["published"] > 0 for m in heads)
    assert Path(reverse["exported"]).parent == tmp_path / "out" / "rasp" / "program"
    assert result["all_agree"]
    md = (tmp_path / "out" / "published_programs.md").read_text()
    assert "| rasp | reverse |" in md and "all 120" in md and "60 random of 363" in md
    if PANDAS:
        assert reverse["published_run"] == {"agree": 5, "of": 5, "first_disagreement": None}
    else:
        assert reverse["published_run"] is None and "pandas is not installed" in md


def test_a_disagreement_is_reported(tmp_path, monkeypatch):
    folder = _authors_folder(tmp_path)

    def wrong(path, sequences, **kwargs):
        return [["?"] * len(s) for s in sequences]

    monkeypatch.setattr(pp, "run_file", wrong)
    result = pp.run(TINY, tmp_path / "out", 0, programs=folder)
    assert not result["all_agree"]
    assert result["programs"][0]["exported_agreement"]["first_disagreement"] == 0
    assert "NOT every input" in pp.report(result, tmp_path / "out")


def test_module_lines_follow_the_banners():
    text = "\n".join(["def run(tokens):", "    # attn_0_0 ####", "    a = 1", "",
                      "    # inputs ####", "    b = 2", "    # mlp_0_0 ####", "    c = 3",
                      "    features = [a, c]", "    return c"])
    assert pp.module_lines(text, {"attn_0_0", "mlp_0_0"}) == {"attn_0_0": 3, "mlp_0_0": 2}


def test_a_folder_without_published_programs_is_refused(tmp_path):
    with pytest.raises(TpcoreError, match="no published programs"):
        pp.run(TINY, tmp_path / "out", 0, programs=tmp_path)


AUTHORS = os.environ.get("TPCORE_PUBLISHED_PROGRAMS")


@pytest.mark.skipif(not AUTHORS, reason="TPCORE_PUBLISHED_PROGRAMS (the authors' programs "
                                        "folder) is not set")
def test_the_authors_programs_reemit_no_longer_and_agreeing(tmp_path):
    found = pp.find_programs(Path(AUTHORS))
    assert len(found) == 14
    for set_name, _, path in found:
        row = pp.measure(path, set_name, tmp_path, TINY, 0, None)
        assert row["tpcore_lines"] <= row["published_lines"], row["published"]
        agreement = row["exported_agreement"]
        assert agreement["agree"] == agreement["of"] == 60, row["published"]

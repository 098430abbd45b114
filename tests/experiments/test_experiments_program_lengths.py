"""The Table 4 experiment reads the selected Table 1 programs and counts their lines."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tpcore.errors import TpcoreError
from tpcore.experiments import program_lengths, table1
from tpcore.models import extract
from tpcore.programs import ir
from tpcore.programs.examples import reverse_program
from tpcore.programs.source import writer

REPO = Path(__file__).resolve().parents[2]


def _run_dir(root):
    d = root / "t1" / "runs" / "reverse" / "L2_s0"
    ir.save(reverse_program(), d / "program.json")
    (d / "metrics.json").write_text(json.dumps({"task": "reverse", "test": {"acc": 0.995}}))
    return d


def test_counts_selected_programs(tmp_path, monkeypatch):
    _run_dir(tmp_path)

    def fake_table1(budget, out, seed, tasks, epochs, overwrite):
        assert (budget.name, tasks, overwrite) == ("smoke", ("reverse",), False)
        return {"tasks": [{"task": "reverse", "selected": {"run": "L2_s0"}}]}

    monkeypatch.setattr(table1, "run", fake_table1)
    result = program_lengths.run(program_lengths.budget("smoke"), tmp_path / "out", 0,
                                 tmp_path / "t1", tasks=("reverse",), check_fidelity=False)
    row = result["tasks"][0]
    assert (row["full"], row["pruned"]) == tuple(writer.line_counts(reverse_program()).values())
    assert row["test_acc"] == 99.5
    assert result["at_or_below_paper"] == int(row["pruned"] <= 713)
    saved = json.loads((tmp_path / "out" / "program_lengths.json").read_text())
    assert saved["tasks"][0]["paper_pruned"] == 713
    md = (tmp_path / "out" / "program_lengths.md").read_text()
    assert "| reverse | L2_s0 |" in md and "Lines per module" in md
    modules = row["module_lines"]
    assert set(modules) == {"attn_0_0", "mlp_0_0", "attn_1_0", "other"}
    for key in ("full", "pruned"):
        assert sum(m[key] for m in modules.values()) == row[key]
    assert row["decompile_seconds"] > 0


def test_explicit_run_directories(tmp_path):
    d = _run_dir(tmp_path)
    result = program_lengths.run(program_lengths.budget("small"), tmp_path / "out", 0,
                                 run_dirs=[d], check_fidelity=False)
    assert result["tasks"][0]["run"] == "L2_s0" and "--run-dirs" in result["command"]


def test_a_committed_run_without_its_program_json_is_measured_from_its_model(tmp_path):
    """The committed Table 1 runs keep model.npz, not program.json (rebuilt on load)."""
    committed = REPO / "results" / "table1" / "runs" / "hist" / "L1_H2+2_M1+1_s0"
    assert not (committed / "program.json").exists()
    row = program_lengths.measure(committed)
    assert row["task"] == "hist" and row["pruned"] < row["full"]
    assert row["fidelity"]["numpy"] == row["fidelity"]["numba"] == 1.0


def test_bad_run_directories_name_their_path(tmp_path, monkeypatch):
    """No metrics, no model, or a table past the limits: one TpcoreError naming the path."""
    with pytest.raises(TpcoreError, match=f"{tmp_path}: not a finished run directory"):
        program_lengths.measure(tmp_path)
    (tmp_path / "metrics.json").write_text(json.dumps({"task": "hist", "test": {"acc": 1.0}}))
    with pytest.raises(TpcoreError, match=f"{tmp_path}: no program.json, model.npz"):
        program_lengths.measure(tmp_path)
    for doc, message in (([], "a list; expected an object"),
                         ({"task": "evil", "test": {"acc": 1.0}}, 'task "evil" has no program'),
                         ({"task": 5}, "task 5 has no program length")):
        (tmp_path / "metrics.json").write_text(json.dumps(doc))
        with pytest.raises(TpcoreError, match=message):  # once a KeyError or TypeError
            program_lengths.measure(tmp_path)
    (tmp_path / "metrics.json").write_text(json.dumps({"task": "hist", "test": {"acc": 1.0}}))
    committed = REPO / "results" / "table1" / "runs" / "hist" / "L1_H2+2_M1+1_s0"
    monkeypatch.setattr(extract, "LIMITS", dataclasses.replace(ir.LIMITS, table=16))
    with pytest.raises(TpcoreError, match=r"L1_H2\+2_M1\+1_s0/model\.npz: mlp_0_0: table entries"):
        program_lengths.measure(committed, check_fidelity=False)

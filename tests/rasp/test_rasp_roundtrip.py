"""The round trip: a written program compiled, fine-tuned on its task, decompiled and compared
with what was written; and the reproduction that reports it."""

from __future__ import annotations

from tpcore.backend import xp_of
from tpcore.cli import main
from tpcore.experiments import compiled_programs as cp
from tpcore.experiments.budget import Budget
from tpcore.models.extract import extract
from tpcore.pipelines.roundtrip import compare, round_trip
from tpcore.rasp import compile
from tpcore.rasp.library import TASKS

TINY = Budget("tiny", {"exhaustive": 300, "sample": 200, "epochs": 1})


def test_the_induction_circuit_survives_fine_tuning_and_decompiles_as_written():
    r = round_trip("induction", margin=10.0, epochs=1, lr=1e-3, exhaustive=0, sample=500)
    assert r["compiled"]["token_accuracy"] == r["fine_tuned"]["token_accuracy"] == 1.0
    assert r["steps"] == 31 and 0 < r["moved"] < 0.1 and r["final_loss"] > 0
    assert r["differences"] == [] and r["decompiled_check"]["ok"]


def test_compare_names_the_module_that_differs():
    t = TASKS["sort"]
    compiled = compile(t.program())
    decompiled = extract(compiled.model, t.vocab(), t.classes())
    assert compare(compiled.ir, decompiled) == []
    mlp = compiled.model.layers[4].mlp_b2
    mlp.data[0, 0] = xp_of(mlp.data).roll(mlp.data[0, 0], 1)  # the last map prefers others
    changed = compare(compiled.ir, extract(compiled.model, t.vocab(), t.classes()))
    assert len(changed) == 1 and changed[0].startswith("mlp_4_0: its table differs at")


def test_the_reproduction_writes_its_tables(tmp_path):
    result = cp.run(TINY, tmp_path, 0, tasks=("hist", "dyck1"))
    assert [r["task"] for r in result["tasks"]] == ["hist", "dyck1"] and result["all_verified"]
    hist = result["tasks"][0]
    assert hist["lines"] == 2 and hist["layers"] == 1
    assert hist["round_trip"]["differences"] == []
    md = (tmp_path / "compiled_programs.md").read_text()
    assert "| hist | 2 | 1 | 1 / 1 |" in md and "200 random of 335,922" in md
    assert "--tasks hist,dyck1" in result["command"]


def test_the_command_refuses_an_unknown_task(tmp_path, capsys):
    assert main(["reproduce", "compiled-programs", "--tasks", "most_common",
                 "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tpcore: error: no written program for task 'most_common'")
    assert "\n" not in err and not (tmp_path / "x").exists()

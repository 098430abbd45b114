"""``tpcore reproduce table5``: the hand-written reverse solution is correct, and the study runs
end to end at the smoke budget."""

import json

import pytest

from tpcore.experiments import table5
from tpcore.pipelines.score import evaluate_on_task
from tpcore.tasks.registry import make_task


@pytest.mark.parametrize("size", [8, 16])
def test_the_solution_program_solves_reverse(size):
    task = make_task("reverse", size, size, 300, 0, 1)
    program = table5.solution(task.vocab, task.classes, task.max_len)
    score = evaluate_on_task(program, "reverse", n_samples=300, engine="numpy")
    assert score["token_accuracy"] == 1.0 and score["sequence_accuracy"] == 1.0


def test_smoke_budget_writes_every_row(tmp_path):
    result = table5.run(table5.budget("smoke"), tmp_path, seed=0)
    assert len(result["rows"]) == len(table5.ROWS)
    assert all(len(r["acc"]) == 1 and 0 <= r["acc"][0] <= 100 for r in result["rows"])
    saved = json.loads((tmp_path / "table5.json").read_text())
    assert saved["rows"] == result["rows"]
    md = (tmp_path / "table5.md").read_text()
    assert md.count("\n") == len(table5.ROWS) + 2
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert runs == [f"row{r}-s0" for r in range(len(table5.ROWS))]
    configs = [json.loads((tmp_path / "runs" / r / "run.json").read_text())["config"]
               for r in runs]
    assert configs[0]["init_from"] == ""
    assert configs[2]["init_parts"] == ("attn_0_0.read,attn_0_0.predicate,mlp_0_0.read,"
                                        "attn_1_0.read")

"""Training, evaluation, failure search and the CLI on tiny budgets."""

import json
from pathlib import Path

import numpy as np
import pytest

from tpcore.cli import main
from tpcore.experiments.budget import scaled
from tpcore.experiments.sorting import (
    evaluate_lists,
    run,
    search_failures,
    sort_list,
    task_of,
    train,
)
from tpcore.experiments.sorting_circuits import circuit_report
from tpcore.models import load
from tpcore.tasks.sorting import TASKS, generate

RESULTS = Path(__file__).resolve().parents[2] / "results" / "sorting"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("sorting")
    summary = run(scaled(0.004), out, 0, tasks=("bidirectional",))
    return out, summary


def test_reproduce_writes_results_and_checkpoint(trained):
    out, summary = trained
    row = summary["rows"][0]
    assert row["task"] == "bidirectional" and row["steps"] == 40 and row["d_model"] == 56
    assert row["parameters"] == 14738  # 13*56 + 12*56 + 4*(56*56+56) + 56*10+10
    for name in ("random", "hard"):
        assert row[name]["n"] == 4000 and 0 <= row[name]["sorted"] <= 1
    assert row["search"]["n"] == 4000
    assert json.loads((out / "sorting.json").read_text())["rows"][0]["task"] == "bidirectional"
    assert "| bidirectional | 56 | 14738 | 40 |" in (out / "sorting.md").read_text()
    model = load(out / "bidirectional.npz")
    assert task_of(model).name == "bidirectional"


def test_reproduce_reuses_a_result_only_for_its_configuration(trained, monkeypatch):
    from tpcore.errors import TpcoreError
    from tpcore.experiments import sorting

    out, summary = trained
    monkeypatch.setattr(sorting, "train", lambda *a, **k: pytest.fail("retrained"))
    again = run(scaled(0.004), out, 0, tasks=("bidirectional",))
    assert again["rows"][0]["history"] == summary["rows"][0]["history"]
    with pytest.raises(TpcoreError, match="steps: 40 recorded, 50 requested"):
        run(scaled(0.005), out, 0, tasks=("bidirectional",))
    assert main(["reproduce", "sorting", "--tasks", "bidirectional", "--seed", "1", "--budget",
                 "0.004", "--out", str(out)]) == 2


def test_training_lowers_the_loss():
    _, result = train(TASKS["bidirectional"], 30, 20, 0.02, seed=1)
    first, last = result.history[0], result.history[-1]
    assert last["loss"] < first["loss"] and last["acc"] > first["acc"]


def test_search_failures_agrees_with_evaluation(trained):
    out, _ = trained
    model = load(out / "bidirectional.npz")
    res = search_failures(model, 500, "hard", seed=5, batch_size=128)
    rng = np.random.default_rng(5)  # the search draws batch by batch: 3 x 128, then 116
    parts = [generate(TASKS["bidirectional"], "hard", k, rng) for k in (128, 128, 128, 116)]
    lists, lengths = (np.concatenate(x) for x in zip(*parts))
    ev = evaluate_lists(model, TASKS["bidirectional"], lists, lengths)
    assert res["n_failures"] == int((~ev["correct"]).sum()) > 0
    assert res["rules"]["items_wrong"] >= res["n_failures"]
    for f in res["failures"]:
        assert sorted(f["input"]) != f["output"] and len(f["input"]) == len(f["output"])


def test_circuit_report_text_and_plots(trained, tmp_path):
    pytest.importorskip("matplotlib")
    out, _ = trained
    text, numbers = circuit_report(load(out / "bidirectional.npz"), plots=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"bidirectional_{k}.png" for k in ("attention", "bos", "ov", "qk")]
    assert "## OV circuit" in text and len(numbers["bos_ratio"]) == 10
    assert -1 <= numbers["logit_fk_correlation"] <= 1


def test_cli(trained, capsys):
    out, _ = trained
    path = str(out / "bidirectional.npz")
    assert main(["sorting", "search-failures", path, "--n", "300", "--seed", "2"]) == 0
    assert "of 300 hard lists sorted wrongly" in capsys.readouterr().out
    assert main(["sorting", "sort", path, "3 1 2"]) == 0
    assert capsys.readouterr().out.startswith("output [")
    assert main(["sorting", "sort", path, "3 1 20"]) == 2
    assert "does not fit" in capsys.readouterr().err
    assert main(["sorting", "search-failures", path, "--n", "0"]) == 2
    assert main(["sorting", "circuits", str(out / "missing.npz")]) == 2
    capsys.readouterr()
    assert main(["sorting", "circuits", path, "--list", "5 5 1"]) == 0
    assert "## Attention pattern on [5, 5, 1]" in capsys.readouterr().out


@pytest.mark.parametrize("name", list(TASKS))
def test_sort_list_with_the_committed_models_any_length(name):
    model = load(RESULTS / f"{name}.npz")
    for values in ([3, 1, 2], [9, 0, 7, 4, 2], [5], list(range(9, -1, -1))):
        assert sort_list(model, values) == sorted(values)

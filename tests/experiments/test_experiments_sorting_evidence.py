"""The post's other sorting runs on tiny budgets: the unclipped bidirectional model, the causal
model with a constant query, and the causal model's QK tables over training."""

import json

import numpy as np
import pytest

from tpcore.backend import to_host
from tpcore.cli import main
from tpcore.experiments import sorting
from tpcore.experiments import sorting_evidence as E
from tpcore.experiments.budget import scaled
from tpcore.experiments.sorting import run, run_config, train
from tpcore.models import load
from tpcore.tasks.sorting import TASKS, encode

NEW = ("bidirectional_unclipped", "causal_frozen_query", "causal_qk_training")
BUDGET = 0.002


@pytest.fixture(scope="module")
def evidence(tmp_path_factory):
    out = tmp_path_factory.mktemp("sorting_evidence")
    clips = []
    step = sorting.supervised_step

    def spy(model, batch, ctx, clip=None):
        clips.append((batch["tokens"].shape[1], clip))
        return step(model, batch, ctx, clip=clip)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sorting, "supervised_step", spy)
        summary = run(scaled(BUDGET), out, 0, tasks=NEW)
    return out, summary, clips


def test_checkpoints_of_the_full_run():
    assert E.checkpoint_steps(8000) == [40, 160, 480, 1600, 4000, 8000]
    assert run_config("causal_qk_training", 1.0, 0)["checkpoints"] == E.checkpoint_steps(8000)
    assert E.checkpoint_steps(3) == [1, 2, 3]


def test_unclipped_run_trains_the_bidirectional_model_without_clipping(evidence):
    out, summary, clips = evidence
    row = next(r for r in summary["rows"] if r["task"] == "bidirectional_unclipped")
    assert row["clip"] is None and row["steps"] == 20
    seen = {clip for width, clip in clips if width == TASKS["bidirectional"].seq_len}
    assert seen == {None}
    assert run_config("bidirectional", 1.0, 0)["clip"] == 0.02  # the clipped one is unchanged
    record = json.loads((out / "bidirectional_unclipped_result.json").read_text())["record"]
    assert record["config"]["clip"] is None and record["config"]["trains"] == "bidirectional"
    assert row["search"]["n"] == 2000 and row["hard"]["n"] == 4000


def test_frozen_query_ignores_the_token_at_the_query(evidence):
    out, summary, _ = evidence
    row = next(r for r in summary["rows"] if r["task"] == "causal_frozen_query")
    assert row["parameters"] == 15242 - 56 * 56  # the causal model less W_Q
    model = load(out / "causal_frozen_query.npz")
    assert model.config.query == "constant"
    task = TASKS["causal"]
    lists = np.array([[3, 1, 4, 1, 5, 9, 2, 6, 5, 3]] * 2)
    tokens = encode(task, lists)["tokens"]
    tokens[1, task.first_target + 2] = 7  # another previously generated token
    _, cache = model.run_with_cache(tokens)
    q = to_host(cache["blocks.0.attn.hook_q"])
    assert np.array_equal(q[0], q[1]) and np.array_equal(q[0], np.broadcast_to(q[0, 0], q[0].shape))
    scores = to_host(cache["blocks.0.attn.hook_attn_scores"])[:, 0]
    first = task.first_target
    assert np.array_equal(scores[0, first + 5, : first + 2], scores[1, first + 5, : first + 2])


def test_qk_record_has_the_checkpoints_asked_for(evidence):
    out, summary, _ = evidence
    config = run_config("causal_qk_training", BUDGET, 0)
    record = json.loads((out / "causal_qk_training_result.json").read_text())
    assert [c["step"] for c in record["checkpoints"]] == config["checkpoints"] == [1, 3, 8, 16]
    for c in record["checkpoints"]:
        assert len(c["upper_triangularity"]) == 10 and sorted(c["qk"]) == ["0", "5", "9"]
        table = np.array(c["qk"]["5"])
        assert table.shape == (10, 10) and (table.max(axis=1) == 0).all() and table.min() >= -99
    assert not (out / "causal_qk_training.npz").exists()
    assert "validation_loss" in summary["qk_training"]["checkpoints"][0]
    assert "qk" not in summary["qk_training"]["checkpoints"][0]
    assert "| 16 |" in (out / "sorting.md").read_text()
    model, _ = train(TASKS["causal"], config["steps"], config["lr_drop"], None, 0)
    assert E.qk_snapshot(model, TASKS["causal"]) == {
        k: record["checkpoints"][-1][k] for k in ("upper_triangularity", "qk")}


def test_results_are_reused_and_drawn(evidence, monkeypatch, tmp_path):
    out, _, _ = evidence
    monkeypatch.setattr(sorting, "train", lambda *a, **k: pytest.fail("retrained"))
    assert main(["reproduce", "sorting", "--tasks", ",".join(NEW), "--budget", str(BUDGET),
                 "--out", str(out)]) == 0
    assert main(["reproduce", "sorting", "--tasks", "causal_frozen", "--out", str(tmp_path)]) == 2
    pytest.importorskip("matplotlib")
    assert [p.name for p in E.draw_qk_training(out)] == ["causal_qk_training.png"]

"""Grammar learning from leaves: both methods through the training loop, rows cached by their
settings."""

import json

import numpy as np

from tpcore.bp import evidence_from_leaves, expected_rule_counts, transition_from_logits
from tpcore.experiments import grammar_learning as gl
from tpcore.experiments.tree_grammar import paper_grammar
from tpcore.tasks.trees import sample_trees
from tpcore.train import StepContext


def test_em_step_sets_the_transitions_to_the_normalised_counts():
    g = paper_grammar()
    e = evidence_from_leaves(sample_trees(g, 50, 4, 0, seed=1).leaves, g.q)
    theta = np.random.default_rng(0).standard_normal((4, 4, 4))
    model = gl.GrammarLogits(theta.copy(), g.p0)
    loss = gl.em_step(model, {"evidence": e}, StepContext(0, None, None))
    gl.RuleCountUpdate(model.parameters()).step()
    counts, sum_log_z = expected_rule_counts(transition_from_logits(theta), g.p0, e)
    np.testing.assert_allclose(model.transitions(),
                               counts / counts.sum(axis=(1, 2), keepdims=True), atol=1e-12)
    assert np.isclose(loss, -sum_log_z / 50)


def test_tiny_budget_learns_and_resumes(tmp_path, monkeypatch):
    out = gl.run(gl.budget("tiny"), tmp_path, 0)
    assert [(r["P"], r["method"]) for r in out["rows"]] == [
        (50, "em"), (50, "adam"), (200, "em"), (200, "adam")]
    for r in out["rows"]:
        assert 0 <= r["tv"] <= 1 and 0 < r["steps_to_converge"] <= r["steps"] == 10
    assert json.loads((tmp_path / "grammar_learning.json").read_text())["rows"] == out["rows"]
    assert "| 200 | adam |" in (tmp_path / "grammar_learning.md").read_text()
    monkeypatch.setattr(gl, "learn", _no_training)
    assert gl.run(gl.budget("tiny"), tmp_path, 0)["rows"] == out["rows"]  # every run reused


def _no_training(*args, **kwargs):
    raise AssertionError("trained again")

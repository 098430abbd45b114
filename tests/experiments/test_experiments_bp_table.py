"""The exact-BP table on a small sample: matched BP is the best of its row."""

import json

from tpcore.cli import main


def test_reproduce_bp_table_small(tmp_path):
    assert main(["reproduce", "bp-table", "--samples", "2000", "--out", str(tmp_path)]) == 0
    out = json.loads((tmp_path / "bp_table.json").read_text())
    acc = {(r["k_data"], r["k_bp"]): r for r in out["rows"]}
    assert len(acc) == 25 and acc[0, 0]["root_acc"] == 1.0
    for k in range(5):  # matched BP is Bayes-optimal: best of its row (up to sampling noise)
        for key in ("root_acc", "mlm_acc"):
            assert acc[k, k][key] >= max(acc[k, kp][key] for kp in range(5)) - 0.02
    assert "BP_4" in (tmp_path / "bp_table.md").read_text()


def test_bp_as_attention_blocks_matches_bp_on_the_papers_grammar():
    from tpcore.experiments.bp_table import attention_check
    from tpcore.experiments.tree_grammar import paper_grammar

    rows = attention_check(paper_grammar(), 4, 200, seed=0)
    assert {(r["data"], r["hidden"]) for r in rows} == {
        (d, h) for d in ("in-sample (k = 0)", "uniform") for h in ("none", "25%")}
    for r in rows:
        if r["beta"] is None or r["beta"] >= 20:  # the exact limit, and softmax near it
            assert r["max_abs_error"] < 1e-12 and r["argmax_agreement"] == 1.0, r
    coarse = [r["max_abs_error"] for r in rows if r["beta"] == 2.0]
    assert min(coarse) > 1e-2  # a soft attention is visibly not BP: the check can fail

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

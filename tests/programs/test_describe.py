"""Reachable values, the dependency graph, Figure 7 contributions and statistics."""

from __future__ import annotations

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.programs import describe
from tpcore.programs import interpret as it
from tpcore.programs.examples import (
    counting_program,
    random_inputs,
    random_program,
    reverse_program,
)

pytestmark = pytest.mark.host_only("program analysis reads the host-side program IR")


def test_reachable_is_conservative_on_random_programs():
    for seed in range(4):
        p = random_program(seed)
        reach = describe.reachable(p)
        ids, lengths = random_inputs(p, 500, seed)
        env = it.evaluate(p, ids, lengths)
        valid = np.arange(p.max_len)[None] < lengths[:, None]
        for name, var in p.variables.items():
            seen = env[name][valid]
            if var.kind == "categorical":
                assert reach[name][np.unique(seen)].all(), name
            else:
                index = np.searchsorted(np.asarray(var.values, float), np.unique(seen))
                assert reach[name][index].all(), name


def test_dependency_text_and_unused():
    text = describe.dependency_text(reverse_program())
    assert "attn_1_0_outputs" in text and "unused (no effect on predictions): ones" in text
    assert describe.used_variables(reverse_program()) >= {"mlp_0_0_outputs", "tokens"}


def test_contributions_add_up_to_the_prediction():
    p = random_program(1)
    tokens = ["<s>", "3", "1", "4", "</s>"]
    rows = describe.contributions(p, tokens, 2)
    total = p.classifier.bias + sum(np.asarray(list(r["scores"].values())) for r in rows)
    ids, lengths = it.encode(p, [tokens])
    logits = it.feature_logits(p, it.evaluate(p, ids, lengths))[0, 2]
    np.testing.assert_allclose(total, logits)
    best = p.classifier.classes[int(np.argmax(logits))]
    assert rows[0]["scores"][best] == max(r["scores"][best] for r in rows)


def test_stats_counts_modules():
    s = describe.stats(random_program(2, layers=2, cat_heads=3, num_heads=1))
    assert (s["categorical_heads"], s["numerical_heads"]) == (6, 2)


def test_head_table_marks_the_key_each_query_selects():
    p = reverse_program(vocab=6, max_len=4)
    text = describe.head_table(p, "attn_0_0")
    assert text.startswith("attn_0_0 (categorical head): query tokens, key tokens, value "
                           "positions -> attn_0_0_outputs")
    grid = text.split("\n\n", 1)[1].splitlines()
    assert grid[0].split() == ["tokens", "\\", "tokens", *p.tokens.values]
    for row in grid[1:]:   # every token selects </s>: the x sits in its column only
        assert row.split()[1:] == ["x" if t == "</s>" else "." for t in p.tokens.values]
    read = describe.head_table(p, "attn_1_0").split("\n\n", 1)[1].splitlines()
    assert [r.split()[1:].index("x") for r in read[1:]] == [0, 1, 2, 3]   # predicate q -> q


def test_head_table_lists_large_key_sets_and_names_heads():
    p = counting_program("tokens", target=1)
    wide = reverse_program(vocab=40, max_len=4)
    lines = describe.head_table(wide, "attn_0_0").split("\n\n", 1)[1].splitlines()
    assert len(lines) == wide.tokens.size and all(x.endswith("-> </s>") for x in lines)
    assert "sums the value" in describe.head_table(p, "num_attn_0_0")
    with pytest.raises(TpcoreError, match="'mlp_0_0' is not an attention head; heads: "
                                          r"\['attn_0_0', 'attn_1_0'\]"):
        describe.head_table(wide, "mlp_0_0")

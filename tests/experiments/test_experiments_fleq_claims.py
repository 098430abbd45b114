"""The FLEQ study's two size claims (§8 transpose, §6.3 x^2) and the one-head sigmoid sum
(Corollary 6): the studies' tables on small instances."""

import pytest

from tpcore.experiments import fleq_claims
from tpcore.experiments.fleq import width_study


@pytest.fixture(scope="module")
def res():
    return {"vec_transpose": fleq_claims.vec_transpose_study(0, [0.5, 20.0], d=6, n_mats=2),
            "square": fleq_claims.square_study([1e-3, 1e-7], n_points=21)}


def test_transpose_size_and_error(res):
    vt = res["vec_transpose"]
    assert (vt["layers"], vt["heads"], vt["n"], vt["L"]) == (1, 1, 36, 6)
    assert vt["width"] == 2 * 6 + 4 and vt["head_input_rows"] == 13 and vt["ff_units"] == 0
    assert vt["paper"]["width"] == 8 * 13
    blunt, sharp = vt["vs_lambda"]
    assert blunt["error"] > 0.1 and sharp["error"] < 1e-14
    assert all(r["error"] <= r["bound"] for r in vt["vs_lambda"])


def test_square_depths_match_the_sawtooth_errors(res):
    sq = res["square"]
    relu = {r["m"]: r["error"] for r in sq["relu"]}
    assert all(relu[m] == 2.0 ** (-2 * m - 2) for m in relu)
    for r in sq["attention"]:
        m = r["relu_depth_needed"]
        assert r["layers"] == 2
        assert relu[m] <= r["error"] and (m == 1 or relu[m - 1] > r["error"])


def test_markdown_has_both_sections(res):
    text = "\n".join(fleq_claims.markdown(res))
    assert "| Charton (2021), learned | 1 | 8 | 256 |" in text
    assert "| paper's count | 1 | 1 | 104 (= 8 x 13" in text
    assert "| 1e-03 |" in text and "| 16 | 5.82e-11 |" in text


def test_one_head_sigmoid_sums_reach_their_fit_once_c_is_large():
    """Corollary 6: with a small off-diagonal constant every other term's column leaks into a
    term; from C = 40 the one-head block's error is the least-squares fit's own."""
    rows = width_study([10.0, 40.0], [16])
    assert [r["function"] for r in rows] == ["inv", "sqrt"]
    for r in rows:
        leaky, tight = (b["error"] for b in r["block"])
        assert r["heads"] == 1 and r["layers"] == 3
        assert leaky > 100 * r["fit_error"]
        assert tight == pytest.approx(r["fit_error"], rel=0.05)

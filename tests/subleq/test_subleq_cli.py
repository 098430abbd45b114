"""``tpcore looped run`` and the experiment helpers."""

import numpy as np

from tpcore.cli import main
from tpcore.experiments.looped import (
    _minsky_markdown,
    lockstep_ok,
    min_lam,
    minsky_study,
    paper_bound,
)
from tpcore.subleq.examples import example
from tpcore.subleq.machine import build


def test_run_example_agrees(capsys):
    assert main(["looped", "run", "multiply", "--trace"]) == 0
    out = capsys.readouterr().out
    assert "agree after every step: yes" in out
    assert "p=35" in out and "subleq x, _tmp" in out


def test_run_csv_and_bad_inputs(tmp_path, capsys):
    (tmp_path / "c.csv").write_text("a,b,c\n3,4,6\n1,2,6\n")
    (tmp_path / "m.csv").write_text("mem\n0\n-1\n2\n5\n")
    assert main(["looped", "run", str(tmp_path / "c.csv"), "--mem", str(tmp_path / "m.csv"),
                 "--N", "6", "--lam", "8"]) == 0
    assert "agree after every step: yes" in capsys.readouterr().out
    (tmp_path / "m.csv").write_text("mem\n0\n-1\n2\n500\n")
    assert main(["looped", "run", str(tmp_path / "c.csv"), "--mem", str(tmp_path / "m.csv"),
                 "--N", "6"]) == 2
    assert "initial value 500 of cell 4" in capsys.readouterr().err
    assert main(["looped", "run", "multiply", "--max-steps", "5"]) == 2
    assert "step limit 5" in capsys.readouterr().err


def test_min_lam_bisection_and_lockstep_detection():
    assert abs(min_lam(lambda lam: lam >= 3.0) - 3.0) <= 3.0 * 0.02
    assert min_lam(lambda lam: False) is None
    p = example("multiply")
    assert lockstep_ok(build(p.layout, lam=12.0), [p], 10)
    assert not lockstep_ok(build(p.layout, lam=0.5), [p], 10)
    assert np.isclose(paper_bound(10, 10, 1, eps=1.0), np.log(10 ** 4))


def test_minsky_machines_run_on_the_looped_transformer():
    """Appendix C: a Minsky adder and multiplier, translated to SUBLEQ, run on the looped
    transformer in lockstep with the interpreter and end with the expected registers; the
    study's table names every case."""
    rows = minsky_study((("add", (2, 3)), ("multiply", (3, 4)), ("multiply", (0, 2))))
    assert [r["end"] for r in rows] == [{"a": 5, "b": 0}, {"a": 0, "b": 4, "p": 12, "t": 0},
                                        {"a": 0, "b": 2, "p": 0, "t": 0}]
    assert all(r["agree"] and r["correct"] for r in rows)
    assert rows[1]["minsky_instructions"] == 9 and rows[1]["steps"] > rows[2]["steps"]
    table = "\n".join(_minsky_markdown(rows))
    assert "| multiply | a = 3, b = 4, p = 0, t = 0 | a = 0, b = 4, p = 12, t = 0 |" in table

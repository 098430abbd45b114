"""tpcore.subleq.run: a program on the looped transformer and the interpreter in one call."""

import pytest

from tpcore import subleq
from tpcore.errors import TpcoreError
from tpcore.subleq.examples import multiply


def test_an_example_runs_both_ways_and_agrees():
    r = subleq.run("multiply")
    assert r.agree and r.steps == r.interpreter.steps > 0
    assert r.memory() == r.memory("interpreter") and r.memory()["p"] == 35
    assert all(r.agrees_at(t) for t in range(r.steps + 1))


def test_a_program_from_source_with_softmax_attention():
    program = subleq.assemble(multiply(3, 4), N=8)
    r = subleq.run(program, lam=6.0, schedule="paper")
    assert r.agree and r.memory()["p"] == 12 and r.machine.schedule == "paper"


def test_a_disagreement_is_reported_not_hidden():
    r = subleq.run("multiply")
    r.transformer.mems[3] = r.transformer.mems[3] + 1
    assert not r.agrees_at(3) and not r.agree


def test_load_names_what_it_cannot_read(tmp_path):
    with pytest.raises(TpcoreError, match="unknown example 'nope'.*no file 'nope'"):
        subleq.load("nope")
    with pytest.raises(TpcoreError, match="memory CSV 'm.csv' goes with a commands CSV"):
        subleq.load("multiply", mem="m.csv")
    (tmp_path / "c.csv").write_text("a,b,c\n1,2,4\n")
    with pytest.raises(TpcoreError, match="give its memory CSV too"):
        subleq.load(tmp_path / "c.csv")
    with pytest.raises(TpcoreError, match="which='both'"):
        subleq.run("multiply").memory("both")


def test_a_run_prints_in_one_line_and_traces_by_name():
    """``print(subleq.run("factorial"))`` once printed 53 KB of arrays."""
    r = subleq.run("factorial")
    text = repr(r)
    assert len(text) < 300 and "120 steps" in text and "agrees with the interpreter" in text
    assert "acc=120" in text and len(repr(r.program)) < 300
    table = r.trace_table(12).splitlines()
    assert table[0].split()[:4] == ["step", "at", "instruction", "writes"]
    assert len(table) == 1 + 12 + 1 and table[-1].startswith("... 108 more steps")
    assert "subleq $1 k done" in table[1] and "k = 4" in table[1] and "yes" in table[1]
    assert len(r.trace_table(None).splitlines()) == 1 + r.steps
    r.transformer.mems[3] = r.transformer.mems[3] + 1
    assert " NO " in r.trace_table(5).splitlines()[3] and "DISAGREES" in repr(r)

"""Validation of bad programs, the assembler and the authors' CSV format."""

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.subleq.asm import assemble
from tpcore.subleq.examples import minsky
from tpcore.subleq.interpret import interpret
from tpcore.subleq.program import SubleqProgram, load_csv, validate

pytestmark = pytest.mark.host_only("SUBLEQ programs, layouts and their files are host data")


def _prog(cmds, mem, s=1, N=6):
    return SubleqProgram(np.array(cmds), np.array(mem), s=s, N=N)


@pytest.mark.parametrize("cmds, mem, match", [
    ([[9, 3, 6], [1, 2, 6]], [0, -1, 1, 2], r"instruction 0 \(column 5\): operand a = 9"),
    ([[3, 0, 6], [1, 2, 6]], [0, -1, 1, 2], "operand b = 0 is not a memory column"),
    ([[3, 4, 2], [1, 2, 6]], [0, -1, 1, 2], "jump target c = 2"),
    ([[3, 4, 6], [1, 2, 6]], [0, -1, 40, 2], "initial value 40 of cell 3"),
    ([[3, 4, 6], [1, 2, 5]], [0, -1, 1, 2], "missing EOF: .* jumps to 5"),
    ([[3, 4, 6], [1, 2, 6]], [0, 1, 1, 2], "missing EOF: .* hold 0, 1"),
    ([[3, 2, 6], [1, 2, 6]], [0, -1, 1, 2], "writes cell 2, which the EOF"),
])
def test_bad_programs_are_rejected(cmds, mem, match):
    with pytest.raises(TpcoreError, match=match):
        validate(_prog(cmds, mem))


@pytest.mark.parametrize("src, match", [
    ("subleq x, y", "unknown memory cell 'x'"),
    (".data\nx = 1\n.code\njmp nowhere", "unknown jump target 'nowhere'"),
    ("frob 1, 2", "unknown instruction 'frob'"),
    (".data\nx = 1\nx = 2", "defined twice"),
    (".data\nx = 1000\n.code\nhalt", "initial value 1000"),
    (".data\nx = " + "1" * 40 + "\n.code\nhalt",  # once an OverflowError
     r"line 2: value 11111111111111111111\.\.\. of 'x' does not fit a machine word"),
    ("subleq " + "9" * 30 + ", 1", "does not fit a machine word"),
])
def test_assembler_errors_name_the_line(src, match):
    with pytest.raises(TpcoreError, match=match):
        assemble(src, N=8)


def test_errors_name_the_cell_and_the_label():
    named = SubleqProgram(np.array([[3, 4, 6], [1, 2, 6]]), np.array([0, -1, 40, 2]), s=1, N=6,
                          names={"x": 3}, labels={"loop": 5})
    with pytest.raises(TpcoreError, match=r"initial value 40 of cell 'x' \(column 3\)"):
        validate(named)
    jumps = SubleqProgram(np.array([[3, 4, 9], [1, 2, 6]]), np.array([0, -1, 1, 2]), s=1, N=6,
                          labels={"loop": 5})
    with pytest.raises(TpcoreError, match=r"instruction 0 'loop' \(column 5\): jump target"):
        validate(jumps)


def test_assembler_pseudo_instructions():
    p = assemble(""".data
a = 5
b = -3
c = 9
.code
add a, b       ; b = 2
mov b, c       ; c = 2
subleq 7, a    ; a = -2
""", N=6)
    mem = interpret(p).mems[-1]
    assert (mem[p.cell("a")], mem[p.cell("b")], mem[p.cell("c")]) == (-2, 2, 2)


@pytest.mark.parametrize("start", range(0, 4))
def test_minsky_jzdec_translation(start):
    """Appendix C's sub(a, n) with operands in Algorithm 2's order: jump iff a == 0, else
    decrement; constants survive."""
    code = [("jzdec", "a", 2), ("inc", "hit_nonzero"), ("inc", "done")]
    p = assemble(minsky(code, {"a": start, "hit_nonzero": 0, "done": 0}), N=6)
    mem = interpret(p).mems[-1]
    assert mem[p.cell("a")] == max(start - 1, 0)
    assert mem[p.cell("hit_nonzero")] == (start > 0)
    assert (mem[p.cell("c0")], mem[p.cell("c1")], mem[p.cell("cm1")]) == (0, 1, -1)


def test_csv_roundtrip(tmp_path):
    p = assemble(".data\nx = 3\n.code\nl: subleq 1, x, done\njmp l\ndone: halt", N=6, s=2)
    (tmp_path / "cmd.csv").write_text("a,b,c\n" + "\n".join(
        ",".join(str(v) for v in row) for row in p.commands) + "\n")
    (tmp_path / "mem.csv").write_text("mem\n" + "\n".join(str(v) for v in p.memory) + "\n")
    q = load_csv(tmp_path / "cmd.csv", tmp_path / "mem.csv", s=2, N=6)
    np.testing.assert_array_equal(q.commands, p.commands)
    assert interpret(q).mems[-1][3] == 0
    (tmp_path / "bad.csv").write_text("x,y,z\n1,2,3\n")
    with pytest.raises(TpcoreError, match="expected a,b,c"):
        load_csv(tmp_path / "bad.csv", tmp_path / "mem.csv", s=2, N=6)


def test_a_layout_beyond_the_column_limit_is_refused_before_anything_is_built():
    """22 KB of assembly declaring 11,000 cells ran for over a minute and took 4.9 GB."""
    source = ".data\nxs = " + ",".join(["0"] * 11000) + "\n.code\nhalt\n"
    with pytest.raises(TpcoreError, match="layout of 11006 columns .* expected at most 4096"):
        assemble(source, N=8)

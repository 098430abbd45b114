"""The FLEQ machine: lockstep with the reference interpreter, self-modifying pointers, bad input."""

import numpy as np
import pytest

from tpcore.backend import asarray, to_host
from tpcore.errors import TpcoreError
from tpcore.fleq.assemble import assemble, batch_punchcards
from tpcore.fleq.interpret import interpret, interpret_steps
from tpcore.fleq.program import FleqProgram, Instr
from tpcore.fleq.run import decode_pc, execute, read_cell
from tpcore.fleq.toolkit import toolkit
from tpcore.looped.layer import layer_forward

EXACT = {"add": lambda A, B: A + B, "sub": lambda A, B: A - B, "mul": lambda A, B: A.T @ B,
         "transp": lambda A, B: A.T, "perc": lambda A, B: 0.01 * A}


@pytest.fixture(scope="module")
def tk():
    return toolkit(2, ("add", "sub", "mul", "transp", "perc", "ptr"), c=1e-6, symmetric=True)


def _loop_program(d=2):
    p = FleqProgram(d)
    p.cell("A", [[0.5, 0.25], [0.125, -0.75]])
    p.cell("v", [1.0, -2.0])
    p.cell("w", [0.0, 0.0])
    p.cell("s", 0.0)
    p.cell("q", 1, kind="int")
    p.cell("k", -2, kind="int")
    p.op("mul", "w", "A", "v", label="top")        # w = A^T v
    p.op("transp", "A", "A")                       # A = A^T
    p.op("sub", "v", "w", "v")
    p.op("mul", "s", "v", "v")                     # s = |v|^2
    p.op("perc", "s", "s")
    p.op("add", "k", "k", "q", flag="k", goto="top")
    p.halt()
    return p


def test_machine_matches_interpreter(tk):
    comp = assemble(_loop_program(), tk)
    run = execute(comp, max_steps=50)
    ref, steps = interpret(comp, EXACT)
    assert run.steps == steps == 18
    for name in ("A", "v", "w", "s", "k"):
        np.testing.assert_allclose(read_cell(comp, run.X, name), ref[name], rtol=1e-8,
                                   atol=1e-9)


def test_lockstep_every_step(tk):
    comp = assemble(_loop_program(), tk)
    m = comp.machine
    X = asarray(comp.X0)
    layers = m.layer_objects()
    mem = slice(m.s, m.s + m.m)
    for pc, data in interpret_steps(comp, EXACT):
        for lay in layers:
            X, _ = layer_forward(X, lay)
        assert decode_pc(m, X) == pc
        np.testing.assert_allclose(to_host(X[m.rows["data"]][:, mem]), data[:, mem], atol=1e-8)


def test_halt_is_a_fixed_point(tk):
    comp = assemble(_loop_program(), tk)
    run = execute(comp, max_steps=50)
    X = run.X
    for lay in comp.machine.layer_objects():
        X, _ = layer_forward(X, lay)
    assert decode_pc(comp.machine, X) == comp.halt
    np.testing.assert_allclose(to_host(X), to_host(run.X), atol=1e-9)


def test_batched_programs_run_together(tk):
    comp = assemble(_loop_program(), tk)
    vs = np.array([[[1.0], [2.0]], [[-1.0], [0.5]], [[3.0], [0.0]]])
    X = batch_punchcards(comp, {"v": vs})
    run = execute(comp, X, max_steps=50)
    for i, v in enumerate(vs):
        p = _loop_program()
        p.cells["v"].value = v
        ref, _ = interpret(assemble(p, tk), EXACT)
        np.testing.assert_allclose(read_cell(comp, run.X[i], "w"), ref["w"], rtol=1e-8,
                                   atol=1e-8)


def test_self_modifying_pointer_walks_memory(tk):
    p = FleqProgram(2)
    for i in range(3):
        p.cell(f"x{i}", float(i + 1))
    p.cell("acc", 0.0)
    p.cell("q", 1, kind="int")
    p.cell("j", -2, kind="int")
    p.code_cell("step", a=1, b=0, c=0)
    p.op("add", "acc", "acc", "x0", label="body")
    p.op("ptr", "body", "body", "step")
    p.op("add", "j", "j", "q", flag="j", goto="body")
    p.halt()
    p.instrs[0] = Instr("add", "acc", "x0", "acc", "_one", None, "body")
    comp = assemble(p, tk)
    run = execute(comp, max_steps=30)
    ref, steps = interpret(comp, EXACT)
    assert ref["acc"][0, 0] == 6.0 and run.steps == steps
    np.testing.assert_allclose(read_cell(comp, run.X, "acc"), [[6.0]], atol=1e-9)


def test_layer_count_beats_theorem2(tk):
    st = assemble(_loop_program(), tk).machine.stats()
    assert st["layers"] == 6 + 2 < st["theorem2_layers"] == 9 + 2


def test_rejects_bad_programs(tk):
    p = _loop_program()
    p.op("div", "s", "s", "s")
    p.instrs[-1], p.instrs[-2] = p.instrs[-2], p.instrs[-1]
    with pytest.raises(TpcoreError, match=r"instruction 6 \(div.*not one of the machine's M = 6"):
        assemble(p, tk)
    p = _loop_program()
    p.instrs[1].f = 7
    with pytest.raises(TpcoreError, match=r"instruction 1 .*function index 7 is beyond .*M = 6"):
        assemble(p, tk)
    p = _loop_program()
    p.instrs[1].f = 3                               # index of "transp": accepted
    assemble(p, tk)
    p = _loop_program()
    p.instrs[0].flag = "s"
    with pytest.raises(TpcoreError, match="instruction 0 .*flag cell 's' is not an integer"):
        assemble(p, tk)
    p = _loop_program()
    p.instrs[2].b = "s"
    with pytest.raises(TpcoreError, match="instruction 2 .*shapes"):
        assemble(p, tk)
    with pytest.raises(TpcoreError, match="at most d x d"):
        FleqProgram(2).cell("big", np.ones((3, 1)))
    p = _loop_program()
    p.cells["q"].value = np.array([[0.5]])
    p.cells["q"].kind = "real"
    with pytest.raises(TpcoreError, match="instruction 5 .*integer cell 'k'"):
        assemble(p, tk)
    with pytest.raises(TpcoreError, match="declared int"):
        FleqProgram(2).cell("f", 0.5, kind="int")


def test_step_limit_names_the_pc(tk):
    comp = assemble(_loop_program(), tk)
    with pytest.raises(TpcoreError, match="step limit 3 at PC"):
        execute(comp, max_steps=3)


def test_views_address_parts_of_cells():
    p = FleqProgram(2)
    p.cell("r", [[1.0, 2.0]])
    p.view("r1", "r", col=1)
    with pytest.raises(TpcoreError, match="exceeds cell 'r'"):
        p.view("r2", "r", col=2)
    p.op("add", "r1", "r1", "r1")
    p.halt()
    tk = toolkit(2, ("add",))
    comp = assemble(p, tk)
    run = execute(comp, max_steps=5)
    np.testing.assert_allclose(read_cell(comp, run.X, "r"), [[1.0, 4.0]], atol=1e-9)

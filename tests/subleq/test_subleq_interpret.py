"""numba SUBLEQ kernel against its NumPy reference and the plain interpreter."""

import numpy as np
import pytest
from tpcore.kernels.subleq import run_batch

from tpcore.errors import TpcoreError
from tpcore.subleq.examples import EXAMPLES, example
from tpcore.subleq.interpret import interpret, interpret_batch, run_batch_reference, step

pytestmark = pytest.mark.host_only("the SUBLEQ reference interpreter on host integers")


def test_kernel_matches_reference_on_random_programs(random_program):
    rng = np.random.default_rng(0)
    progs = [random_program(rng, m=7, k=9, N=5) for _ in range(64)]
    cmds = np.stack([p.commands for p in progs])
    mem = np.stack([p.memory for p in progs])
    for max_steps in (0, 1, 7, 50):
        got = run_batch(cmds, mem, 1, 5, max_steps)
        ref = run_batch_reference(cmds, mem, 1, 5, max_steps)
        for g, r in zip(got, ref):
            np.testing.assert_array_equal(g, r)
    # and the reference agrees with stepping the plain interpreter
    mem_ref, pcs, steps = run_batch_reference(cmds, mem, 1, 5, 50)
    for i, p in enumerate(progs):
        m, pc = p.memory.copy(), p.layout.first_instruction
        for _ in range(int(steps[i])):
            pc = step(p, m, pc)
        np.testing.assert_array_equal(m, mem_ref[i])
        assert pc == pcs[i]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_batch_interpreter_matches_interpret(name):
    p = example(name)
    mem, steps = interpret_batch([p, p])
    t = interpret(p)
    np.testing.assert_array_equal(mem[1], t.mems[-1])
    assert steps[0] == t.steps


def test_step_limit_is_reported():
    p = example("multiply")
    with pytest.raises(TpcoreError, match="step limit 3 .* last PC"):
        interpret_batch([p], max_steps=3)
    with pytest.raises(TpcoreError, match="step limit 3"):
        interpret(p, max_steps=3)

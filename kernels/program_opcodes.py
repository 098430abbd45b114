"""Opcodes of a compiled program IR: the module kinds that
:func:`tpcore.programs.interpret.compile_program` writes into the first column of ``ops`` and
the numba kernel :mod:`tpcore.kernels.programs` dispatches on. Each IR module kind names its
own (:attr:`tpcore.programs.ir.Head.opcode` and the others). Plain integers, no numba, so the
IR can import them without loading it."""

CAT_HEAD = 0
"""A categorical head: select_closest by the head's rule, then aggregate (copy the value)."""
NUM_HEAD = 1
"""A numerical head: select, then aggregate_sum of a numerical value."""
MLP = 2
"""A lookup table over one or two inputs."""
PREFIX_COUNT = 3
"""The count of one token strictly before each position."""
EXPERT_COUNT = 4
"""The expert gate: one counting expert per sequence."""
RUNNING_COUNT = 5
"""The count of each position's own token up to and including it."""

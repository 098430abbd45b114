"""SUBLEQ on the looped transformer (Giannou et al. 2023, Sec. 4-5), built on the shared Eq. 1
layer of :mod:`tpcore.looped`.

``program`` (programs as punchcard columns, validation, the authors' CSVs), ``asm`` and
``examples`` (writing programs), ``interpret`` (the reference step and interpreter, and the batched
kernel's wrapper), ``layout`` (the punchcard's rows and columns), ``blocks`` (one weight generator
per step of an instruction), ``machine`` (build, punchcard, run to the EOF fixed point, decode),
``lockstep`` (a program on the transformer and the interpreter side by side).

``tpcore.subleq.run("factorial")`` runs an example (or an assembler file, or a program) both
ways and says whether they agree after every instruction; ``tpcore looped run`` prints it.
"""

from tpcore.subleq.asm import assemble
from tpcore.subleq.examples import EXAMPLES, example
from tpcore.subleq.interpret import interpret
from tpcore.subleq.lockstep import LockstepRun, load, run
from tpcore.subleq.program import SubleqProgram

__all__ = ["EXAMPLES", "LockstepRun", "SubleqProgram", "assemble", "example", "interpret",
           "load", "run"]

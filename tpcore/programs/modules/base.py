"""What every module kind shares: the batch its reference evaluation reads, the row it adds to
the numba kernel's ``ops`` table, and the check of its output variable's kind. Host-only code
(NumPy) but for :class:`Batch`'s arrays."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tpcore.programs.values import Variable, fail


@dataclass(frozen=True)
class Batch:
    """What a module's reference evaluation reads besides the variables before it: ``lengths
    (B,)``, the key mask ``(B, N, N)`` (:func:`tpcore.programs.interpret.key_mask`) and the
    program's variables."""

    lengths: Any
    mask: Any
    variables: dict[str, Variable]


@dataclass(frozen=True)
class KernelOp:
    """A module's part of the compiled program (:func:`tpcore.programs.interpret.
    compile_program`): the fields ``a, b, c, stride, flag`` of its ``ops`` row ``(opcode, a, b,
    c, out, param_offset, stride, flag)``, whose other fields ``compile_program`` fills in, its
    integer ``params`` (at ``param_offset`` of ``params``) and its float64 ``fparams``
    (appended to ``fparams``). Unused operands are ``-1``."""

    a: int = -1
    b: int = -1
    c: int = -1
    stride: int = 0
    flag: int = 0
    params: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    fparams: np.ndarray = field(default_factory=lambda: np.zeros(0))


def check_output(name: str, output: Variable, categorical: bool) -> None:
    """Raise unless module ``name``'s ``output`` variable is categorical (``categorical``) or
    numerical."""
    if categorical and output.kind != "categorical":
        fail(name, "output must be categorical")
    if not categorical and output.kind != "numerical":
        fail(name, "numerical head output must be numerical")

"""The ``M`` function blocks of a FLEQ machine: index ``m`` of an instruction selects block
``m``. Host-only code (NumPy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tpcore.errors import TpcoreError
from tpcore.fleq.blocks import (
    DEFAULT_GATE,
    FunctionBlock,
    check_gate,
    combine_block,
    diag_block,
    matmul_block,
    pointer_block,
    sigmoid_block,
    transpose_block,
)
from tpcore.fleq.fits import SigmoidFit


@dataclass
class Toolkit:
    """The ``M`` function blocks of a machine (index ``m`` = position), built for cells of
    ``d x d`` on ``s`` scratchpad columns with gating constant ``gate``."""

    d: int
    s: int
    blocks: list[FunctionBlock]
    gate: float = DEFAULT_GATE

    @property
    def names(self) -> list[str]:
        return [b.name for b in self.blocks]


def toolkit(d: int, names: tuple[str, ...] = ("add", "sub", "mul", "transp", "perc"),
            c: float = 1e-8, C: float = 30.0, lam: float = 30.0,
            fits: dict[str, list[SigmoidFit]] | None = None, s: int | None = None,
            symmetric: bool = False, gate: float = DEFAULT_GATE) -> Toolkit:
    """Standard blocks: ``add sub perc`` (combine), ``mul`` (Lemma 7 with ``c, C``; two heads
    ``+-c`` if ``symmetric``), ``diag``, ``transp`` (Lemma 6), ``ptr`` (pointer arithmetic on
    code cells) and one sigmoid block per entry of ``fits`` (Lemma 5), gated with ``gate``.
    ``s`` defaults to the smallest scratchpad all blocks accept."""
    gate = check_gate(gate)
    fits = fits or {}
    need = 3 * d + (d * d if "transp" in names else 0)
    s = need if s is None else s
    makers: dict[str, Callable[[], FunctionBlock]] = {
        "add": lambda: combine_block(d, s, 1.0, 1.0, lam, "add", gate),
        "sub": lambda: combine_block(d, s, 1.0, -1.0, lam, "sub", gate),
        "perc": lambda: combine_block(d, s, 0.01, 0.0, lam, "perc", gate),
        "mul": lambda: matmul_block(d, s, c, C, lam, "mul", symmetric),
        "transp": lambda: transpose_block(d, s, lam, "transp", gate),
        "diag": lambda: diag_block(d, s, lam, "diag", gate),
    }
    blocks = []
    for nm in names:
        if nm in fits:
            blocks.append(sigmoid_block(d, s, fits[nm], lam, nm, gate))
        elif nm == "ptr":
            blocks.append(pointer_block(d, s, 1, 1, lam, gate=gate))
        elif nm in makers:
            blocks.append(makers[nm]())
        else:
            raise TpcoreError(f"unknown function {nm!r}; expected one of "
                              f"{sorted(makers) + ['ptr'] + sorted(fits)}")
    return Toolkit(d, s, blocks, gate)

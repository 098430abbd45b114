"""Stream extensions: modules that append numerical variables computed from the tokens alone
(:class:`StreamExtension`; the counting modules of :mod:`tpcore.models.counting` are some)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tpcore.backend import Array
from tpcore.errors import TpcoreError
from tpcore.nn.module import Module
from tpcore.programs import ir


class StreamExtension(Module):
    """A module that appends numerical variables computed from the tokens alone (e.g. counts).

    ``name``: its module name; ``outputs``: the names of the numerical variables it appends;
    ``after``: where they enter the stream (``-1``: with the inputs, before layer 0; ``l``: after
    layer ``l``'s MLPs, so layers ``l + 1 ..`` and the classifier can read them). Subclasses
    implement ``forward(tokens, pad, noise, tau) -> (values (q, B, N), cache)`` (``noise(shape)``
    draws Gumbel noise or returns None; ``tau=None``: discrete mode) and
    ``backward(dvalues (q, B, N), cache)`` accumulating their own parameters' gradients.
    """

    name: str = "extension"
    outputs: tuple[str, ...] = ()
    after: int = -1

    def forward(self, tokens: Array, pad: Array | None, noise: Any, tau: float | None
                ) -> tuple[Array, Any]:
        raise NotImplementedError

    def backward(self, dvalues: Array, cache: Any) -> None:
        raise NotImplementedError

    def program_modules(self, vocab: Sequence[str]) -> list[ir.ProgramModule]:
        """The program IR modules that compute ``outputs`` in the discrete mode (one per output,
        host copies of any parameters), token ids named by ``vocab``."""
        raise TpcoreError(f"variable {self.outputs[0]!r} comes from module {self.name!r}, which "
                          "the program IR cannot express yet")

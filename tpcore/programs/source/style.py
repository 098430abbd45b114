"""What a program file format adds to the sections every program has, as the writer asks for
it: one :class:`Style` per format (:data:`tpcore.programs.source.tpcore_style.TPCORE`,
:data:`tpcore.programs.source.published_style.PUBLISHED`). A file is laid out as

    header (docstring, imports, constants)       Style.header
    helper functions                             Style.helpers, then Style.library
    def run(tokens):
        inputs                                   Style.inputs
        constants, one section per module        (sections; Style.scores after each variable)
        the classifier, predictions              Style.classify
        BOS/EOS pass-through, return             Style.returns
    trailer                                      Style.trailer

and its classifier goes to a weights CSV beside it (:meth:`Style.weights`). The reading of each
format sits beside its writing, in the format's module, as functions of the reader. Host-only
code (standard library).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from tpcore.programs.compress import Plan
from tpcore.programs.ir import Head, Program


class Style(ABC):
    """One program file format, as the writer sees it."""

    def __init__(self, name: str, *, prunes: bool, fits_rules: bool, returns: str):
        self.name = name
        """What ``style=`` calls it."""
        self.prunes = prunes
        """Whether a compressed program leaves out the modules no prediction depends on and
        writes the variables of one value as literals."""
        self.fits_rules = fits_rules
        """Whether a compressed program may write MLPs as rules and tests on one argument."""
        self.returns = returns
        """The last line of ``run``."""

    @abstractmethod
    def helpers(self, program: Program) -> dict[str, tuple[str, str]]:
        """``{function name: (source, rule)}``: the library functions the program may call
        (rule ``""`` for those that are not ``select_closest``). Refuses a program the format
        cannot write."""

    def scores(self, program: Program, var: str) -> list[str]:
        """Lines that follow the definition of variable ``var`` in ``run`` (none by default)."""
        return []

    @abstractmethod
    def inputs(self, program: Program, weights_file: str) -> list[str]:
        """The first lines of ``run``, up to and including the inputs ``positions`` and
        ``ones``."""

    @abstractmethod
    def classify(self, program: Program, features: tuple[str, ...]) -> list[str]:
        """The lines of ``run`` that compute ``predictions`` from the classifier's
        ``features``."""

    @abstractmethod
    def header(self, program: Program, weights_file: str, extra: dict[str, str]) -> list[str]:
        """The lines before the helper functions; ``extra``: the additional helpers written
        (name -> text)."""

    def library(self) -> list[str]:
        """Helper texts written after the program's helpers (none by default)."""
        return []

    @abstractmethod
    def trailer(self, program: Program) -> list[str]:
        """The lines after ``run``."""

    @abstractmethod
    def weights(self, program: Program, pruned: Plan | None) -> str:
        """The weights CSV text; ``pruned``: the plan whose features and values the source
        follows, when modules were left out."""


def head_rules(program: Program) -> tuple[str, ...]:
    """The ``select_closest`` rules of the program's categorical heads, sorted."""
    return tuple(sorted({m.rule for m in program.modules
                         if isinstance(m, Head) and m.kind == "categorical"}))


def example_tokens(program: Program) -> list[str]:
    """Up to four content tokens (no BOS, EOS or padding): the example input of a file."""
    specials = {program.bos, program.eos, program.pad}
    return [t for t in map(str, program.tokens.values) if t not in specials][:4]

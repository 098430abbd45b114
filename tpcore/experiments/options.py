"""The command-line face of a reproduction, declared beside its ``run``.

Each module ``tpcore.experiments.NAME`` that ``tpcore reproduce NAME`` runs holds a
:class:`Reproduction`, ``CLI``: its help line, the default of ``--budget`` and what the presets
mean, the default ``--out`` folder, and its own :class:`Option` s. ``tpcore reproduce``
(:mod:`tpcore.commands.reproduce`) turns them into ``argparse`` arguments and passes each
option to ``run`` as the keyword argument of its ``dest``; ``--budget``, ``--seed`` and
``--out`` are every reproduction's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OPTION_KINDS = ("text", "count", "index", "scale", "probability", "counts", "names", "cell",
                "switch", "off")
"""What an option's values must be: ``text`` any string, ``count`` an integer >= 1, ``index``
an integer >= 0, ``scale`` a finite number > 0, ``probability`` a number in [0, 1), ``counts``
comma-separated counts, ``names`` comma-separated names, ``cell`` ``TASK:REGIME``; ``switch``
takes no value and gives True when present, ``off`` False."""


@dataclass(frozen=True)
class Option:
    """One option: ``flag`` (``--epochs``), its ``help``, the ``kind`` of its values
    (:data:`OPTION_KINDS`), and as ``argparse`` reads them ``default``, ``nargs``, ``metavar``,
    ``required`` and ``dest`` (default: the flag's name with ``-`` read as ``_``)."""

    flag: str
    help: str
    kind: str = "text"
    default: Any = None
    nargs: int | str | None = None
    metavar: str | tuple[str, ...] | None = None
    required: bool = False
    dest: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in OPTION_KINDS:
            raise ValueError(f"option {self.flag}: kind {self.kind!r}; expected one of "
                             f"{OPTION_KINDS}")


@dataclass(frozen=True)
class Reproduction:
    """``title``: the help line of ``tpcore reproduce NAME``; ``budget``: the default
    ``--budget`` (a preset name of the module's ``BUDGETS``, or a number for the studies whose
    budget scales their sizes) and ``budget_help``, what the budgets mean; ``out``: the default
    ``--out``; ``options``: the study's own."""

    title: str
    out: str
    budget: str | float
    budget_help: str
    options: tuple[Option, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """The keyword arguments the options pass to ``run``."""
        return tuple(o.dest or o.flag.lstrip("-").replace("-", "_") for o in self.options)


EPOCHS = Option("--epochs", "override the budget's epochs", "count")
OVERWRITE = Option("--overwrite", "retrain runs in --out made with other settings", "switch")

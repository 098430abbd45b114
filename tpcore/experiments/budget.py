"""How much a reproduction spends: a :class:`Budget`, a named preset of the sizes it fixes.

Every reproduction ``tpcore reproduce NAME`` is the module ``tpcore.experiments.NAME`` (the
name's ``-`` read as ``_``) with one entry point of one shape::

    run(budget: Budget, out: Path, seed: int, **options) -> dict

It writes a JSON of its results and a Markdown table into ``out``, reuses what a previous
run of the same settings finished there (so a rerun resumes), and returns the JSON's content;
``options`` are the study's own settings (keyword arguments named as its command-line options,
None for "the budget's"). Beside it the module has

- ``budget(text: str) -> Budget``: the ``--budget`` of the command line, a preset name of the
  module's ``BUDGETS`` (:func:`preset`) or, for the studies whose budget scales their sizes, a
  positive number (:func:`scaled`); a bad budget raises a :class:`TpcoreError`;
- ``report(result: dict, out: Path) -> str``: what ``tpcore reproduce NAME`` prints;
- ``CLI``: its command-line face, the help line, the default budget and ``--out`` and its own
  options (:class:`tpcore.experiments.options.Reproduction`);
- optionally ``figures(result: dict, out: Path) -> list[Path]``: its PNG figures drawn from the
  JSON's content alone, which ``run`` writes beside its tables when matplotlib is installed
  (:func:`tpcore.analysis.plots.draw_or_note`) and ``tpcore plot NAME RESULTS.json`` redraws.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tpcore.errors import TpcoreError, unknown_name


@dataclass(frozen=True)
class Budget:
    """``name`` (as the command line gives it) and the ``sizes`` it fixes: steps, samples,
    seeds, widths..., each study its own keys (``budget["steps"]``)."""

    name: str
    sizes: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.sizes[key]


def preset(name: str, presets: Mapping[str, Budget]) -> Budget:
    """The preset called ``name``; an unknown name raises a :class:`TpcoreError` listing the
    known ones."""
    if name not in presets:
        raise unknown_name("budget", name, presets)
    return presets[name]


def scaled(factor: float | str) -> Budget:
    """A budget that multiplies a study's sizes by ``factor`` (a finite number > 0), named as
    the number reads back, ``1.0`` for 1."""
    try:
        value = float(factor)
    except ValueError:
        raise TpcoreError(f"budget {factor!r} is invalid; expected a finite number > 0") \
            from None
    if not (math.isfinite(value) and value > 0):
        raise TpcoreError(f"budget {factor!r} is invalid; expected a finite number > 0")
    return Budget(str(value), {"scale": value})

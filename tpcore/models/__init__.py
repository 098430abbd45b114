"""Models built from the explicit-gradient blocks of ``tpcore.nn``, and :func:`load`, which
rebuilds any of them from the files :func:`tpcore.nn.module.save` writes."""

from __future__ import annotations

from pathlib import Path

from tpcore.models.counting import CountingProgramModel
from tpcore.models.program import ProgramModel
from tpcore.models.transformer import Transformer
from tpcore.nn import module

MODELS: dict[str, type[module.Module]] = {
    cls.__name__: cls for cls in (Transformer, ProgramModel, CountingProgramModel)}
"""The model classes :func:`load` rebuilds, by the class name a saved ``.json`` records."""


def load(path: str | Path) -> module.Module:
    """The model saved at ``path`` by :func:`tpcore.nn.module.save`, rebuilt on the active
    backend (:func:`tpcore.nn.module.load` with :data:`MODELS`)."""
    return module.load(path, MODELS)

"""Error types, and the messages for an unknown name or a missing optional package. Every error
type is a ``ValueError`` so callers can catch bad input uniformly; the CLI prints the message as
one line and exits 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class TpcoreError(ValueError):
    """Bad input: the message names the offending value and what was expected."""


class BackendError(TpcoreError):
    """The requested array backend cannot run here; the message says why."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or inf; the message names the step and the last finite loss."""


INSTALL = {"matplotlib": "pip install 'tpcore[plot]'", "cupy": "pip install 'tpcore[gpu]'",
           "dask": "pip install 'tpcore[dask]'", "distributed": "pip install 'tpcore[dask]'",
           "numba": "pip install numba", "scipy": "pip install scipy", "tqdm": "pip install tqdm",
           "torch": "pip install torch"}
"""How to install each optional package tpcore imports (its extra where it has one)."""


def unknown_name(what: str, name: str, known: Iterable[str]) -> TpcoreError:
    """``unknown task 'srot'; did you mean 'sort'? expected one of ...``."""
    known = list(known)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ";"
    return TpcoreError(f"unknown {what} {name!r}{hint} expected one of {', '.join(known)}")


def missing_package(module: str, needed_for: str) -> TpcoreError:
    """``matplotlib is needed for --plots: pip install 'tpcore[plot]'``."""
    root = module.split(".")[0]
    return TpcoreError(f"{root} is needed for {needed_for}: "
                       f"{INSTALL.get(root, f'pip install {root}')}")

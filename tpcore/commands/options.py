"""Argument types shared by the commands: counts are positive, seeds non-negative, floats finite.
A value outside its type fails at parse time as ``argument --lr: expected a finite number > 0,
got 'nan'``."""

from __future__ import annotations

import argparse
import importlib
import math
import sys

from tpcore.errors import missing_package


def _int(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (a count)."""
    return _int(text, 1, "an integer >= 1")


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (a seed, a level, a count that may be zero)."""
    return _int(text, 0, "an integer >= 0")


def positive_ints(text: str) -> tuple[int, ...]:
    """Comma-separated integers >= 1, at least one."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers >= 1, got {text!r}")
    try:
        return tuple(_int(t, 1, "") for t in items)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers >= 1, got "
                                         f"{text!r}") from None


def _float(text: str, positive: bool) -> float:
    what = "a finite number > 0" if positive else "a finite number >= 0"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (a learning rate, a budget scale, an inverse temperature)."""
    return _float(text, positive=True)


def nonnegative_float(text: str) -> float:
    """A finite number >= 0 (a tolerance, a spread)."""
    return _float(text, positive=False)


def probability(text: str) -> float:
    """A number in [0, 1) (a dropout probability)."""
    try:
        value = _float(text, positive=False)
    except argparse.ArgumentTypeError:
        value = math.nan
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a probability in [0, 1), got {text!r}")
    return value


def has_module(name: str) -> bool:
    """Whether ``name`` imports (an optional package such as numba or matplotlib)."""
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def need_package(name: str, needed_for: str) -> None:
    """Refuse, before any work, what needs the optional package ``name`` when it is not
    installed: ``matplotlib is needed for --plots: pip install 'tpcore[plot]'``."""
    if not has_module(name):
        raise missing_package(name, needed_for)


def engine_or_numpy(engine: str) -> str:
    """``engine``, or ``"numpy"`` with a note on stderr when it is ``"numba"`` and numba is not
    installed."""
    if engine == "numba" and not has_module("numba"):
        print("tpcore: note: numba is not installed, so the NumPy engine runs (pip install numba "
              "for the kernel)", file=sys.stderr)
        return "numpy"
    return engine

"""Shared helpers for the program tests (as fixtures: tests import no modules from here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tpcore.programs.ir import Program


def _load_generated(path: Path) -> ModuleType:
    """Import a program file tpcore generated itself (trusted: written by the test)."""
    spec = importlib.util.spec_from_file_location(f"generated_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _as_labels(program: Program, pred: np.ndarray, lengths: np.ndarray) -> list[list[str]]:
    labels = program.output_labels()
    return [[labels[int(x)] for x in row[:n]] for row, n in zip(pred, lengths)]


def _as_tokens(program: Program, ids: np.ndarray, lengths: np.ndarray) -> list[list[str]]:
    vocab = program.tokens.values
    return [[vocab[int(x)] for x in row[:n]] for row, n in zip(ids, lengths)]


@pytest.fixture
def load_generated():
    return _load_generated


@pytest.fixture
def as_labels():
    return _as_labels


@pytest.fixture
def as_tokens():
    return _as_tokens

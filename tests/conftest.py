"""Shared fixtures; BLAS pinned to one thread (the models here are small: threads only contend).
The program fixtures (generated programs and label conversion) are helpers as fixtures: tests
import no modules from here.

On a device backend (``TPCORE_BACKEND=cupy``, or ``numpy-strict``: the device-strict backend of
:mod:`tpcore.strict`) the tests marked ``host_only(reason)`` are skipped with their reason; every
other test runs on device arrays."""

import importlib.util
import os
from pathlib import Path
from types import ModuleType

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TPCORE_THREADS"):
    os.environ.setdefault(_var, "1")

# NumPy after the thread settings, which BLAS reads when it loads
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tpcore.backend import backend_name, set_backend  # noqa: E402
from tpcore.programs.ir import Program  # noqa: E402

SESSION_BACKEND = backend_name()
"""The backend the suite runs on (``TPCORE_BACKEND``)."""


@pytest.fixture(autouse=True)
def _session_backend():
    """Every test starts on the session's backend, whatever the one before switched to (a test
    of ``--backend``, a command run in this process)."""
    if backend_name() != SESSION_BACKEND:
        set_backend(SESSION_BACKEND)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def pytest_collection_modifyitems(config, items):
    """Every ``host_only`` mark names its reason; on a device backend those tests skip."""
    device = SESSION_BACKEND != "numpy"
    for item in items:
        mark = item.get_closest_marker("host_only")
        if mark is None:
            continue
        reason = mark.args[0] if mark.args else mark.kwargs.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise pytest.UsageError(f"{item.nodeid}: host_only needs a reason")
        if device:
            item.add_marker(pytest.mark.skip(reason=f"host only: {reason}"))


def pytest_collection_finish(session):
    """No tests collected is a failure, never a silent pass."""
    if not session.items and not session.config.option.collectonly:
        raise pytest.UsageError("no tests were collected")


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

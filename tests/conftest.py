"""Shared fixtures; BLAS pinned to one thread (the models here are small: threads only contend)."""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

# NumPy after the thread settings, which BLAS reads when it loads
import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def pytest_collection_finish(session):
    """No tests collected is a failure, never a silent pass."""
    if not session.items and not session.config.option.collectonly:
        raise pytest.UsageError("no tests were collected")

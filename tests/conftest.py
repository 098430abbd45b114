"""Shared fixtures: a seeded generator and float64 helpers for gradchecks."""

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def pytest_collection_finish(session):
    """No tests collected is a failure, never a silent pass."""
    if not session.items and not session.config.option.collectonly:
        raise pytest.UsageError("no tests were collected")

"""One BLAS thread for the FLEQ tests: their many small matrix products slow down by an order
of magnitude when OpenBLAS threads compete on a loaded machine. Restored afterwards."""

import ctypes
import glob
import os

import numpy as np
import pytest


def _openblas():
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs",
                                  "*openblas*"))
    for path in libs:
        lib = ctypes.CDLL(path)
        for prefix in ("scipy_openblas", "openblas"):
            get = getattr(lib, f"{prefix}_get_num_threads64_", None) or getattr(
                lib, f"{prefix}_get_num_threads", None)
            put = getattr(lib, f"{prefix}_set_num_threads64_", None) or getattr(
                lib, f"{prefix}_set_num_threads", None)
            if get is not None and put is not None:
                return get, put
    return None


@pytest.fixture(scope="package", autouse=True)
def one_blas_thread():
    fns = _openblas()
    if fns is None:
        yield
        return
    get, put = fns
    before = get()
    put(1)
    yield
    put(before)

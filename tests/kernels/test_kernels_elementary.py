"""The float32 elementary functions of ``tpcore.kernels.elementary`` (``exp``, ``log``,
``tanh``) against NumPy's, in ulps."""

import numpy as np
import pytest

pytestmark = pytest.mark.host_only("numba kernels run on host NumPy arrays")


def test_elementary_float32_functions_match_numpy():
    numba = pytest.importorskip("numba")
    from tpcore.kernels.elementary import exp, log, tanh

    def apply(fn):
        @numba.njit
        def run(x, out):
            for i in range(x.shape[0]):
                out[i] = fn(x[i])
        return run

    rng = np.random.default_rng(0)
    cases = [(exp, np.exp, rng.uniform(-87, 88, 100_000)),
             (log, np.log, np.exp(rng.uniform(-80, 80, 100_000))),
             (tanh, np.tanh, rng.uniform(-12, 12, 100_000))]
    for fn, ref, x in cases:
        x32 = x.astype(np.float32)
        out = np.empty_like(x32)
        apply(fn)(x32, out)
        exact = ref(x32.astype(np.float64))
        ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
        assert np.max(np.abs(out - exact) / np.maximum(ulp, 1e-45)) <= 4, fn.__name__

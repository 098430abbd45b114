"""The vectorised transpose of §8: one layer, one pointer head, against ``A.T``."""

import numpy as np
import pytest

from tpcore.backend import to_host
from tpcore.errors import TpcoreError
from tpcore.fleq.permute import run_vec_transpose, transpose_sources, vec_transpose_block


def _err(blk, A):
    out = to_host(run_vec_transpose(blk, A))
    return np.abs(out - np.swapaxes(A, -1, -2)).max() / np.abs(A).max()


def test_transpose_30_is_one_layer_one_head_of_width_24(rng):
    blk = vec_transpose_block(30, lam=20.0)
    assert (blk.n_layers, blk.n_heads) == (1, 1)
    assert blk.params["L"] == 10 and blk.s == 900
    assert blk.width == 2 * 10 + 4                         # in, out, one, scr + two 10-bit codes
    assert blk.layers[0].n_units == 0                      # no feed-forward units
    A = rng.uniform(-1, 1, size=(3, 30, 30))
    assert _err(blk, A) < 1e-14                            # bound 2 ((1 + e^-40)^10 - 1) = 8e-17


def test_tiny_lambda_does_not_transpose(rng):
    A = rng.uniform(-1, 1, size=(30, 30))
    assert _err(vec_transpose_block(30, lam=0.5), A) > 0.1


@pytest.mark.parametrize("lam", [3.0, 5.0, 8.0])
def test_error_within_the_softmax_bound(rng, lam):
    A = rng.uniform(-1, 1, size=(2, 30, 30))
    err = _err(vec_transpose_block(30, lam=lam), A)
    assert 0.1 * 10 * np.exp(-2 * lam) < err <= 2 * np.expm1(10 * np.log1p(np.exp(-2 * lam)))


@pytest.mark.parametrize("hard", [False, True])
def test_smaller_matrix_goes_through_the_same_block(rng, hard):
    B = rng.normal(size=(7, 12))
    out = to_host(run_vec_transpose(vec_transpose_block(30), B, hard=hard))
    assert out.shape == (12, 7)
    np.testing.assert_allclose(out, B.T, atol=1e-14)


def test_sources_are_an_involution():
    src = transpose_sources(5)
    assert sorted(src) == list(range(25)) and (src[src] == np.arange(25)).all()
    assert src[1] == 5                                     # vec(A^T)[0*5 + 1] = A[1, 0]


def test_oversized_operand_is_refused():
    with pytest.raises(TpcoreError, match="exceeds"):
        run_vec_transpose(vec_transpose_block(4), np.zeros((5, 4)))

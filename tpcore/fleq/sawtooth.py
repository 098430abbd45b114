"""``x^2`` by a deep ReLU network: the sawtooth construction of Yarotsky (2017), the
fully-connected side of the depth separation in Giannou et al. (2023), §6.3 (after Perekrestenko
et al. 2018: a ReLU network needs depth growing like ``log(1/eps)`` for ``x^2``, while the Lemma 7
attention block computes ``x * x`` in 2 layers).

The tooth ``g(y) = 2 ReLU(y) - 4 ReLU(y - 1/2)`` maps [0, 1] onto [0, 1]; its ``s``-fold composition
``g_s`` is a sawtooth with ``2^(s-1)`` teeth, and

    f_m(y) = y - sum_{s=1..m} g_s(y) / 4^s

is the piecewise-linear interpolant of ``y^2`` at ``y = k / 2^m``, so ``max_[0,1] |f_m(y) - y^2| =
2^(-2m-2)``, attained at the midpoints ``(2k + 1) / 2^(m+1)``. For ``x`` in [-1, 1] the first layer
also folds ``y = |x| = ReLU(x) + ReLU(-x)`` (``g(|x|) = g(x) + g(-x)`` on [-1, 1]), so depth and
error are the same.

Network (``m`` hidden ReLU layers and a linear output, width 4 then 3):

    layer 1:     ReLU(x), ReLU(-x), ReLU(x - 1/2), ReLU(-x - 1/2)
                 -> g_1 = 2 (h_0 + h_1) - 4 (h_2 + h_3),  f_1 = |x| - g_1 / 4
    layer k + 1: ReLU(g_k), ReLU(g_k - 1/2), ReLU(f_k)   (g_k in [0, 1], f_k >= x^2 >= 0)
                 -> g_{k+1} = 2 h_0 - 4 h_1,  f_{k+1} = h_2 - g_{k+1} / 4^(k+1)
    output:      f_m
"""

from __future__ import annotations

import numpy as np

from tpcore.errors import TpcoreError

Net = list[tuple[np.ndarray, np.ndarray]]
"""A ReLU network as its affine maps ``(W: (out, in), b: (out,))``; ReLU after all but the last."""


def sawtooth_square_net(m: int) -> Net:
    """The ``m``-composition network ``f_m ~ x^2`` on [-1, 1] (error ``2^(-2m-2)``): ``m`` hidden
    ReLU layers and a linear output (see the module docstring)."""
    if m < 1:
        raise TpcoreError(f"sawtooth compositions m = {m}; expected m >= 1")
    net: Net = [(np.array([[1.0], [-1.0], [1.0], [-1.0]]), np.array([0.0, 0.0, -0.5, -0.5]))]
    g = np.array([2.0, 2.0, -4.0, -4.0])
    f = np.array([1.0, 1.0, 0.0, 0.0]) - g / 4
    for k in range(2, m + 1):
        net.append((np.vstack([g, g, f]), np.array([0.0, -0.5, 0.0])))
        g = np.array([2.0, -4.0, 0.0])
        f = np.array([0.0, 0.0, 1.0]) - g / 4.0**k
    net.append((f[None, :], np.zeros(1)))
    return net


def relu_forward(net: Net, x: np.ndarray) -> np.ndarray:
    """The scalar network ``net`` on the points ``x: (N,)``; returns ``(N,)`` (host NumPy)."""
    h = np.asarray(x, dtype=np.float64)[None, :]
    for W, b in net[:-1]:
        h = np.maximum(W @ h + b[:, None], 0.0)
    W, b = net[-1]
    return (W @ h + b[:, None])[0]


def hidden_layers(net: Net) -> int:
    """The depth of ``net``: its number of hidden ReLU layers (``m`` for the sawtooth net)."""
    return len(net) - 1

"""Two size claims of Giannou et al. (2023), measured as part of the FLEQ study
(:mod:`tpcore.experiments.fleq`).

* §8: a 30 x 30 matrix given vectorised (``n = 900`` columns) is transposed by 1 layer, 1 head
  with two sets of 10-bit codes (the paper: width 168; Charton 2021's learned transformer: 1 layer,
  8 heads, width 256). :func:`vec_transpose_study` builds the block of
  :mod:`tpcore.fleq.permute`, counts its layers, heads and widths, and measures its relative error
  against ``A.T`` on random 30 x 30 matrices as a function of ``lambda``.
* §6.3: ``x^2`` in essentially 2 layers (the Lemma 7 block with ``A = B = x``) against a ReLU
  network, whose depth must grow like ``log(1/eps)`` (Perekrestenko et al. 2018).
  :func:`square_study` measures the block's max error on a grid of [-1, 1] as a function of its
  constant ``c`` and the error of Yarotsky's (2017) sawtooth network (:mod:`tpcore.fleq.sawtooth`)
  for ``m`` compositions, and names for each block error the depth ``m`` the ReLU net needs.

Host-side orchestration (NumPy data); the blocks run on the backend in float64.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tpcore.analysis.plots import pyplot, save_png
from tpcore.backend import to_host
from tpcore.fleq.blocks import matmul_block, run_block
from tpcore.fleq.permute import run_vec_transpose, vec_transpose_block
from tpcore.fleq.sawtooth import hidden_layers, relu_forward, sawtooth_square_net

CHARTON = {"model": "Charton (2021), learned", "layers": 1, "heads": 8, "width": 256}
"""Charton's transformer for 30 x 30 transposition, as quoted in the paper's §8."""
RELU_DEPTHS = range(1, 17)
"""Sawtooth compositions ``m`` measured (errors ``2^-4`` to ``2^-34``)."""


def vec_transpose_study(seed: int, lams: list[float], d: int = 30,
                        n_mats: int = 4) -> dict[str, Any]:
    """``n_mats`` matrices ``A ~ U[-1, 1]^{d x d}`` through the vectorised transpose block:
    its size next to the paper's count and Charton's, and the relative error
    ``max |out - A^T| / max |A|`` per ``lambda`` in ``lams`` (float64), with its bound
    ``2 (1 - w_src) <= 2 ((1 + e^{-2 lam})^L - 1)`` (``w_src`` the head's weight on the source;
    a key ``h`` bits away scores ``2 h lam`` less)."""
    A = np.random.default_rng(seed).uniform(-1, 1, (n_mats, d, d))
    ref = np.swapaxes(A, 1, 2)
    rows = []
    for lam in lams:
        blk = vec_transpose_block(d, lam)
        out = np.asarray(to_host(run_vec_transpose(blk, A)))
        rows.append({"lam": lam, "error": float(np.abs(out - ref).max() / np.abs(ref).max()),
                     "bound": 2 * float(np.expm1(blk.params["L"] * np.log1p(np.exp(-2 * lam))))})
    L = blk.params["L"]
    return {"d": d, "n": d * d, "L": L, "matrices": n_mats, "layers": blk.n_layers,
            "heads": blk.n_heads, "width": blk.width, "head_input_rows": 2 * L + 1,
            "ff_units": sum(sp.n_units for sp in blk.layers),
            "paper": {"layers": 1, "heads": 1, "input_width": 2 * L + 1,
                      "width": 8 * (2 * L + 1)},
            "charton": CHARTON, "vs_lambda": rows}


def relu_depth_needed(error: float, relu: list[dict[str, Any]]) -> int | None:
    """The smallest measured ``m`` whose sawtooth error is at most ``error`` (None: none is)."""
    return next((r["m"] for r in relu if r["error"] <= error), None)


def square_study(cs: list[float], n_points: int = 2001) -> dict[str, Any]:
    """``x^2`` on ``n_points`` of [-1, 1] by the Lemma 7 block (``d = 1``, ``A = B = x``, C = 30;
    one head and the symmetric variant) per ``c`` in ``cs``, and by the sawtooth ReLU net per
    ``m`` in :data:`RELU_DEPTHS` on the grid ``k / 2^(m_max + 1)`` (which holds every net's worst
    points). Errors are max-abs (``max x^2 = 1``)."""
    xs = np.linspace(-1.0, 1.0, 2 ** (max(RELU_DEPTHS) + 2) + 1)
    relu = []
    for m in RELU_DEPTHS:
        net = sawtooth_square_net(m)
        err = float(np.abs(relu_forward(net, xs) - xs**2).max())
        relu.append({"m": m, "depth": hidden_layers(net), "width": max(W.shape[0] for W, _ in net),
                     "error": err, "bound": 2.0 ** (-2 * m - 2)})
    x = np.linspace(-1.0, 1.0, n_points)
    X = x[:, None, None]
    attn = []
    for sym in (False, True):
        for c in cs:
            blk = matmul_block(1, 3, c=c, C=30.0, symmetric=sym)
            out = np.asarray(to_host(run_block(blk, X, X)))[:, 0, 0]
            err = float(np.abs(out - x**2).max())
            attn.append({"symmetric": sym, "c": c, "layers": blk.n_layers, "heads": blk.n_heads,
                         "error": err, "relu_depth_needed": relu_depth_needed(err, relu)})
    return {"points": n_points, "relu_points": len(xs), "attention": attn, "relu": relu}


def _depth(m: int | None) -> str:
    return f"> {max(RELU_DEPTHS)}" if m is None else str(m)


def markdown(res: dict[str, Any]) -> list[str]:
    """The two sections of ``fleq.md`` (lines)."""
    vt = res["vec_transpose"]
    p = vt["paper"]
    L = ["", f"## §8: transposing a {vt['d']} x {vt['d']} matrix given vectorised "
         f"(n = {vt['n']}, {vt['L']}-bit codes)", "",
         "| model | layers | heads | width |", "|---|---|---|---|",
         f"| this block (one pointer head) | {vt['layers']} | {vt['heads']} | {vt['width']} "
         f"(the head reads {vt['head_input_rows']}: value row + two {vt['L']}-bit codes; "
         f"+ output row + 2 mask rows); FF units {vt['ff_units']} |",
         f"| paper's count | {p['layers']} | {p['heads']} | {p['width']} "
         f"(= 8 x {p['input_width']}: Lemma 16's ReLU layer, 8 x the input width) |",
         f"| {CHARTON['model']} | {CHARTON['layers']} | {CHARTON['heads']} | "
         f"{CHARTON['width']} |", "",
         f"Relative error `max |out - A^T| / max |A|` over {vt['matrices']} matrices "
         f"U[-1, 1]^{vt['d']}x{vt['d']} (float64), and its bound `2 ((1 + e^(-2 lambda))^L - 1)`:",
         "", "| lambda | error | bound |", "|---|---|---|"]
    L += [f"| {r['lam']:g} | {r['error']:.2g} | {r['bound']:.2g} |" for r in vt["vs_lambda"]]
    sq = res["square"]
    L += ["", "## §6.3: x^2 in 2 layers (Lemma 7 block, A = B = x) against a ReLU network", "",
          f"Max error on {sq['points']} points of [-1, 1] (C = 30); ReLU depth = the sawtooth "
          "compositions m (Yarotsky 2017) the ReLU net needs for the same error (a ReLU net's "
          "depth grows like log(1/eps): Perekrestenko et al. 2018).", "",
          "| c | 1 head (2 layers) | ReLU depth needed | symmetric (2 layers, 2 heads) | "
          "ReLU depth needed |", "|---|---|---|---|---|"]
    by = {(r["symmetric"], r["c"]): r for r in sq["attention"]}
    for c in sorted({r["c"] for r in sq["attention"]}, reverse=True):
        one, sym = by[(False, c)], by[(True, c)]
        L.append(f"| {c:.0e} | {one['error']:.2g} | {_depth(one['relu_depth_needed'])} | "
                 f"{sym['error']:.2g} | {_depth(sym['relu_depth_needed'])} |")
    L += ["", f"Sawtooth ReLU net (width 4 then 3) on {sq['relu_points']} points of [-1, 1]:", "",
          "| m (hidden layers) | max error | 2^(-2m-2) |", "|---|---|---|"]
    L += [f"| {r['m']} | {r['error']:.3g} | {r['bound']:.3g} |" for r in sq["relu"]]
    return L


def figure(res: dict[str, Any], out: Path) -> Path:
    """``fleq_claims.png``: x^2 error against depth (the attention block's 2 layers at each c,
    the sawtooth ReLU net's m layers) and the vectorised transpose's error against lambda."""
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    sq = res["square"]
    relu = sq["relu"]
    ax[0].semilogy([r["depth"] for r in relu], [r["error"] for r in relu], marker="o",
                   color="k", label="ReLU sawtooth net (Yarotsky): 2^(-2m-2)")
    for sym, mk in ((False, "s"), (True, "^")):
        errs = [r["error"] for r in sq["attention"] if r["symmetric"] == sym]
        ax[0].scatter([2] * len(errs), errs, marker=mk, zorder=3,
                      label=f"attention block, {'2 heads' if sym else '1 head'} (one point per c)")
        ax[0].axhline(min(errs), ls=":", lw=0.8, color="grey")
    ax[0].set(xlabel="depth (layers)", ylabel="max error on [-1, 1]",
              title="x^2: attention in 2 layers vs ReLU depth")
    vt, d = res["vec_transpose"]["vs_lambda"], res["vec_transpose"]["d"]
    lam = [r["lam"] for r in vt]
    ax[1].semilogy(lam, [max(r["error"], 1e-17) for r in vt], marker="o", label="measured")
    ax[1].semilogy(lam, [r["bound"] for r in vt], ls="--",
                   label=f"bound 2((1 + e^(-2 lambda))^L - 1), L = {res['vec_transpose']['L']}")
    ax[1].set(xlabel="attention sharpness lambda", ylabel="relative error (0 drawn at 1e-17)",
              ylim=(1e-18, 10), title=f"{d} x {d} transpose, 1 layer, 1 head (vectorised)")
    for a in ax:
        a.legend(fontsize=8)
        a.tick_params(labelsize=8)
    return save_png(fig, out / "fleq_claims.png")

"""Error study of the FLEQ constructions (Giannou et al. 2023, §5.2-9): the measurement the
paper promised ("evaluating the errors involved as a function of the constants used in the proof
of Lemma 7 and the temperature in Lemma 2").

* blocks: matmul error vs ``c`` and ``C`` (paper's one head, and the symmetric two-head variant),
  pointer-head error vs ``lambda`` (add, transpose), sigmoid-sum error vs ``m`` for ``1/x`` and
  ``sqrt x`` (least squares and the Lemma 10/11 constructions), float64 and float32, and the
  same sums computed by one head across the width (Corollary 6) vs its constant ``C``;
* applications: calculator vs ``m``, Newton inverse vs ``c`` and ``lambda``, power iteration,
  linear SGD and MLP SGD at the best constants, each against NumPy, float64 and float32;
* the machines' layers, heads and widths next to Theorem 2;
* the paper's two size claims (:mod:`tpcore.experiments.fleq_claims`): a 30 x 30 transpose in 1
  layer, 1 head (§8, against Charton 2021) and ``x^2`` in 2 layers against a ReLU net's depth
  (§6.3).

``run(budget, out, seed)`` writes ``fleq.json``, ``fleq.md`` and plots under ``out``.
Host-side orchestration (NumPy data); the constructions run on the backend.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.analysis.plots import draw_or_note, pyplot, save_png
from tpcore.backend import to_host
from tpcore.errors import TpcoreError
from tpcore.experiments import fleq_claims
from tpcore.experiments.budget import Budget, preset
from tpcore.experiments.options import Reproduction
from tpcore.fleq import applications as AP
from tpcore.fleq.blocks import (
    DEFAULT_GATE,
    combine_block,
    matmul_block,
    run_block,
    sigmoid_block,
    sigmoid_width_block,
    transpose_block,
)
from tpcore.fleq.fits import fit_sigmoids
from tpcore.io import write_json, write_text
from tpcore.rundir import check_out_dir

C_GRID = [1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10]
BIG_C_GRID = [2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 50.0]
LAM_GRID = [1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 30.0]
M_GRID = [4, 8, 16, 32, 64, 128]
DTYPES = {"float64": np.float64, "float32": np.float32}


def _relerr(out: Any, ref: np.ndarray) -> float:
    out = np.asarray(to_host(out), dtype=np.float64)
    return float(np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-300))


def matmul_study(seed: int, d: int = 8) -> dict[str, Any]:
    """Relative max error of ``A^T B`` (``A, B ~ U[-1, 1]^{d x d}``) vs ``c`` (``C = 30``) and vs
    ``C`` (at the best ``c``), one head and symmetric, per dtype."""
    rng = np.random.default_rng(seed)
    A, B = rng.uniform(-1, 1, (d, d)), rng.uniform(-1, 1, (d, d))
    ref = A.T @ B
    out: dict[str, Any] = {"d": d, "vs_c": [], "vs_C": []}
    for sym in (False, True):
        for name, dt in DTYPES.items():
            for c in C_GRID:
                blk = matmul_block(d, 3 * d, c=c, C=30.0, symmetric=sym)
                err = _relerr(run_block(blk, A, B, dtype=dt), ref)
                out["vs_c"].append({"symmetric": sym, "dtype": name, "c": c, "C": 30.0,
                                    "error": err})
            best = min((r for r in out["vs_c"] if r["symmetric"] == sym and r["dtype"] == name),
                       key=lambda r: r["error"])
            for C in BIG_C_GRID:
                blk = matmul_block(d, 3 * d, c=best["c"], C=C, symmetric=sym)
                err = _relerr(run_block(blk, A, B, dtype=dt), ref)
                out["vs_C"].append({"symmetric": sym, "dtype": name, "c": best["c"], "C": C,
                                    "error": err})
    return out


def lambda_study(seed: int, d: int = 4) -> list[dict[str, Any]]:
    """Error of the pointer heads vs ``lambda``: add (a tie of two columns) and transpose, with
    the default gating constant and with ``C = 100`` (its round-off is the float32 floor)."""
    rng = np.random.default_rng(seed)
    A, B = rng.uniform(-1, 1, (d, d)), rng.uniform(-1, 1, (d, d))
    s = 3 * d + d * d
    rows = []
    for gate in (DEFAULT_GATE, 100.0):
        for name, dt in DTYPES.items():
            for lam in LAM_GRID:
                add_blk = combine_block(d, s, 1.0, 1.0, lam, gate=gate)
                tr_blk = transpose_block(d, s, lam, gate=gate)
                rows.append({"dtype": name, "lam": lam, "gate": gate,
                             "add": _relerr(run_block(add_blk, A, B, dtype=dt), A + B),
                             "transpose": _relerr(run_block(tr_blk, A, dtype=dt), A.T)})
    return rows


SIGMOID_TARGETS = {"inv": (lambda x: 1 / x, 0.5, 4.0), "sqrt": (np.sqrt, 0.25, 2.0)}
"""The functions the sigmoid sums approximate, with their intervals: ``1/x`` on [0.5, 4] and
``sqrt x`` on [0.25, 2]."""


def sigmoid_study(grid: list[int]) -> list[dict[str, Any]]:
    """``1/x`` on [0.5, 4] and ``sqrt x`` on [0.25, 2] by ``m`` sigmoids: the fit alone (dense
    grid) and through the attention block (float64, float32) on 16 points."""
    rows = []
    for fn, (f, lo, hi) in SIGMOID_TARGETS.items():
        xs = np.linspace(lo, hi, 4001)
        pts = np.linspace(lo, hi, 16)[None, :]
        for kind in ("lstsq", "lemma"):
            for m in grid:
                if kind == "lstsq":
                    fit = fit_sigmoids(f, lo, hi, m)
                else:
                    key = "inv" if fn == "inv" else "sqrt"
                    fit = AP.calculator_fits(m, lo=0.5, hi=4.0, kind="lemma")[key][0]
                row = {"function": fn, "kind": kind, "m": m, "terms": fit.m,
                       "fit_error": float(np.abs(fit(xs) - f(xs)).max() / np.abs(f(xs)).min())}
                d = 16
                blk = sigmoid_block(d, 3 * d, [fit])
                for name, dt in DTYPES.items():
                    y = run_block(blk, pts, np.ones((1, 1)), dtype=dt)[0]
                    row[f"block_{name}"] = _relerr(y, f(pts[0]))
                rows.append(row)
    return rows


WIDTH_C_GRID = [10.0, 20.0, 30.0, 40.0, 60.0]
"""Off-diagonal constants ``C`` of the one-head sigmoid sum (Corollary 6) measured."""
WIDTH_TERMS = [16, 64]
"""Least-squares sigmoid counts ``m`` of the one-head sigmoid sum."""


def width_study(cs: list[float] = WIDTH_C_GRID,
                terms: list[int] = WIDTH_TERMS) -> list[dict[str, Any]]:
    """Corollary 6 / Lemma 18: ``1/x`` on [0.5, 4] and ``sqrt x`` on [0.25, 2] as a sum of ``m``
    least-squares sigmoids computed by one head per layer, the terms across ``m`` columns of the
    width (:func:`~tpcore.fleq.blocks.sigmoid_width_block`), in float64 on 16 points: the
    relative error at each constant ``C`` beside the fit's own (a leak of ``e^-C`` from every
    other term's column, amplified by coefficients up to 1e7)."""
    rows = []
    for fn, (f, lo, hi) in SIGMOID_TARGETS.items():
        pts = np.linspace(lo, hi, 16)
        for m in terms:
            fit = fit_sigmoids(f, lo, hi, m)
            row: dict[str, Any] = {"function": fn, "m": fit.m,
                                   "fit_error": _relerr(fit(pts), f(pts)), "block": []}
            for C in cs:
                blk = sigmoid_width_block(1, 3 + fit.m + 3, fit, C=C)
                ys = np.array([to_host(run_block(blk, np.array([[x]]), n_extra=2))[0, 0]
                               for x in pts])
                row["block"].append({"C": C, "error": _relerr(ys, f(pts))})
            row["layers"], row["heads"] = blk.n_layers, blk.n_heads
            rows.append(row)
    return rows


def _try(fn: Any) -> dict[str, Any]:
    """``fn()``, or ``{"broken": reason}`` when the run loses its program counter."""
    try:
        return fn()
    except TpcoreError as exc:
        return {"broken": str(exc).split(":")[0]}


def _val(r: dict[str, Any], key: str) -> float | str:
    return f"broken ({r['broken']})" if "broken" in r else r[key]


def _stats(runs: list[dict[str, Any]], i: int = 0) -> dict[str, Any]:
    """Machine size of run ``i`` (the best constants), or of the first run that worked."""
    ok = runs[i] if "broken" not in runs[i] else next(r for r in runs if "broken" not in r)
    return ok["stats"]


def application_study(budget: str, seed: int) -> dict[str, Any]:
    """Each application against NumPy at several constants (float64) and in float32."""
    rng = np.random.default_rng(seed)
    small = budget == "small"
    best = AP.Constants(lam=30.0, c=1e-5, C=30.0, symmetric=True, m=120)
    paper = AP.Constants(lam=30.0, c=1e-7, C=30.0, symmetric=False, m=120)
    res: dict[str, Any] = {"best_constants": best.__dict__, "paper_constants": paper.__dict__}

    a, b, c = rng.uniform(0.5, 1, 8), rng.uniform(0.5, 1, 8), rng.uniform(0, 0.5, 8)
    dd = rng.uniform(0.6, 3.8, 8) / ((a + b) - c)
    calc, raw = [], []
    for kind in ("lstsq", "lemma"):
        for m in ([8, 32, 120] if small else [8, 16, 32, 64, 120, 200]):
            r = _try(lambda m=m, kind=kind: AP.calculator(a, b, c, dd, AP.Constants(m=m),
                                                          kind=kind))
            raw.append(r)
            calc.append({"kind": kind, "m": m, "error": _val(r, "max_rel_error")})
    r32 = _try(lambda: AP.calculator(a, b, c, dd, AP.Constants(m=16, c=1e-2), dtype=np.float32))
    i_best = next(i for i, r in enumerate(calc) if r["kind"] == "lstsq" and r["m"] == 120)
    res["calculator"] = {"vs_m": calc, "float32_m16_c1e-2": _val(r32, "max_rel_error"),
                         "stats": _stats(raw, i_best), "steps": raw[0].get("steps")}

    d = 4 if small else 8
    A = rng.normal(size=(d, d)) + 2 * np.eye(d)
    T = 14 if small else 20
    settings = [(sym, cc, 30.0) for sym, cs in ((False, [1e-5, 1e-6, 1e-7, 1e-8, 1e-9]),
                                                (True, [1e-3, 1e-4, 1e-5, 1e-6])) for cc in cs]
    settings += [(True, 1e-5, lam) for lam in (3.0, 5.0, 10.0, 20.0)]
    newton, raw = [], []
    for sym, cc, lam in settings:
        k = AP.Constants(lam=lam, c=cc, symmetric=sym)
        r = _try(lambda k=k: AP.newton_inverse(A, T, k))
        raw.append(r)
        newton.append({"symmetric": sym, "c": cc, "lam": lam,
                       "rel_error_vs_numpy_newton": _val(r, "rel_error_vs_numpy_newton"),
                       "rel_error_vs_inv": _val(r, "rel_error_vs_inv")})
    r32 = _try(lambda: AP.newton_inverse(A, T, AP.Constants(c=1e-2), dtype=np.float32))
    r32g = _try(lambda: AP.newton_inverse(A, T, AP.Constants(c=1e-2, gate=100.0),
                                          dtype=np.float32))
    r64g = _try(lambda: AP.newton_inverse(A, T, replace(best, gate=100.0)))
    ok = next(r for r in raw if "broken" not in r)
    i_best = settings.index((True, best.c, best.lam))
    res["newton_inverse"] = {"d": d, "T": T, "runs": newton, "stats": _stats(raw, i_best),
                             "numpy_newton_vs_inv": ok["numpy_newton_vs_inv"],
                             "float32_c1e-2": _val(r32, "rel_error_vs_numpy_newton"),
                             "float32_c1e-2_gate100": _val(r32g, "rel_error_vs_numpy_newton"),
                             "best_gate100": _val(r64g, "rel_error_vs_numpy_newton")}

    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    S = Q @ np.diag(np.linspace(2.0, 0.5, d)) @ Q.T
    Tp = 20 if small else 40
    runs, raw = [], []
    for name, k in (("best", best), ("paper", paper)):
        r = _try(lambda k=k: AP.power_iteration(S, Tp, 3, k))
        raw.append(r)
        runs.append({"constants": name, **{key: _val(r, key) for key in (
            "rel_error_vs_numpy_steps", "rel_error_vs_eigvec", "numpy_steps_vs_eigvec")}})
    res["power_iteration"] = {"d": d, "T": Tp, "T2": 3, "runs": runs, "stats": _stats(raw)}

    D, dx = (6, 3) if small else (12, 4)
    Xd = rng.normal(size=(D, dx))
    y = Xd @ rng.normal(size=dx)
    runs, raw = [], []
    for name, k in (("best", best), ("paper", paper)):
        r = _try(lambda k=k: AP.linear_sgd(Xd, y, 0.1, 3, k))
        raw.append(r)
        runs.append({"constants": name, "error": _val(r, "rel_error_vs_numpy")})
    res["linear_sgd"] = {"D": D, "dx": dx, "T": 3, "eta": 0.1, "runs": runs,
                         "stats": _stats(raw), "steps": raw[0].get("steps")}

    D, dx, h = (4, 2, 3) if small else (8, 3, 4)
    Xd, y = rng.normal(size=(D, dx)), rng.normal(size=D)
    W1, b1, W2 = rng.normal(size=(h, dx)) * 0.5, rng.normal(size=h) * 0.1, rng.normal(size=h)
    runs, raw = [], []
    for name, k, had in (("best", best, "diag"), ("paper", paper, "diag"),
                         ("best, Algorithm 11 loop", best, "loop")):
        r = _try(lambda k=k, had=had: AP.mlp_sgd(Xd, y, W1, b1, W2, 0.1, 0.2, 2, k,
                                                 hadamard=had))
        raw.append(r)
        runs.append({"constants": name, "error": _val(r, "rel_error_vs_numpy"),
                     "steps": r.get("steps")})
    res["mlp_sgd"] = {"D": D, "dx": dx, "h": h, "T": 2, "eta": 0.2, "runs": runs,
                      "stats": _stats(raw), "steps": raw[0].get("steps")}
    return res


def _fmt(x: float | str | None) -> str:
    if isinstance(x, str):
        return x
    return "-" if x is None else f"{x:.2g}"


def _markdown(res: dict[str, Any]) -> str:
    L = [f"# FLEQ error study\n\nCommand: `{res['command']}` ({res['seconds']:.0f} s). "
         "Errors are relative (max-abs error / max-abs reference; vector norms for the "
         "applications).", "", "## Matrix product A^T B (Lemma 7), d = 8, C = 30", "",
         "| c | 1 head f64 | 1 head f32 | symmetric f64 | symmetric f32 |", "|---|---|---|---|---|"]
    vc = res["matmul"]["vs_c"]
    for c in C_GRID:
        e = {(r["symmetric"], r["dtype"]): r["error"] for r in vc if r["c"] == c}
        L.append(f"| {c:.0e} | {_fmt(e[(False, 'float64')])} | {_fmt(e[(False, 'float32')])} | "
                 f"{_fmt(e[(True, 'float64')])} | {_fmt(e[(True, 'float32')])} |")
    L += ["", "Error vs the anchor constant C at each variant's best c:", "",
          "| C | 1 head f64 | 1 head f32 | symmetric f64 | symmetric f32 |",
          "|---|---|---|---|---|"]
    for C in BIG_C_GRID:
        e = {(r["symmetric"], r["dtype"]): r["error"] for r in res["matmul"]["vs_C"]
             if r["C"] == C}
        L.append(f"| {C:g} | {_fmt(e[(False, 'float64')])} | {_fmt(e[(False, 'float32')])} | "
                 f"{_fmt(e[(True, 'float64')])} | {_fmt(e[(True, 'float32')])} |")
    L += ["", "## Pointer heads vs lambda (d = 4), gating constant 1e4 and 100", "",
          "| lambda | add f64 | transpose f64 | add f32 | transpose f32 | add f32, C = 100 | "
          "transpose f32, C = 100 |", "|---|---|---|---|---|---|---|"]
    for lam in LAM_GRID:
        e = {(r["dtype"], r["gate"]): r for r in res["lambda"] if r["lam"] == lam}
        f64, f32 = e[("float64", DEFAULT_GATE)], e[("float32", DEFAULT_GATE)]
        g32 = e[("float32", 100.0)]
        L.append(f"| {lam:g} | {_fmt(f64['add'])} | {_fmt(f64['transpose'])} | "
                 f"{_fmt(f32['add'])} | {_fmt(f32['transpose'])} | {_fmt(g32['add'])} | "
                 f"{_fmt(g32['transpose'])} |")
    L += ["", "## Sums of m sigmoids (Lemma 5 block): 1/x on [0.5, 4], sqrt on [0.25, 2]", "",
          "| function | fit | m (terms) | fit error | block f64 | block f32 |",
          "|---|---|---|---|---|---|"]
    for r in res["sigmoids"]:
        L.append(f"| {r['function']} | {r['kind']} | {r['m']} ({r['terms']}) | "
                 f"{_fmt(r['fit_error'])} | {_fmt(r['block_float64'])} | "
                 f"{_fmt(r['block_float32'])} |")
    L += ["", "## One head across the width (Corollary 6, Lemma 18): the same sums, least "
          "squares", "", "| function | m | fit error | " + " | ".join(
              f"block, C = {c:g}" for c in WIDTH_C_GRID) + " |",
          "|---|---|---|" + "---|" * len(WIDTH_C_GRID)]
    for r in res.get("width", []):
        errs = {b["C"]: b["error"] for b in r["block"]}
        L.append(f"| {r['function']} | {r['m']} | {_fmt(r['fit_error'])} | "
                 + " | ".join(_fmt(errs.get(c)) for c in WIDTH_C_GRID) + " |")
    ap = res["applications"]
    L += ["", "## Applications against NumPy", "",
          f"Best constants: lambda = {ap['best_constants']['lam']}, symmetric matmul c = "
          f"{ap['best_constants']['c']}, C = {ap['best_constants']['C']}, m = "
          f"{ap['best_constants']['m']} least-squares sigmoids. Paper's one-head matmul: c = "
          f"{ap['paper_constants']['c']}.", "",
          "| application | setting | relative error |", "|---|---|---|"]
    for r in ap["calculator"]["vs_m"]:
        L.append(f"| calculator (8 inputs) | {r['kind']} fits, m = {r['m']} | {_fmt(r['error'])} |")
    L.append(f"| calculator | float32, m = 16, c = 1e-2 | "
             f"{_fmt(ap['calculator']['float32_m16_c1e-2'])} |")
    nw = ap["newton_inverse"]
    for r in nw["runs"]:
        L.append(f"| Newton inverse d = {nw['d']}, T = {nw['T']} | "
                 f"{'symmetric' if r['symmetric'] else '1 head'} c = {r['c']:.0e}, lambda = "
                 f"{r['lam']:g} | {_fmt(r['rel_error_vs_numpy_newton'])}"
                 + ("" if isinstance(r["rel_error_vs_inv"], str)
                    else f" (vs inv: {_fmt(r['rel_error_vs_inv'])})") + " |")
    L.append(f"| Newton inverse | float32, c = 1e-2 | {_fmt(nw['float32_c1e-2'])} |")
    L.append(f"| Newton inverse | float32, c = 1e-2, gate C = 100 | "
             f"{_fmt(nw['float32_c1e-2_gate100'])} |")
    L.append(f"| Newton inverse | best constants, gate C = 100 | {_fmt(nw['best_gate100'])} |")
    pw = ap["power_iteration"]
    for r in pw["runs"]:
        L.append(f"| power iteration d = {pw['d']}, T = {pw['T']}, T2 = 3 | {r['constants']} | "
                 f"{_fmt(r['rel_error_vs_numpy_steps'])} (vs eigenvector: "
                 f"{_fmt(r['rel_error_vs_eigvec'])}; NumPy itself "
                 f"{_fmt(r['numpy_steps_vs_eigvec'])}) |")
    for key, label in (("linear_sgd", "linear SGD"), ("mlp_sgd", "2-layer sigmoid MLP SGD")):
        a = ap[key]
        for r in a["runs"]:
            L.append(f"| {label} D = {a['D']}, T = {a['T']} "
                     f"({r.get('steps') or a['steps']} instructions) | "
                     f"{r['constants']} | {_fmt(r['error'])} |")
    L += ["", "## Machine size against Theorem 2", "",
          "| machine | M | layers (Thm 2: 9 + max l_i) | heads total (Thm 2: sum h_i) | "
          "max heads/layer | width D | FF width | n |", "|---|---|---|---|---|---|---|---|"]
    for key in ("calculator", "newton_inverse", "power_iteration", "linear_sgd", "mlp_sgd"):
        s = ap[key]["stats"]
        L.append(f"| {key} | {s['M']} | {s['layers']} ({s['theorem2_layers']}) | "
                 f"{s['heads_total']} ({s['theorem2_heads']}) | {s['max_heads_per_layer']} | "
                 f"{s['width']} | {s['ff_width']} | {s['n']} |")
    L += fleq_claims.markdown(res)
    return "\n".join(L) + "\n"


def figures(res: dict[str, Any], out: Path) -> list[Path]:
    """``fleq_errors.png``: the relative error of three compiled blocks against exact
    arithmetic, as their sharpness or size grows (the matrix product as attention against the
    softmax scale ``c``, the pointer heads against ``lambda``, the sigmoid sums against their
    number ``m``); ``fleq_claims.png``: :func:`tpcore.experiments.fleq_claims.figure`."""
    plt = pyplot()
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.6), layout="constrained")
    for sym in (False, True):
        for dt in DTYPES:
            pts = [(r["c"], r["error"]) for r in res["matmul"]["vs_c"]
                   if r["symmetric"] == sym and r["dtype"] == dt]
            ax[0].loglog(*zip(*pts), marker="o",
                         label=f"{'two symmetric heads' if sym else 'one head'}, {dt}")
    ax[0].set(xlabel="softmax scale c", ylabel="relative error",
              title="matrix product A^T B as attention\n(Lemma 7; entries bounded by C = 30)")
    for dt in DTYPES:
        for blk in ("add", "transpose"):
            pts = [(r["lam"], max(r[blk], 1e-17)) for r in res["lambda"]
                   if r["dtype"] == dt and r["gate"] == DEFAULT_GATE]
            ax[1].semilogy(*zip(*pts), marker="o", label=f"{blk} block, {dt}")
    ax[1].set(xlabel="attention sharpness lambda", ylabel="relative error",
              title="pointer heads reading one column\n(add and transpose blocks)")
    names = {"inv": "1/x", "sqrt": "sqrt(x)", "lstsq": "least-squares fit",
             "lemma": "the lemma's construction"}
    for fn in ("inv", "sqrt"):
        for kind in ("lstsq", "lemma"):
            pts = [(r["terms"], r["block_float64"]) for r in res["sigmoids"]
                   if r["function"] == fn and r["kind"] == kind]
            ax[2].loglog(*zip(*pts), marker="o", label=f"{names[fn]}, {names[kind]}")
    terms = sorted({r["terms"] for r in res["sigmoids"] if r["kind"] == "lstsq"})
    ax[2].set(xlabel="sigmoids m", ylabel="relative error (float64)",
              title="functions as sums of m sigmoids\n(Lemma 5 block)")
    ax[2].set_xticks(terms, [str(t) for t in terms])
    ax[2].xaxis.set_minor_formatter(plt.NullFormatter())
    for a in ax:
        a.legend(fontsize=8)
        a.tick_params(labelsize=8)
    fig.suptitle("FLEQ building blocks: relative error of each compiled block against exact "
                 "arithmetic")
    return [save_png(fig, out / "fleq_errors.png"), fleq_claims.figure(res, out)]


BUDGETS = {"small": Budget("small", {"sigmoid_terms": tuple(M_GRID[:-1])}),
           "full": Budget("full", {"sigmoid_terms": tuple(M_GRID)})}
"""Sigmoid counts m of the block study; ``small`` also runs the applications on smaller
instances (minutes), ``full`` on larger ones."""


def budget(name: str) -> Budget:
    """The preset ``name`` of :data:`BUDGETS`."""
    return preset(name, BUDGETS)


CLI = Reproduction(
    "FLEQ error study: blocks and applications vs lambda, matmul c and C, sigmoid count m "
    "(float64 and float32)", "results/fleq", "small",
    "small: small instances (minutes); full: larger instances")
"""``tpcore reproduce fleq``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int) -> dict[str, Any]:
    """Run the error study and write ``fleq.json``, ``fleq.md`` (and, with matplotlib,
    :func:`figures`); returns the JSON content."""
    out = check_out_dir(out)
    t0 = time.perf_counter()
    res: dict[str, Any] = {"command": f"tpcore reproduce fleq --budget {budget.name} --seed "
                                      f"{seed}", "budget": budget.name, "seed": seed}
    res["matmul"] = matmul_study(seed)
    res["lambda"] = lambda_study(seed)
    res["sigmoids"] = sigmoid_study(list(budget["sigmoid_terms"]))
    res["width"] = width_study()
    res["applications"] = application_study(budget.name, seed)
    res["vec_transpose"] = fleq_claims.vec_transpose_study(seed, LAM_GRID)
    res["square"] = fleq_claims.square_study(C_GRID)
    res["seconds"] = time.perf_counter() - t0
    res["plots"] = [p.name for p in draw_or_note(lambda: figures(res, out))]
    write_json(out / "fleq.json", res)
    write_text(out / "fleq.md", _markdown(res))
    return res


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce fleq`` prints: the tables."""
    return _markdown(result)

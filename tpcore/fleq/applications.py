"""The paper's applications as FLEQ programs (Giannou et al. 2023, §7-9), each checked against
the same algorithm in NumPy float64.

* :func:`calculator`   Algorithm 3: ``sqrt(1/(((a+b)-c) d))/100`` with sigmoid-sum blocks for
  ``1/x`` and ``sqrt x`` (least squares, or the Lemma 10/11 constructions).
* :func:`newton_inverse` Algorithm 5 corrected: counter ``t = -(T-1)`` counting up (the lost minus
  signs), start ``X_0 = A^T / (||A||_1 ||A||_inf)`` (converges for every invertible A), and
  ``X <- mul(transp(X), 2I - A X) = X (2I - A X)`` (no symmetry assumption).
* :func:`power_iteration` Algorithms 6-8 corrected: A pre-scaled by its Frobenius norm, ``b``
  normalised every iteration with ``T2`` warm-started Newton steps for ``1/sqrt(b^T b)``
  (Algorithm 7), counters counting up from ``-(T-1)``.
* :func:`linear_sgd`   Algorithm 9: per-sample SGD on a linear model, the data pointers advanced
  by rewriting the instructions (``ptr`` block) and reset from saved copies after every epoch.
* :func:`mlp_sgd`      Algorithms 10-12 rewritten: one SGD step on a 2-layer sigmoid network per
  sample, ``sigma`` and ``sigma'`` from one two-function sigmoid block (``sigma`` is one sigmoid,
  ``sigma'(z) = (sigma(z+h) - sigma(z-h)) / 2h`` two), the element-wise product
  ``sigma'(z) * (W2 delta2)`` as ``mul(diag(.), .)`` instead of Algorithm 11's element loop
  (whose printed control flow never terminates); data pointers as in Algorithm 9.

Host-only code: programs and references are built with NumPy; execution goes through
:func:`tpcore.fleq.run.execute` on the backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.fleq.assemble import AssembledProgram, assemble, batch_punchcards
from tpcore.fleq.blocks import DEFAULT_GATE
from tpcore.fleq.fits import SigmoidFit, fit_sigmoids, inverse_fit, sqrt_fit
from tpcore.fleq.program import FleqProgram
from tpcore.fleq.run import FleqRun, execute, read_cell
from tpcore.fleq.toolkit import toolkit


@dataclass(frozen=True)
class Constants:
    """Constants of the construction: pointer inverse temperature ``lam``, matmul ``c, C``
    (``symmetric``: two heads ``+-c``), sigmoid terms ``m``, gating constant ``gate``."""

    lam: float = 30.0
    c: float = 1e-5
    C: float = 30.0
    symmetric: bool = True
    m: int = 120
    gate: float = DEFAULT_GATE


def _rel(x: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(np.ravel(x) - np.ravel(ref)) / max(np.linalg.norm(ref), 1e-300))


def _run(program: FleqProgram, names: tuple[str, ...], k: Constants,
         fits: dict[str, list[SigmoidFit]] | None = None, max_steps: int = 20_000,
         dtype: Any = np.float64, values: dict[str, np.ndarray] | None = None
         ) -> tuple[AssembledProgram, FleqRun]:
    tk = toolkit(program.d, names, c=k.c, C=k.C, lam=k.lam, fits=fits, symmetric=k.symmetric,
                 gate=k.gate)
    comp = assemble(program, tk, lam=k.lam)
    X = batch_punchcards(comp, values) if values else None
    return comp, execute(comp, X, max_steps=max_steps, dtype=dtype)


# ----------------------------------------------------------------------------------------------
# Calculator (Algorithm 3)


def calculator_fits(m: int, lo: float = 0.5, hi: float = 4.0, kind: str = "lstsq"
                    ) -> dict[str, list[SigmoidFit]]:
    """Fits of ``1/x`` on ``[lo, hi]`` and ``sqrt`` on ``[1/hi, 1/lo]`` with about ``m`` terms:
    least squares (``lstsq``) or the paper's interval constructions (``lemma``, Lemmas 10-11,
    ``eps`` chosen so the term count is close to ``m``)."""
    if kind == "lstsq":
        return {"inv": [fit_sigmoids(lambda x: 1 / x, lo, hi, m)],
                "sqrt": [fit_sigmoids(np.sqrt, 1 / hi, 1 / lo, m)]}
    if kind == "lemma":
        eps_inv = _eps_for(lambda e: inverse_fit(e, lo / 2, 2 * hi).m, m)
        eps_sq = _eps_for(lambda e: sqrt_fit(e, 2 / lo).m, m)
        return {"inv": [inverse_fit(eps_inv, lo / 2, 2 * hi)], "sqrt": [sqrt_fit(eps_sq, 2 / lo)]}
    raise TpcoreError(f"fit kind {kind!r}; expected 'lstsq' or 'lemma'")


def _eps_for(count: Any, m: int) -> float:
    """Largest eps in a geometric grid whose construction uses at most ``m`` terms."""
    prev = 1.0
    for e in np.geomspace(1.0, 1e-4, 200):
        if count(e) > m:
            return float(prev)
        prev = e
    return float(prev)


def calculator(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray,
               k: Constants = Constants(), kind: str = "lstsq", dtype: Any = np.float64
               ) -> dict[str, Any]:
    """Algorithm 3 on a batch of inputs (one program per input, run together):
    ``sqrt(1/(((a+b)-c) d))/100``. Inputs should keep ``((a+b)-c) d`` in ``[0.5, 4]``."""
    p = FleqProgram(1)
    for nm in "pqrs":
        p.cell(nm, 0.0)
    p.cell("t", 0.0)
    p.op("add", "t", "p", "q")
    p.op("sub", "t", "t", "r")
    p.op("mul", "t", "t", "s")
    p.op("inv", "t", "t", "_one")
    p.op("sqrt", "t", "t", "_one")
    p.op("perc", "t", "t")
    p.halt()
    fits = calculator_fits(k.m, kind=kind)
    vals = {nm: np.asarray(v, dtype=np.float64) for nm, v in zip("pqrs", (a, b, c, d))}
    comp, run = _run(p, ("add", "sub", "mul", "inv", "sqrt", "perc"), k, fits,
                     dtype=dtype, values=vals)
    out = read_cell(comp, run.X, "t")[:, 0, 0]
    ref = np.sqrt(1.0 / (((vals["p"] + vals["q"]) - vals["r"]) * vals["s"])) / 100
    rel = np.abs(out - ref) / np.abs(ref)
    return {"app": "calculator", "max_rel_error": float(rel.max()), "steps": run.steps,
            "batch": len(ref), "stats": comp.machine.stats(), "out": out, "ref": ref}


# ----------------------------------------------------------------------------------------------
# Linear algebra


def newton_inverse(A: np.ndarray, T: int = 12, k: Constants = Constants(),
                   dtype: Any = np.float64) -> dict[str, Any]:
    """Algorithm 5 (corrected) on ``A: (d, d)``; compares with ``np.linalg.inv`` and with the same
    ``T`` Newton steps in NumPy."""
    A = np.asarray(A, dtype=np.float64)
    d = A.shape[0]
    alpha = 1.0 / (np.abs(A).sum(0).max() * np.abs(A).sum(1).max())
    p = FleqProgram(d)
    p.cell("a", A)
    p.cell("at", np.zeros((d, d)))
    p.cell("sI", alpha * np.eye(d))
    p.cell("p2", 2.0 * np.eye(d))
    p.cell("x", np.zeros((d, d)))
    p.cell("xt", np.zeros((d, d)))
    p.cell("y", np.zeros((d, d)))
    p.cell("q", 1, kind="int")
    p.cell("t", -(T - 1), kind="int")
    p.op("transp", "at", "a")
    p.op("mul", "x", "a", "sI")                    # X_0 = alpha A^T
    p.op("mul", "y", "at", "x", label="loop")      # Y = A X
    p.op("sub", "y", "p2", "y")                    # Y = 2I - A X
    p.op("transp", "xt", "x")
    p.op("mul", "x", "xt", "y")                    # X = X (2I - A X)
    p.op("add", "t", "t", "q", flag="t", goto="loop")
    p.halt()
    comp, run = _run(p, ("add", "sub", "mul", "transp"), k, dtype=dtype)
    X = read_cell(comp, run.X, "x")
    ref = alpha * A.T
    for _ in range(T):
        ref = ref @ (2 * np.eye(d) - A @ ref)
    inv = np.linalg.inv(A)
    return {"app": "newton_inverse", "rel_error_vs_numpy_newton": _rel(X, ref),
            "rel_error_vs_inv": _rel(X, inv), "numpy_newton_vs_inv": _rel(ref, inv),
            "steps": run.steps, "T": T, "stats": comp.machine.stats()}


def power_iteration(A: np.ndarray, T: int = 30, T2: int = 3, k: Constants = Constants(),
                    dtype: Any = np.float64) -> dict[str, Any]:
    """Power iteration with per-iteration Newton normalisation; compares with the same steps in
    NumPy and with the dominant eigenvector (``np.linalg.eig``, sign aligned)."""
    A = np.asarray(A, dtype=np.float64)
    d = A.shape[0]
    As = A / np.linalg.norm(A)
    p = FleqProgram(d)
    p.cell("at", As.T)
    p.cell("b", np.full(d, 1.0 / np.sqrt(d)))
    p.cell("r", np.zeros((1, d)))
    p.cell("S", 0.0)
    p.cell("x", 1.0)
    p.cell("y", 0.0)
    p.cell("half", 0.5)
    p.cell("c15", 1.5)
    p.cell("q", 1, kind="int")
    p.cell("t1", -(T - 1), kind="int")
    p.cell("t1_0", -(T - 1), kind="int")
    p.cell("t2", -(T2 - 1), kind="int")
    p.cell("t2_0", -(T2 - 1), kind="int")
    p.op("mul", "r", "b", "at", label="outer")    # r = (A b)^T
    p.op("transp", "b", "r")                       # b = A b
    p.op("mul", "S", "b", "b")                     # S = b^T b
    p.op("mul", "y", "x", "x", label="newton")     # Algorithm 7: x <- x (3/2 - S x^2 / 2)
    p.op("mul", "y", "S", "y")
    p.op("mul", "y", "half", "y")
    p.op("sub", "y", "c15", "y")
    p.op("mul", "x", "x", "y")
    p.op("add", "t2", "t2", "q", flag="t2", goto="newton")
    p.op("add", "t2", "t2_0", "_zero")
    p.op("mul", "r", "x", "r")                     # r = b^T / |b|
    p.op("transp", "b", "r")
    p.op("add", "t1", "t1", "q", flag="t1", goto="outer")
    p.halt()
    comp, run = _run(p, ("add", "sub", "mul", "transp"), k, dtype=dtype)
    bt = read_cell(comp, run.X, "b")[:, 0]
    b, x = np.full(d, 1.0 / np.sqrt(d)), 1.0
    for _ in range(T):
        b = As @ b
        S = b @ b
        for _ in range(T2):
            x = x * (1.5 - 0.5 * S * x * x)
        b = x * b
    w, V = np.linalg.eig(A)
    v = np.real(V[:, np.argmax(np.abs(w))])
    v = v * np.sign(v @ b)
    return {"app": "power_iteration", "rel_error_vs_numpy_steps": _rel(bt, b),
            "rel_error_vs_eigvec": _rel(bt, v), "numpy_steps_vs_eigvec": _rel(b, v),
            "steps": run.steps, "T": T, "T2": T2, "stats": comp.machine.stats()}


# ----------------------------------------------------------------------------------------------
# In-context learning


def _data_cells(p: FleqProgram, X: np.ndarray, y: np.ndarray, rows: bool) -> None:
    """Points as consecutive column cells ``x{i}`` (and row cells ``xr{i}``), labels ``y{i}``."""
    for i, x in enumerate(X):
        p.cell(f"x{i}", x)
    if rows:
        for i, x in enumerate(X):
            p.cell(f"xr{i}", x[None, :])
    for i, v in enumerate(y):
        p.cell(f"y{i}", float(v))


def _epoch_loop(p: FleqProgram, moving: dict[str, dict[str, int]], D: int, T: int,
                first: str) -> None:
    """Pointer increments for the instructions in ``moving`` (label -> field steps), the
    within-epoch counter ``j`` and the epoch counter ``k``, resets from saved copies."""
    p.cell("q", 1, kind="int")
    p.cell("j", -(D - 1), kind="int")
    p.cell("j0", -(D - 1), kind="int")
    p.cell("k", -(T - 1), kind="int")
    p.code_cell("zero_step", a=0, b=0, c=0)
    for lab, step in moving.items():
        p.code_cell(f"step_{lab}", **{"a": 0, "b": 0, "c": 0, **step})
        p.code_cell(f"orig_{lab}", copy_of=lab)
        p.op("ptr", lab, lab, f"step_{lab}")
    p.op("add", "j", "j", "q", flag="j", goto=first)
    p.op("add", "j", "j0", "_zero")
    for lab in moving:
        p.op("ptr", lab, f"orig_{lab}", "zero_step")
    p.op("add", "k", "k", "q", flag="k", goto=first)
    p.halt()


def linear_sgd(X: np.ndarray, y: np.ndarray, eta: float, T: int, k: Constants = Constants(),
               dtype: Any = np.float64) -> dict[str, Any]:
    """Algorithm 9: ``T`` epochs of per-sample SGD ``w -= eta (w^T x_i - y_i) x_i`` on
    ``X: (D, dx)``, ``y: (D,)``, starting from ``w = 0``; compares with NumPy."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    D, dx = X.shape
    p = FleqProgram(dx)
    p.cell("w", np.zeros(dx))
    p.cell("eta", eta)
    p.cell("tmp", 0.0)
    p.cell("g", np.zeros(dx))
    _data_cells(p, X, y, rows=True)
    p.op("mul", "tmp", "x0", "w", label="i1")      # w^T x_i
    p.op("sub", "tmp", "tmp", "y0", label="i2")    # - y_i
    p.op("mul", "tmp", "tmp", "eta")
    p.op("mul", "g", "xr0", "tmp", label="i3")     # x_i * eta (w^T x_i - y_i)
    p.op("sub", "w", "w", "g")
    _epoch_loop(p, {"i1": {"a": 1}, "i2": {"b": 1}, "i3": {"a": dx}}, D, T, "i1")
    comp, run = _run(p, ("add", "sub", "mul", "ptr"), k, dtype=dtype, max_steps=100_000)
    w = read_cell(comp, run.X, "w")[:, 0]
    ref = np.zeros(dx)
    for _ in range(T):
        for i in range(D):
            ref = ref - X[i] * (eta * (ref @ X[i] - y[i]))
    return {"app": "linear_sgd", "rel_error_vs_numpy": _rel(w, ref), "steps": run.steps,
            "D": D, "T": T, "stats": comp.machine.stats(), "w": w, "ref": ref}


def _element_loop(p: FleqProgram, hdim: int) -> None:
    """``d1r[i] = sigma(zr[i]) (1 - sigma(zr[i])) w2r[i] d2`` for ``i < hdim`` by a loop whose
    instructions L1 (reads ``zr[i]``), L4 (``w2r[i]``) and L5 (writes ``d1r[i]``) are advanced
    by ``ptr``; then ``d1 = d1r^T``. Algorithm 11 with its control flow fixed."""
    for nm in ("s1", "s2"):
        p.cell(nm, 0.0)
    p.cell("kk", -(hdim - 1), kind="int")
    p.cell("kk0", -(hdim - 1), kind="int")
    p.cell("q1", 1, kind="int")
    p.cell("one_r", 1.0)
    for nm in ("zr", "w2r", "d1r"):
        p.view(f"{nm}@0", nm)
    p.op("sig", "s1", "zr@0", "e_sig", label="L1")          # sigma(z_i)
    p.op("sub", "s2", "one_r", "s1")                         # 1 - sigma(z_i)
    p.op("mul", "s1", "s1", "s2")                            # sigma'(z_i)
    p.op("mul", "s1", "s1", "w2r@0", label="L4")             # * (W2)_i
    p.op("mul", "d1r@0", "s1", "d2", label="L5")             # * eta delta2
    for lab, fld in (("L1", "a"), ("L4", "b"), ("L5", "c")):
        p.code_cell(f"step_{lab}", **{"a": 0, "b": 0, "c": 0, fld: 1})
        p.code_cell(f"orig_{lab}", copy_of=lab)
        p.op("ptr", lab, lab, f"step_{lab}")
    p.op("add", "kk", "kk", "q1", flag="kk", goto="L1")     # counter tested inside the loop
    p.op("add", "kk", "kk0", "_zero")
    for lab in ("L1", "L4", "L5"):
        p.op("ptr", lab, f"orig_{lab}", "zero_loop")
    p.op("transp", "d1", "d1r")


def mlp_fits(h: float = 1e-4) -> list[SigmoidFit]:
    """``sigma`` (one sigmoid) and ``sigma'(z) ~ (sigma(z+h) - sigma(z-h)) / 2h`` (two)."""
    one = np.ones((1, 1))
    sig = SigmoidFit(one, np.zeros(1), np.ones(1))
    dsig = SigmoidFit(np.ones((2, 1)), np.array([h, -h]), np.array([1, -1]) / (2 * h))
    return [sig, dsig]


def mlp_sgd(X: np.ndarray, y: np.ndarray, W1: np.ndarray, b1: np.ndarray, W2: np.ndarray,
            b2: float, eta: float, T: int, k: Constants = Constants(),
            dtype: Any = np.float64, hadamard: str = "diag") -> dict[str, Any]:
    """Per-sample SGD on ``o = W2^T sigma(W1 x + b1) + b2``, ``J = (o - y)^2 / 2`` (Algorithm 10),
    ``W1: (h, dx)``, ``W2: (h,)``; compares the final weights with NumPy (exact ``sigma'``).

    ``hadamard`` chooses how ``delta1 = sigma'(z) * W2 delta2`` is formed: ``diag``
    (``mul(diag(sigma'(z)), W2 delta2)``) or ``loop``: Algorithm 11's element loop rewritten so it
    terminates (``sigma'(z_i) = sigma(z_i)(1 - sigma(z_i))`` from scalar instructions whose
    pointers into ``z``, ``W2`` and ``delta1`` advance each pass; the counter is tested inside the
    loop and the three pointers are reset from saved copies after it)."""
    if hadamard not in ("diag", "loop"):
        raise TpcoreError(f"hadamard {hadamard!r}; expected 'diag' or 'loop'")
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    D, dx = X.shape
    hdim = W1.shape[0]
    d = max(dx, hdim)
    p = FleqProgram(d)
    p.cell("w1t", W1.T)
    p.cell("b1", b1)
    p.cell("w2", W2)
    p.cell("b2", float(b2))
    p.cell("eta", eta)
    p.cell("e_sig", [1.0, 0.0])
    p.cell("e_dsig", [0.0, 1.0])
    p.code_cell("zero_loop", a=0, b=0, c=0)
    for nm, shape in (("z", (hdim, 1)), ("zr", (1, hdim)), ("ar", (1, hdim)), ("dr", (1, hdim)),
                      ("a", (hdim, 1)), ("o", (1, 1)), ("d2", (1, 1)), ("w2r", (1, hdim)),
                      ("u", (hdim, 1)), ("Dg", (hdim, hdim)), ("d1", (hdim, 1)),
                      ("d1r", (1, hdim)), ("gw2", (hdim, 1)), ("gw1", (dx, hdim))):
        p.cell(nm, np.zeros(shape))
    _data_cells(p, X, y, rows=True)
    p.op("mul", "z", "w1t", "x0", label="i1")      # z = W1 x
    p.op("add", "z", "z", "b1")
    p.op("transp", "zr", "z")
    p.op("sig", "ar", "zr", "e_sig")               # a = sigma(z)
    if hadamard == "diag":
        p.op("sig", "dr", "zr", "e_dsig")          # sigma'(z)
    p.op("transp", "a", "ar")
    p.op("mul", "o", "w2", "a")                    # o = W2^T a + b2
    p.op("add", "o", "o", "b2")
    p.op("sub", "d2", "o", "y0", label="i2")       # delta2 = o - y
    p.op("mul", "d2", "eta", "d2")                 # eta delta2
    p.op("transp", "w2r", "w2")
    if hadamard == "diag":
        p.op("mul", "u", "w2r", "d2")              # W2 eta delta2
        p.op("diag", "Dg", "dr")
        p.op("mul", "d1", "Dg", "u")               # eta delta1 = sigma'(z) * W2 eta delta2
    else:
        _element_loop(p, hdim)
    p.op("mul", "gw2", "ar", "d2")                 # eta dJ/dW2 = a eta delta2
    p.op("transp", "d1r", "d1")
    p.op("mul", "gw1", "xr0", "d1r", label="i3")   # eta dJ/dW1^T = x eta delta1^T
    p.op("sub", "w2", "w2", "gw2")
    p.op("sub", "b2", "b2", "d2")
    p.op("sub", "w1t", "w1t", "gw1")
    p.op("sub", "b1", "b1", "d1")
    _epoch_loop(p, {"i1": {"b": 1}, "i2": {"b": 1}, "i3": {"a": dx}}, D, T, "i1")
    names = ("add", "sub", "mul", "transp", "diag", "sig", "ptr")
    comp, run = _run(p, names if hadamard == "diag" else names[:4] + names[5:], k,
                     fits={"sig": mlp_fits()}, dtype=dtype, max_steps=100_000)
    got = np.concatenate([read_cell(comp, run.X, nm).ravel()
                          for nm in ("w1t", "b1", "w2", "b2")])
    w1, bb1, w2, bb2 = W1.copy(), np.array(b1, float), np.array(W2, float), float(b2)
    for _ in range(T):
        for i in range(D):
            z = w1 @ X[i] + bb1
            a = 1 / (1 + np.exp(-z))
            d2 = (w2 @ a + bb2 - y[i])
            d1 = a * (1 - a) * w2 * d2
            w2, bb2 = w2 - eta * d2 * a, bb2 - eta * d2
            w1, bb1 = w1 - eta * np.outer(d1, X[i]), bb1 - eta * d1
    ref = np.concatenate([w1.T.ravel(), bb1, w2, [bb2]])
    return {"app": "mlp_sgd", "rel_error_vs_numpy": _rel(got, ref), "steps": run.steps,
            "D": D, "T": T, "stats": comp.machine.stats()}

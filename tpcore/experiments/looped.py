"""Reproduction for "Looped Transformers as Programmable Computers" (Giannou et al. 2023), SUBLEQ.

The paper has no experiments; these are the first numerical checks of its SUBLEQ construction:

1. **lambda sweep**: the smallest softmax inverse temperature ``lam`` at which the looped
   transformer (dense Eq. 1, 5-layer schedule) executes programs of ``T`` steps exactly in
   lockstep with the interpreter, with and without the error-correction (snap) layer, against the
   paper's sufficient ``lam >= log(G d n^3 T / eps)`` (``G = 1``, ``eps = 1/4``, the snap margin).
   Found by bisection on ``log lam`` (2% resolution) between 0.25 and 64.
2. **sensitivity**: gradients of the final memory with respect to every weight block, through
   ``T`` loop iterations (no snap layer, which is flat), and the smallest Gaussian noise on one
   block alone that breaks a run.
3. **repair**: noise on every weight of the compute layers, the smallest level that breaks
   execution, then Adam on single-instruction input/output pairs of random programs (the snap
   layer kept exact) and a re-run of the held-out programs.
4. **Minsky machines** (Appendix C, Turing completeness): an adder and a multiplier written as
   Minsky machines, translated to SUBLEQ, run on the looped transformer in lockstep with the
   interpreter on several inputs (:func:`minsky_study`).

``run(budget, out, seed)`` writes ``looped.json`` and ``looped.md`` under ``out``, and the
figure ``looped_lambda.png`` of the sweep when matplotlib is installed (:func:`figures`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.analysis.plots import Line, Panel, draw_or_note, panels_figure
from tpcore.experiments.budget import Budget, preset
from tpcore.experiments.options import Reproduction
from tpcore.io import write_json, write_text
from tpcore.looped.diff import (
    StackParameters,
    loop_backward,
    loop_forward,
    weight_arrays,
    with_weights,
)
from tpcore.looped.layer import Layer, layer_forward
from tpcore.nn.optim import Adam
from tpcore.rundir import check_out_dir
from tpcore.subleq.asm import assemble
from tpcore.subleq.examples import minsky, minsky_add, minsky_multiply, multiply, random_program
from tpcore.subleq.interpret import interpret, step
from tpcore.subleq.lockstep import run as run_lockstep
from tpcore.subleq.machine import SubleqMachine, build, decode_memory, decode_pc, punchcard
from tpcore.subleq.program import SubleqProgram
from tpcore.train import TrainConfig, fit

LAM_LO, LAM_HI = 0.25, 64.0
EPS = 0.25


def _reference(progs: list[SubleqProgram], T: int) -> tuple[np.ndarray, np.ndarray]:
    """Interpreter memory ``(T+1, B, m)`` and PC ``(T+1, B)`` (EOF repeats once reached)."""
    lo = progs[0].layout
    mems = [p.memory.copy() for p in progs]
    pcs = [lo.first_instruction] * len(progs)
    M, P = [np.stack(mems)], [np.array(pcs)]
    for _ in range(T):
        for i, p in enumerate(progs):
            if pcs[i] != lo.eof:
                pcs[i] = step(p, mems[i], pcs[i])
        M.append(np.stack(mems))
        P.append(np.array(pcs))
    return np.stack(M), np.stack(P)


def lockstep_ok(machine: SubleqMachine, progs: list[SubleqProgram], T: int,
                ref: tuple[np.ndarray, np.ndarray] | None = None,
                layers: list[Layer] | None = None) -> bool:
    """True iff ``T`` dense iterations decode to the interpreter's memory and PC every time."""
    mem_ref, pc_ref = _reference(progs, T) if ref is None else ref
    lo = progs[0].layout
    X = np.stack([punchcard(p) for p in progs])
    layers = machine.layers if layers is None else layers
    for t in range(1, T + 1):
        for ly in layers:
            X = layer_forward(X, ly, hard=machine.hard)[0]
        if not np.isfinite(X).all():
            return False
        if not (np.array_equal(decode_memory(lo, X), mem_ref[t])
                and np.array_equal(decode_pc(lo, X), pc_ref[t])):
            return False
    return True


def min_lam(ok, lo: float = LAM_LO, hi: float = LAM_HI, rel: float = 0.02) -> float | None:
    """Smallest ``lam`` in ``[lo, hi]`` with ``ok(lam)`` by bisection on ``log lam`` (assumes
    monotone); None if ``ok(hi)`` fails."""
    if not ok(hi):
        return None
    if ok(lo):
        return lo
    while hi / lo > 1 + rel:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def paper_bound(d: int, n: int, T: int, G: float = 1.0, eps: float = EPS) -> float:
    """The paper's sufficient inverse temperature ``log(G d n^3 T / eps)``."""
    return math.log(G * d * n ** 3 * T / eps)


def lam_sweep(Ts: list[int], seed: int) -> list[dict[str, Any]]:
    """Minimal lam for a halting program (multiply, ~T steps) and a batch of 8 random programs
    (T iterations each), with and without the snap layer."""
    rows = []
    rng = np.random.default_rng(seed)
    for T in Ts:
        y = max(1, T // 5)
        mult = assemble(multiply(1, y), N=10)
        steps = interpret(mult).steps
        randoms = [random_program(rng, 8, 16, 8) for _ in range(8)]
        for family, progs, iters in (("multiply", [mult], steps + 2), ("random x8", randoms, T)):
            lo = progs[0].layout
            ref = _reference(progs, iters)
            for snap in (True, False):
                t0 = time.perf_counter()
                lam = min_lam(lambda lam, s=snap, p=progs, it=iters, r=ref:
                              lockstep_ok(build(p[0].layout, lam=lam, snap=s), p, it, r))
                rows.append({"family": family, "T": iters, "snap": snap, "n": lo.n, "d": lo.d,
                             "N": lo.N, "lam_min": lam,
                             "paper_bound": paper_bound(lo.d, lo.n, iters),
                             "paper_bound_T1": paper_bound(lo.d, lo.n, 1),
                             "seconds": time.perf_counter() - t0})
    return rows


def _final_memory_grads(machine: SubleqMachine, prog: SubleqProgram, T: int, projections: int,
                        seed: int) -> dict[str, dict[str, float]]:
    """RMS over random projections ``g`` of ``|| d (g . mem_T) / dW ||`` for every block."""
    lo = prog.layout
    XT, tape = loop_forward(punchcard(prog), machine.layers, T)
    rng = np.random.default_rng(seed)
    sq: dict[str, dict[str, float]] = {}
    for _ in range(projections):
        G = np.zeros_like(XT)
        G[lo.rows["mem"], lo.s:lo.s + lo.m] = rng.standard_normal((lo.N, lo.m))
        _, grads = loop_backward(G, tape, len(machine.layers))
        for name, g in zip(machine.names, grads):
            for k, v in weight_arrays(g).items():
                sq.setdefault(name, {}).setdefault(k, 0.0)
                sq[name][k] += float((v ** 2).sum()) / projections
    return {name: {k: math.sqrt(v) for k, v in d.items()} for name, d in sq.items()}


def _noisy(layers: list[Layer], which: list[int], sigma: float, rng: np.random.Generator,
           only: str | None = None, support: str = "all") -> list[Layer]:
    """``layers`` with N(0, sigma^2) added to the arrays of layers ``which`` (all arrays, or
    only the one named ``only``): to every entry (``support="all"``) or only to the entries the
    construction sets (``"nonzero"``)."""
    out = list(layers)
    for i in which:
        arrays = weight_arrays(layers[i])
        out[i] = with_weights(layers[i], {
            k: v + sigma * rng.standard_normal(v.shape) * (1.0 if support == "all" else (v != 0))
            for k, v in arrays.items() if only in (None, k)})
    return out


SIGMAS = [float(10.0 ** e) for e in np.arange(-9, 0.01, 0.5)]


def _break_sigma(machine: SubleqMachine, progs: list[SubleqProgram], T: int, ref, seed: int,
                 which: list[int], only: str | None = None, support: str = "all") -> float | None:
    """Smallest sigma on the grid whose perturbation breaks the lockstep run."""
    for sigma in SIGMAS:
        noisy = _noisy(machine.layers, which, sigma, np.random.default_rng(seed), only, support)
        if not lockstep_ok(machine, progs, T, ref, noisy):
            return float(sigma)
    return None


def sensitivity(seed: int, lam: float = 10.0) -> dict[str, Any]:
    """Gradient norms per block through the loop (no snap), and per-block noise that breaks a
    run, with the snap layer restoring the written rows only or also the static rows."""
    prog = assemble(multiply(3, 2), N=8)
    T = interpret(prog).steps + 2
    grad_machine = build(prog.layout, lam=lam, snap=False)
    grads = _final_memory_grads(grad_machine, prog, T, projections=4, seed=seed)
    runs = {static: build(prog.layout, lam=lam, snap_static=static) for static in (False, True)}
    ref = _reference([prog], T)
    rows = []
    for li, name in enumerate(grad_machine.names):
        for k, w in weight_arrays(grad_machine.layers[li]).items():
            row = {"layer": name, "array": k, "norm_W": float(np.linalg.norm(w)),
                   "grad_norm": grads[name][k]}
            for static, m in runs.items():
                key = "break_sigma_snap_all" if static else "break_sigma"
                row[key] = _break_sigma(m, [prog], T, ref, seed, [li], k)
            rows.append(row)
    whole = {("snap_all" if st else "snap_written"): _break_sigma(m, [prog], T, ref, seed,
                                                                  list(range(len(m.layers) - 1)))
             for st, m in runs.items()}
    return {"program": "multiply(3, 2)", "T": T, "lam": lam, "rows": rows,
            "break_sigma_all_compute_layers": whole}


def _pairs(machine_exact: SubleqMachine, layout_prog: SubleqProgram, count: int,
           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Single-instruction pairs ``(X_t, X_{t+1})`` from ``count`` random programs of
    ``layout_prog``'s layout, ``t`` uniform in 0..7, computed by the exact (hardmax) machine."""
    lo = layout_prog.layout
    X = np.stack([punchcard(random_program(rng, lo.m, lo.k, lo.N)) for _ in range(count)])
    t_pick = rng.integers(0, 8, count)
    X_in = X.copy()
    for t in range(1, 8):
        X = machine_exact.forward(X)
        X_in[t_pick == t] = X[t_pick == t]
    return X_in, machine_exact.forward(X_in)


def repair(seed: int, steps: int, support: str = "all", lam: float = 10.0,
           lr_factor: float = 0.2, pairs: int = 2048) -> dict[str, Any]:
    """Break the compute layers with noise, then restore them by Adam on instruction pairs.

    ``support``: noise and training on every weight entry (``"all"``) or only on the entries
    the construction sets (``"nonzero"``). Adam moves every weight by about ``lr`` per step, so
    ``lr = lr_factor * sigma_break``: a larger step than the noise that breaks the machine would
    itself break it. The loss is ``0.5 sum (f(X_t) - X_t+1)^2 / B`` of the compute layers ``f``
    (the snap layer stays exact), trained by :func:`tpcore.train.fit`."""
    prog = assemble(multiply(3, 2), N=8)
    lo = prog.layout
    rng = np.random.default_rng(seed)
    held = [prog] + [random_program(rng, lo.m, lo.k, lo.N) for _ in range(4)]
    T = interpret(prog).steps + 2
    ref = _reference(held, T)
    machine = build(lo, lam=lam, snap_static=True)
    compute = list(range(len(machine.layers) - 1))                  # all but the snap layer
    sigma = _break_sigma(machine, held, T, ref, seed, compute, support=support)
    if sigma is None:
        return {"support": support, "sigma_break": None}
    layers = _noisy(machine.layers, compute, sigma, np.random.default_rng(seed), support=support)
    masks = [{k: (np.ones_like(v) if support == "all" else (v != 0).astype(float))
              for k, v in weight_arrays(machine.layers[i]).items()} for i in compute]
    exact = build(lo)
    X_in, X_out = _pairs(exact, prog, pairs, rng)
    X_val, Y_val = _pairs(exact, prog, 256, rng)
    model = StackParameters([layers[i] for i in compute])
    lr = lr_factor * sigma
    batch = 32

    def loss_and_grad(X: np.ndarray, Y: np.ndarray, grad: bool) -> float:
        Z, tape = loop_forward(X, model.current(), 1)
        R = Z - Y
        if grad:
            _, grads = loop_backward(R / len(X), tape, len(compute))
            for params, g, mask in zip(model.layers, grads, masks):
                params.set_grads(g, mask)
        return 0.5 * float((R ** 2).sum()) / len(X)

    def batches() -> Iterator[dict[str, np.ndarray]]:
        while True:
            idx = rng.choice(len(X_in), batch, replace=False)
            yield {"X": X_in[idx], "Y": X_out[idx]}

    loss0 = loss_and_grad(X_val, Y_val, False)
    broken_ok = lockstep_ok(machine, held, T, ref, model.current() + [machine.layers[-1]])
    every = max(1, steps // 10)
    result = fit(model, Adam(model.parameters(), lr=lr), batches(),
                 lambda m, b, ctx: loss_and_grad(b["X"], b["Y"], True),
                 TrainConfig(steps=steps, eval_at=lambda it: it % every == 0, seed=seed,
                             quiet=True, desc="repair"),
                 evaluate=lambda m: {"val_loss": loss_and_grad(X_val, Y_val, False)})
    history = [{"step": h["step"] - 1, "train_loss": h["train_loss"], "val_loss": h["val_loss"]}
               for h in result.history]
    repaired = model.current() + [machine.layers[-1]]
    return {"program": "multiply(3, 2) + 4 random programs (held out)", "T": T, "lam": lam,
            "support": support, "parameters": int(sum(m.sum() for d in masks for m in d.values())),
            "sigma_break": sigma, "noise_on": [machine.names[i] for i in compute],
            "val_loss_before": loss0, "val_loss_after": loss_and_grad(X_val, Y_val, False),
            "runs_correctly_before": broken_ok,
            "runs_correctly_after": lockstep_ok(machine, held, T, ref, repaired),
            "train_pairs": len(X_in), "steps": steps, "lr": lr, "history": history}


MINSKY_BITS = 8
"""Bits per integer of the Minsky study's SUBLEQ programs (values up to 127)."""
MINSKY_CASES = (("add", (3, 4)), ("add", (0, 5)), ("add", (20, 30)),
                ("multiply", (0, 3)), ("multiply", (3, 0)), ("multiply", (4, 5)),
                ("multiply", (6, 7)), ("multiply", (11, 11)))
"""The Minsky study's programs and inputs ``(a, b)``."""


def minsky_study(cases: tuple = MINSKY_CASES) -> list[dict[str, Any]]:
    """Each Minsky program of ``cases`` (``add``: ``a += b; b = 0``; ``multiply``: ``p = a b``,
    ``a = 0``, ``b`` kept) translated by Appendix C, assembled at :data:`MINSKY_BITS` bits and run
    on the looped transformer (exact hardmax, 5-layer schedule) beside the interpreter: its
    sizes, the registers it ends with and the ones expected, the SUBLEQ steps and loop
    iterations, and whether the two agreed after every step."""
    rows = []
    for name, (a, b) in cases:
        if name == "add":
            code, start, want = minsky_add(), {"a": a, "b": b, "z": 0}, {"a": a + b, "b": 0}
        else:
            code = minsky_multiply()
            start = {"a": a, "b": b, "p": 0, "t": 0, "z": 0}
            want = {"a": 0, "b": b, "p": a * b, "t": 0}
        program = assemble(minsky(code, start), N=MINSKY_BITS, s=1)
        r = run_lockstep(program)
        got = r.named_memory()
        rows.append({"program": name, "start": start, "expected": want,
                     "end": {k: got[k] for k in want}, "minsky_instructions": len(code),
                     "subleq_instructions": len(program.commands), "n": program.layout.n,
                     "d": program.layout.d, "steps": r.steps,
                     "iterations": r.transformer.iterations, "agree": r.agree,
                     "correct": all(got[k] == v for k, v in want.items())})
    return rows


def _minsky_markdown(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## Minsky machines through SUBLEQ (Appendix C)", "",
             f"Two Minsky machines translated by Appendix C (operands in Algorithm 2's order), "
             f"assembled at {MINSKY_BITS} bits and run on the looped transformer (hardmax, 5 "
             "layers) beside the interpreter.", "",
             "| program | start | end (expected) | Minsky / SUBLEQ instructions | X | SUBLEQ steps "
             "| loop iterations | agrees after every step |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        start = ", ".join(f"{k} = {v}" for k, v in r["start"].items() if k != "z")
        end = ", ".join(f"{k} = {r['end'][k]}" + ("" if r["end"][k] == v else f" ({v})")
                        for k, v in r["expected"].items())
        lines.append(f"| {r['program']} | {start} | {end} | {r['minsky_instructions']} / "
                     f"{r['subleq_instructions']} | {r['d']} x {r['n']} | {r['steps']} | "
                     f"{r['iterations']} | {'yes' if r['agree'] else 'NO'} |")
    return lines


def _markdown(res: dict[str, Any]) -> str:
    lines = ["# Looped transformer computer (SUBLEQ): numerical checks", "",
             f"Command: `{res['command']}`", "",
             "## Smallest lambda for exact lockstep execution", "",
             "| program | T | n | d | snap layer | lambda_min | paper log(G d n^3 T/eps) | "
             "paper, T = 1 |", "|---|---|---|---|---|---|---|---|"]
    for r in res["lam_sweep"]:
        lam = "> 64" if r["lam_min"] is None else f"{r['lam_min']:.2f}"
        lines.append(f"| {r['family']} | {r['T']} | {r['n']} | {r['d']} | "
                     f"{'yes' if r['snap'] else 'no'} | {lam} | {r['paper_bound']:.1f} | "
                     f"{r['paper_bound_T1']:.1f} |")
    s = res["sensitivity"]
    lines += ["", f"## Sensitivity ({s['program']}, T = {s['T']}, lambda = {s['lam']})", "",
              "RMS over 4 random projections of ||d(g . final memory)/dW|| through the loop "
              "(no snap layer), and the smallest N(0, sigma^2) noise on every entry of that "
              "array alone (others exact) that breaks the run, with the snap layer restoring the "
              "written rows only (default) or also the static rows cmd, enc, ind.", "",
              "| layer | array | norm W | grad norm | breaking sigma | breaking sigma, snap all |",
              "|---|---|---|---|---|---|"]
    for r in s["rows"]:
        br = ["> 1" if r[k] is None else f"{r[k]:.2g}"
              for k in ("break_sigma", "break_sigma_snap_all")]
        lines.append(f"| {r['layer']} | {r['array']} | {r['norm_W']:.3g} | "
                     f"{r['grad_norm']:.3g} | {br[0]} | {br[1]} |")
    w = s["break_sigma_all_compute_layers"]
    lines += ["", f"Noise on every array of every compute layer breaks the run at sigma = "
              f"{w['snap_written']} (snap written rows) and {w['snap_all']} (snap all rows)."]
    lines += ["", "## Repair by gradient descent on single instructions", "",
              "Noise N(0, sigma^2) on the compute layers (snap layer exact, restoring all rows), "
              "the smallest sigma on the grid that breaks the held-out runs (multiply(3, 2) and 4 "
              "random programs), then Adam (batch 32, lr = 0.2 sigma) on single-instruction "
              "pairs (X_t, X_t+1) of other random programs, loss = squared error of the "
              "pre-snap output.", "",
              "| noise on | parameters | breaking sigma | Adam steps | val loss before | "
              "val loss after | runs correct before | after |", "|---|---|---|---|---|---|---|---|"]
    for rp in res["repair"]:
        if rp.get("sigma_break") is None:
            lines.append(f"| {rp['support']} entries | | > 1 | | | | | |")
            continue
        lines.append(f"| {rp['support']} entries | {rp['parameters']} | {rp['sigma_break']:.2g} | "
                     f"{rp['steps']} | {rp['val_loss_before']:.3g} | {rp['val_loss_after']:.3g} | "
                     f"{rp['runs_correctly_before']} | {rp['runs_correctly_after']} |")
    lines += _minsky_markdown(res["minsky"])
    return "\n".join(lines) + "\n"


BUDGETS = {"small": Budget("small", {"T": (10, 100), "repair_steps": 300}),
           "full": Budget("full", {"T": (10, 100, 1000), "repair_steps": 1000})}
"""Program lengths T of the lambda sweep and Adam steps of the repair: ``small`` takes
minutes."""


def budget(name: str) -> Budget:
    """The preset ``name`` of :data:`BUDGETS`."""
    return preset(name, BUDGETS)


CLI = Reproduction(
    "lambda sweep of the SUBLEQ looped transformer, sensitivity and repair by gradient descent "
    "through the loop", "results/looped", "small", "small: T <= 100 (minutes); full: T <= 1000")
"""``tpcore reproduce looped``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int) -> dict[str, Any]:
    """Run the four studies and write ``looped.json`` and ``looped.md``; returns the JSON
    content."""
    out = check_out_dir(out)
    t0 = time.perf_counter()
    res = {"command": f"tpcore reproduce looped --budget {budget.name} --seed {seed}",
           "budget": budget.name, "seed": seed, "lam_sweep": lam_sweep(list(budget["T"]), seed),
           "sensitivity": sensitivity(seed),
           "repair": [repair(seed, steps=budget["repair_steps"], support=sup)
                      for sup in ("nonzero", "all")],
           "minsky": minsky_study()}
    res["seconds"] = time.perf_counter() - t0
    write_json(out / "looped.json", res)
    write_text(out / "looped.md", _markdown(res))
    draw_or_note(lambda: figures(res, out))
    return res


def figures(res: dict[str, Any], out: Path) -> list[Path]:
    """``looped_lambda.png``: the smallest exact lambda against T per program family, with and
    without the snap layer, beside the paper's sufficient bound (a sweep that found no lambda up
    to the search's top is left out)."""
    panels = []
    for family in dict.fromkeys(r["family"] for r in res["lam_sweep"]):
        rows = sorted((r for r in res["lam_sweep"] if r["family"] == family),
                      key=lambda r: r["T"])
        lines = []
        for snap in (True, False):
            found = [r for r in rows if r["snap"] == snap and r["lam_min"] is not None]
            lines.append(Line(f"smallest exact lambda, {'with' if snap else 'without'} snap "
                              "layer", [r["T"] for r in found], [r["lam_min"] for r in found],
                              style="-" if snap else "--", color="C0" if snap else "C1"))
        bound = [r for r in rows if r["snap"]] or rows
        lines.append(Line("paper's sufficient log(G d n^3 T / eps)", [r["T"] for r in bound],
                          [r["paper_bound"] for r in bound], style=":", color="black",
                          marker="s"))
        panels.append(Panel(f"{family} (n = {rows[0]['n']}, d = {rows[0]['d']})", lines))
    return [panels_figure(panels, out / "looped_lambda.png",
                          "SUBLEQ looped transformer: inverse temperature needed for exact "
                          "execution", "program steps T (log scale)",
                          "lambda (softmax inverse temperature)", logx=True)]


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce looped`` prints: the tables."""
    return _markdown(result)

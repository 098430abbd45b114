"""The SUBLEQ looped transformer: compile a program into a punchcard ``X`` and a fixed stack of
Eq. 1 layers, loop it until the EOF fixed point, and decode memory and PC.

One loop iteration (all layers) executes one instruction. Schedules:

* ``"fused"`` (default, 5 layers, <= 2 heads): fetch | read + subtract | write + flag + increment
  | select | snap. The subtraction reads the attention output directly (``2 tmp``), and the
  carry-in adder does negate, +1 and add in one FF.
* ``"paper"`` (8 layers): one block per layer, the order of the paper's proof of Lemma 4
  (fetch, read, subtract, write, flag, increment, select, snap); the paper counts 9 because it
  spends 3 FF layers on the subtraction.

``snap=False`` drops the error-correction layer. ``lam=None`` uses the even-tie hardmax (the exact
machine); a finite ``lam`` the softmax of Eq. 1. Compute runs over the array module of ``X``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tpcore.subleq.blocks as blocks
from tpcore.backend import to_host, xp_of
from tpcore.errors import TpcoreError
from tpcore.looped.compiled import compile_layers, forward_compiled
from tpcore.looped.encodings import decode_int, decode_unsigned, encode_address, encode_int
from tpcore.looped.layer import Layer, layer_forward, layer_forward_sparse
from tpcore.subleq.layout import Layout
from tpcore.subleq.program import SubleqProgram, validate

SCHEDULES = ("fused", "paper")


@dataclass
class SubleqMachine:
    """A compiled looped transformer for one layout. ``lam=None`` means hardmax."""

    layout: Layout
    layers: list[Layer]
    lam: float | None
    schedule: str
    snap: bool
    names: list[str] = field(default_factory=list)
    _compiled: Any = field(default=None, repr=False)

    @property
    def hard(self) -> bool:
        return self.lam is None

    def forward(self, X: Any, sparse: bool | str = False) -> Any:
        """One loop iteration ``X -> TF(X)`` on ``(d, n)`` or ``(B, d, n)``.

        ``sparse``: False (dense Eq. 1), True (scratchpad-only attention, NumPy) or ``"kernel"``
        (the same sparse path in the numba CSR kernel; host arrays only).
        """
        if sparse == "kernel":
            if self._compiled is None:
                self._compiled = compile_layers(self.layers)
            Xb = X if X.ndim == 3 else X[None]
            out = forward_compiled(Xb, self._compiled, 1, self.hard)
            return out if X.ndim == 3 else out[0]
        for layer in self.layers:
            if sparse:
                X = layer_forward_sparse(X, layer, 1, hard=self.hard)
            else:
                X = layer_forward(X, layer, hard=self.hard)[0]
        return X

    def size(self) -> dict[str, Any]:
        """Layers, heads per layer, width d, FF widths, against the paper's Lemma 4."""
        return {"layers": len(self.layers), "heads": [len(ly.heads) for ly in self.layers],
                "max_heads": max(len(ly.heads) for ly in self.layers),
                "d": self.layout.d, "d_paper": self.layout.d_paper,
                "ff_hidden": [ly.hidden for ly in self.layers], "n": self.layout.n,
                "L": self.layout.L, "N": self.layout.N, "paper_layers": 9, "paper_heads": 2}


def build(layout: Layout, lam: float | None = None, schedule: str = "fused", snap: bool = True,
          eps: float = 0.25, snap_static: bool = False, xp: Any = np) -> SubleqMachine:
    """Generate every block's weights for ``layout`` and stack them per ``schedule``.

    ``snap_static`` makes the snap layer also restore the rows no block writes (``cmd, enc, ind``)
    - needed only when the weights are perturbed."""
    if schedule not in SCHEDULES:
        raise TpcoreError(f"schedule {schedule!r}; expected one of {', '.join(SCHEDULES)}")
    if lam is not None and not lam > 0:
        raise TpcoreError(f"lam = {lam}; expected a positive inverse temperature or None")
    C = layout.gate
    lam_h = 1.0 if lam is None else float(lam)
    lo = layout
    if schedule == "fused":
        plan = [("fetch", [blocks.fetch(lo, lam_h, C)]),
                ("read+subtract", [blocks.read(lo, lam_h, C, store=False),
                                   blocks.subtract(lo, C, "tmp_a", "tmp_b", 2.0)]),
                ("write+flag+increment", [blocks.write(lo, lam_h, C), blocks.flag(lo, C),
                                          blocks.increment(lo, C)]),
                ("select", [blocks.select(lo, C)])]
    else:
        plan = [("fetch", [blocks.fetch(lo, lam_h, C)]), ("read", [blocks.read(lo, lam_h, C)]),
                ("subtract", [blocks.subtract(lo, C, "scr_a", "scr_b", 1.0)]),
                ("write", [blocks.write(lo, lam_h, C)]), ("flag", [blocks.flag(lo, C)]),
                ("increment", [blocks.increment(lo, C)]), ("select", [blocks.select(lo, C)])]
    if snap:
        plan.append(("snap", [blocks.snap(lo, C, eps, static=snap_static)]))
    return SubleqMachine(layout, [blocks.merge(parts, xp) for _, parts in plan], lam, schedule,
                         snap, [name for name, _ in plan])


def punchcard(program: SubleqProgram, xp: Any = np) -> Any:
    """The initial ``X: (d, n)`` float64 (Eq. 5 plus temporaries), PC at the first instruction."""
    lo = validate(program)
    X = np.zeros((lo.d, lo.n))
    for i, name in enumerate(("cmd_a", "cmd_b", "cmd_c")):
        X[lo.rows[name], lo.first_instruction:] = encode_address(program.commands[:, i], lo.L)
    X[lo.rows["mem"], lo.s:lo.s + lo.m] = encode_int(program.memory, lo.N)
    X[lo.rows["pc"], 0] = encode_address([lo.first_instruction], lo.L)[:, 0]
    X[lo.rows["enc"], 1:] = encode_address(np.arange(1, lo.n), lo.L)
    X[lo.rows["ind"], 0] = 1.0
    return xp.asarray(X)


def decode_memory(layout: Layout, X: Any) -> np.ndarray:
    """Memory values ``(..., m)`` from ``X: (..., d, n)`` (host ints)."""
    return decode_int(X[..., layout.rows["mem"], layout.s:layout.s + layout.m])


def decode_pc(layout: Layout, X: Any) -> np.ndarray:
    """Program counter ``(...)`` from column 0's ``pc`` rows (host ints)."""
    return decode_unsigned(X[..., layout.rows["pc"], 0:1])[..., 0]


@dataclass
class SubleqRun:
    """Result of :func:`execute`: final ``X``, per-program ``steps`` (instructions before EOF),
    ``iterations`` run, and with ``trace`` the decoded ``mems[t], pcs[t]`` and ``Xs[t]``."""

    X: Any
    steps: np.ndarray
    iterations: int
    mems: list[np.ndarray] = field(default_factory=list)
    pcs: list[np.ndarray] = field(default_factory=list)
    Xs: list[np.ndarray] = field(default_factory=list)


def execute(machine: SubleqMachine, X: Any, max_steps: int = 10_000, sparse: bool | str = False,
            trace: bool = False, keep_X: bool = False, tol: float = 1e-9) -> SubleqRun:
    """Loop ``X <- TF(X)`` until ``X`` stops changing (``max |dX| <= tol`` for every program).

    ``X: (d, n)`` or ``(B, d, n)``. The EOF fixed point is reached two iterations after the PC
    first lands on EOF (executing EOF once refreshes the scratchpad). Raises if that takes more
    than ``max_steps + 2`` iterations, naming the last PC.
    """
    xp = xp_of(X)
    lo = machine.layout
    batched = X.ndim == 3
    Xb = X if batched else X[None]
    B = Xb.shape[0]
    steps = np.full(B, -1, dtype=np.int64)
    run = SubleqRun(X, steps, 0)

    def record(t: int, Xc: Any) -> None:
        pc = decode_pc(lo, Xc)
        steps[(steps < 0) & (pc == lo.eof)] = t
        if trace:
            run.mems.append(decode_memory(lo, Xc))
            run.pcs.append(pc)
        if keep_X:
            run.Xs.append(to_host(Xc).copy())

    record(0, Xb)
    for t in range(1, max_steps + 3):
        Xn = machine.forward(Xb, sparse)
        change = to_host(xp.abs(Xn - Xb).reshape(B, -1).max(axis=1))
        Xb = Xn
        run.iterations = t
        record(t, Xb)
        if np.all(change <= tol) and np.all(steps >= 0):
            run.X = Xb if batched else Xb[0]
            return run
    pcs = decode_pc(lo, Xb)
    bad = np.nonzero(steps < 0)[0]
    which = f"program {int(bad[0])}: " if batched and bad.size else ""
    last = int(pcs[bad[0]]) if bad.size else int(pcs[0])
    raise TpcoreError(f"{which}step limit {max_steps} reached without the EOF fixed point; "
                      f"last PC = {last}")

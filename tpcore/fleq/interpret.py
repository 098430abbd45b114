"""The reference FLEQ interpreter: the assembled program run with exact NumPy functions on the
same memory layout, step by step. Host-only code (NumPy).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.fleq.assemble import AssembledProgram, code_fields
from tpcore.looped.encodings import address_bits


def interpret_steps(comp: AssembledProgram,
                    fns: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]
                    ) -> Iterator[tuple[int, np.ndarray]]:
    """Run the program with exact NumPy functions ``fns[name](A, B)`` on the same memory layout
    (pointer arithmetic on code cells included); yields ``(pc, data)`` after every step, where
    ``data: (d, n)`` holds the cell values column by column. Stops after the halting step."""
    d, s = comp.machine.d, comp.machine.s
    n = comp.machine.n
    L = address_bits(n)
    data = np.zeros((d, n))
    code: dict[int, dict[str, Any]] = {}
    start = s + comp.machine.m
    for c in comp.program.cells.values():
        a = comp.addr[c.name]
        if c.kind == "code":
            code[a] = code_fields(c, comp.addr, comp.labels, comp.words)
        else:
            h, w = c.value.shape
            data[:h, a:a + w] = c.value
    for i, w in enumerate(comp.words):
        code[start + i] = dict(w)
    pc = start
    while True:
        w = code[pc]
        f = comp.machine.tk.names[w["m"]]
        if f == "ptr":
            new = dict(code[w["a"]])
            for k in ("a", "b", "c"):
                new[k] = (new[k] + code[w["b"]][k]) % (1 << L)
            code[w["c"]] = new
        else:
            A = data[:, w["a"]:w["a"] + w["wa"]].copy()
            B = data[:, w["b"]:w["b"] + w["wb"]].copy()
            out = fns[f](A, B)
            data[:, w["c"]:w["c"] + w["wc"]] = 0.0
            data[:out.shape[0], w["c"]:w["c"] + w["wc"]] = out[:, :w["wc"]]
        pc = w["p"] if data[0, w["flag"]] <= 0 else pc + 1
        yield pc, data.copy()
        if pc == comp.halt:
            return


def interpret(comp: AssembledProgram,
              fns: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]],
              max_steps: int = 10_000) -> tuple[dict[str, np.ndarray], int]:
    """:func:`interpret_steps` to the end: final non-code cells and the number of steps."""
    for step, (pc, data) in enumerate(interpret_steps(comp, fns), start=1):
        if pc == comp.halt:
            cells = {nm: data[:c.value.shape[0], comp.addr[nm]:comp.addr[nm] + c.value.shape[1]]
                     for nm, c in comp.program.cells.items() if c.kind != "code"}
            return cells, step
        if step >= max_steps:
            break
    raise TpcoreError(f"interpreter reached the step limit {max_steps} at PC {pc}")

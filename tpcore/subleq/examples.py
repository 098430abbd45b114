"""Example SUBLEQ programs (assembler source) and a Minsky-machine compiler. Host-only code.

* :func:`multiply` - ``x * y`` by repeated addition (``y`` counted down by subtraction).
* :func:`factorial` - ``k!`` with a nested multiply loop.
* :func:`reverse` - reverse a list in place (unrolled swaps; SUBLEQ has no indirect addressing
  and this machine keeps code and memory apart).
* :func:`search` - index of the first cell equal to a target, else -1 (unrolled comparisons).
* :func:`random_program` - random (bounded) programs for tests, benches and experiments.
* :func:`minsky` - a Minsky machine through the Appendix C translation, operands swapped to
  Algorithm 2's order (``subleq a, b`` means ``mem[b] -= mem[a]``; the paper's listing uses the
  opposite order, under which its ``j+2`` line would overwrite the constant +1);
  :func:`minsky_add` and :func:`minsky_multiply` are two Minsky programs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tpcore.errors import TpcoreError, unknown_name
from tpcore.subleq.asm import assemble
from tpcore.subleq.program import SubleqProgram


def multiply(x: int, y: int) -> str:
    """``p = x * y`` for ``y >= 1``."""
    return f"""
.data
x = {x}
y = {y}
p = 0
.code
loop: add x, p
      subleq 1, y, done    ; y -= 1; stop when y <= 0
      jmp loop
done: halt
"""


def factorial(k: int) -> str:
    """``acc = k!`` for ``k >= 1`` (repeated addition inside a countdown)."""
    return f"""
.data
k = {k}
acc = 1
p = 0
c = 0
.code
outer: subleq 1, k, done     ; k -= 1; k was 1 -> finished
       subleq -1, k          ; undo: k += 1
       clr p
       mov k, c
inner: add acc, p            ; p += acc, c times
       subleq 1, c, next_k
       jmp inner
next_k: mov p, acc
       subleq 1, k, done     ; k -= 1
       jmp outer
done:  halt
"""


def reverse(values: Sequence[int]) -> str:
    """Reverse cells ``xs[0..k-1]`` in place."""
    k = len(values)
    if k < 2:
        raise TpcoreError(f"reverse needs at least 2 values, got {k}")
    lines = [".data", "xs = " + ", ".join(str(v) for v in values), "t = 0", ".code"]
    for i in range(k // 2):
        j = k - 1 - i
        lines += [f"mov xs[{i}], t", f"mov xs[{j}], xs[{i}]", f"mov t, xs[{j}]"]
    lines.append("halt")
    return "\n".join(lines) + "\n"


def search(values: Sequence[int], target: int) -> str:
    """``r`` = first index ``i`` with ``xs[i] == target``, else -1."""
    lines = [".data", f"v = {target}", "r = -1", "t = 0", "u = 0"]
    lines += [f"x{i} = {v}" for i, v in enumerate(values)]
    lines.append(".code")
    for i in range(len(values)):
        lines += [f"c{i}: mov x{i}, t", f"subleq v, t, le{i}      ; t = x{i} - v",
                  f"jmp c{i + 1}", f"le{i}: clr u", f"subleq t, u, found{i}   ; u = v - x{i}",
                  f"jmp c{i + 1}", f"found{i}: clr r", f"subleq -{i}, r", "halt"]
    lines += [f"c{len(values)}: halt"]
    return "\n".join(lines) + "\n"


def minsky(code: Sequence[tuple], registers: dict[str, int]) -> str:
    """Translate a Minsky machine into assembler source (Appendix C, operands corrected).

    ``code`` items: ``("inc", r)`` (``r += 1``), ``("jzdec", r, target)`` (if ``r == 0`` goto
    instruction ``target`` else ``r -= 1``), ``("halt",)``; targets are 0-based indices into
    ``code``. Registers must start >= 0. ``inc`` becomes ``subleq cm1, r`` and ``jzdec`` the five
    instructions of Appendix C with a scratch cell ``b`` (named ``scratch``) and constants
    ``c0 = 0, c1 = 1``.
    """
    lines = [".data", "cm1 = -1", "c0 = 0", "c1 = 1", "scratch = 0"]
    for name, v in registers.items():
        if v < 0:
            raise TpcoreError(f"Minsky register {name} starts at {v}; expected >= 0")
        lines.append(f"{name} = {v}")
    lines.append(".code")
    for j, ins in enumerate(code):
        op = ins[0]
        if op == "inc":
            lines.append(f"m{j}: subleq cm1, {ins[1]}")
        elif op == "jzdec":
            r, target = ins[1], ins[2]
            if not 0 <= target < len(code):
                raise TpcoreError(f"Minsky instruction {j}: target {target} out of range")
            lines += [f"m{j}: subleq scratch, scratch",      # b = 0
                      f"subleq {r}, scratch, m{j}_zero_test",  # b = -r <= 0 (r >= 0): jump
                      f"subleq c1, {r}, m{j + 1}",           # (unreached for r >= 0)
                      f"m{j}_zero_test: subleq c0, {r}, m{target}",  # r <= 0, i.e. r == 0
                      f"subleq c1, {r}, m{j + 1}"]           # r -= 1
        elif op == "halt":
            lines.append(f"m{j}: halt")
        else:
            raise TpcoreError(f"Minsky instruction {j}: unknown op {op!r}")
    lines.append(f"m{len(code)}: halt")
    return "\n".join(lines) + "\n"


def minsky_add() -> list[tuple]:
    """Minsky program ``a += b; b = 0`` (``z`` stays 0 and serves as an unconditional jump)."""
    return [("jzdec", "b", 3), ("inc", "a"), ("jzdec", "z", 0), ("halt",)]


def minsky_multiply() -> list[tuple]:
    """Minsky program ``p += a b; a = 0`` with ``b`` restored: for each unit taken from ``a``,
    move ``b`` into ``p`` and ``t`` one unit at a time, then ``t`` back into ``b`` (``z`` stays 0
    and serves as an unconditional jump)."""
    return [("jzdec", "a", 8),                                   # 0: a == 0: done
            ("jzdec", "b", 5), ("inc", "p"), ("inc", "t"),      # 1-3: b -> p and t
            ("jzdec", "z", 1),                                   # 4: loop
            ("jzdec", "t", 0), ("inc", "b"), ("jzdec", "z", 5),  # 5-7: t -> b, then 0
            ("halt",)]


EXAMPLES = {
    "multiply": lambda N=8, s=1: assemble(multiply(7, 5), N=N, s=s),
    "factorial": lambda N=10, s=1: assemble(factorial(5), N=N, s=s),
    "reverse": lambda N=8, s=1: assemble(reverse([3, -1, 4, 1, -5]), N=N, s=s),
    "search": lambda N=8, s=1: assemble(search([9, -2, 6, 5, 3], 5), N=N, s=s),
    "minsky": lambda N=8, s=1: assemble(minsky(minsky_add(), {"a": 3, "b": 4, "z": 0}), N=N,
                                        s=s),
}
"""name -> builder of a :class:`SubleqProgram` with default inputs (used by tests and the CLI)."""


def example(name: str, N: int | None = None, s: int = 1) -> SubleqProgram:
    """The named example program (see :data:`EXAMPLES`) with ``s`` scratchpad columns and
    ``N`` bits per integer (None: the example's own)."""
    if name not in EXAMPLES:
        raise unknown_name("example", name, EXAMPLES)
    return EXAMPLES[name](s=s) if N is None else EXAMPLES[name](N, s)


def random_program(rng: np.random.Generator, m: int, k: int, N: int, s: int = 1,
                   vmax: int = 9, halting: bool = True) -> SubleqProgram:
    """A random program of ``m`` cells and ``k`` instructions (the last is EOF).

    Cells 0 and 1 hold EOF's constants 0 and -1 and are never written; the others start uniform in
    ``[-vmax, vmax]``. Instructions subtract any cell from a cell >= 2 and jump anywhere, so the
    program may or may not halt; with ``halting=False`` no jump targets EOF and the instruction
    before EOF jumps back to the first one, so it never halts.
    """
    cells = np.arange(s, s + m)
    top = s + m + k if halting else s + m + k - 1
    body = np.stack([rng.choice(cells, k - 1), rng.choice(cells[2:], k - 1),
                     rng.integers(s + m, top, k - 1)], axis=1)
    if not halting:
        body[-1] = [s, s, s + m]
    cmds = np.concatenate([body, [[s, s + 1, s + m + k - 1]]]).astype(np.int64)
    mem = np.concatenate([[0, -1], rng.integers(-vmax, vmax + 1, m - 2)]).astype(np.int64)
    return SubleqProgram(cmds, mem, s=s, N=N)

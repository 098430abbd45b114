"""A small SUBLEQ assembler with labels, named memory cells and a few pseudo-instructions.

Syntax (one statement a line; ``;`` or ``#`` starts a comment)::

    .data
    x = 7                 ; a named cell
    xs = 3, 1, 4          ; cells xs[0], xs[1], xs[2]
    .code
    loop: subleq a, b, c  ; mem[b] -= mem[a]; if mem[b] <= 0 goto c (Algorithm 2 order)
          subleq a, b     ; c omitted (or ``next``): fall through either way
          add a, b        ; mem[b] += mem[a]     (3 instructions, via the temporary _tmp)
          mov a, b        ; mem[b] = mem[a]      (4 instructions)
          clr a           ; mem[a] = 0
          jmp label       ; unconditional jump
          halt            ; jump to EOF

Operands are cell names, ``name[i]``, or integer literals (a constant cell is made for each).
Jump targets are labels, ``next`` or ``halt``. Reserved cells come first: ``_zero = 0`` and
``_neg = -1`` (EOF's operands) and ``_tmp = 0``; the EOF instruction ``subleq _zero, _neg, EOF``
is appended. Host-only code.
"""

from __future__ import annotations

import re

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.subleq.program import SubleqProgram, validate

RESERVED = (("_zero", 0), ("_neg", -1), ("_tmp", 0))
_LABEL = re.compile(r"^([A-Za-z_][\w.]*)\s*:\s*(.*)$")
_NAME = re.compile(r"^[A-Za-z_][\w.]*(\[\d+\])?$")


def _expand(op: str, args: list[str], line: int) -> list[tuple[str, str, str]]:
    """Pseudo-instruction -> list of ``(a, b, c)`` operand strings."""
    arity = {"subleq": (2, 3), "add": (2, 2), "mov": (2, 2), "clr": (1, 1), "jmp": (1, 1),
             "halt": (0, 0)}
    if op not in arity:
        raise TpcoreError(f"line {line}: unknown instruction {op!r}; expected one of "
                          f"{', '.join(arity)}")
    lo, hi = arity[op]
    if not lo <= len(args) <= hi:
        raise TpcoreError(f"line {line}: {op} takes {lo}..{hi} operands, got {len(args)}")
    if op == "subleq":
        return [(args[0], args[1], args[2] if len(args) == 3 else "next")]
    if op == "add":
        a, b = args
        return [(a, "_tmp", "next"), ("_tmp", b, "next"), ("_tmp", "_tmp", "next")]
    if op == "mov":
        a, b = args
        return [(b, b, "next")] + _expand("add", [a, b], line)
    if op == "clr":
        return [(args[0], args[0], "next")]
    if op == "jmp":
        return [("_zero", "_zero", args[0])]
    return [("_zero", "_zero", "halt")]


def assemble(source: str, N: int = 8, s: int = 1) -> SubleqProgram:
    """Assemble ``source`` into a validated :class:`SubleqProgram` with ``s`` scratchpad columns."""
    cells: dict[str, int] = {}
    values: list[int] = []

    def new_cell(name: str, value: int, line: int) -> None:
        if name in cells:
            raise TpcoreError(f"line {line}: memory cell {name!r} defined twice")
        if not -(2**63) <= value < 2**63:
            text = str(value)
            raise TpcoreError(f"line {line}: value {text if len(text) < 24 else text[:20] + '...'}"
                              f" of {name!r} does not fit a machine word (at most 64 bits)")
        cells[name] = len(values)
        values.append(value)

    for name, value in RESERVED:
        new_cell(name, value, 0)
    section = "code"
    code: list[tuple[int, str | None, str, list[str]]] = []   # (line, label, op, args)
    pending: list[str] = []
    for line, raw in enumerate(source.splitlines(), start=1):
        text = re.split(r"[;#]", raw, maxsplit=1)[0].strip()
        if not text:
            continue
        if text in (".data", ".code"):
            section = text[1:]
            continue
        if section == "data":
            if "=" not in text:
                raise TpcoreError(f"line {line}: data must read 'name = value[, value...]'")
            name, rhs = (t.strip() for t in text.split("=", 1))
            if not re.match(r"^[A-Za-z][\w.]*$", name):
                raise TpcoreError(f"line {line}: bad cell name {name!r}")
            try:
                vals = [int(v) for v in rhs.split(",")]
            except ValueError as exc:
                raise TpcoreError(f"line {line}: values {rhs!r} are not integers") from exc
            if len(vals) == 1:
                new_cell(name, vals[0], line)
            else:
                for i, v in enumerate(vals):
                    new_cell(f"{name}[{i}]", v, line)
            continue
        m = _LABEL.match(text)
        while m:
            pending.append(m.group(1))
            text = m.group(2).strip()
            m = _LABEL.match(text)
        if not text:
            continue
        op, _, rest = text.partition(" ")
        args = [a.strip() for a in rest.split(",")] if rest.strip() else []
        for triple in _expand(op.lower(), args, line):
            code.append((line, pending, *triple))
            pending = []
    if pending:
        code.append((0, pending, "_zero", "_zero", "halt"))

    labels: dict[str, int] = {}
    for i, (line, names, *_rest) in enumerate(code):
        for name in names:
            if name in labels or name in ("next", "halt"):
                raise TpcoreError(f"line {line}: label {name!r} defined twice or reserved")
            labels[name] = i
    constants: dict[int, str] = {}

    def operand(tok: str, line: int) -> int:
        if re.match(r"^-?\d+$", tok):
            v = int(tok)
            if v not in constants:
                constants[v] = f"${v}"
                new_cell(constants[v], v, line)
            return cells[constants[v]]
        if not _NAME.match(tok) or tok not in cells:
            raise TpcoreError(f"line {line}: unknown memory cell {tok!r}")
        return cells[tok]

    resolved = []
    for i, (line, _names, a, b, c) in enumerate(code):
        ia, ib = operand(a, line), operand(b, line)
        if c == "next":
            ic = i + 1
        elif c == "halt":
            ic = len(code)
        elif c in labels:
            ic = labels[c]
        else:
            raise TpcoreError(f"line {line}: unknown jump target {c!r}")
        resolved.append((ia, ib, ic))
    resolved.append((cells["_zero"], cells["_neg"], len(code)))      # EOF
    m = len(values)
    cmds = np.array([(s + a, s + b, s + m + c) for a, b, c in resolved], dtype=np.int64)
    program = SubleqProgram(cmds, np.array(values, dtype=np.int64), s=s, N=N,
                      names={k: s + v for k, v in cells.items()},
                      labels={k: s + m + v for k, v in labels.items()})
    validate(program)
    return program

"""The MLP of the program IR: a lookup table over one or two input variables, and everything it
owns (see :mod:`tpcore.programs.modules`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tpcore.backend import xp_of
from tpcore.kernels import program_opcodes as op
from tpcore.programs.modules.base import KernelOp, check_output
from tpcore.programs.values import (
    KINDS,
    LIMITS,
    Framing,
    Scope,
    Variable,
    check_size,
    fail,
    need,
    read_labels,
)

if TYPE_CHECKING:
    from tpcore.programs.modules.base import Batch


@dataclass
class Mlp:
    """A lookup ``table`` over the product of its inputs' value sets (``table.shape ==
    (|values_1|, ..., |values_l|)``, ``l`` 1 or 2) giving output indices; a numerical input
    outside its value set gives ``default``."""

    name: str
    kind: str
    inputs: tuple[str, ...]
    output: str
    table: np.ndarray
    default: int

    type_name = "mlp"
    opcode = op.MLP

    @property
    def reads(self) -> tuple[str, ...]:
        """Its ``inputs``."""
        return self.inputs

    def with_reads(self, reads: Sequence[str]) -> Mlp:
        """A copy reading ``reads`` as its ``inputs``."""
        return dataclasses.replace(self, inputs=tuple(reads))

    def summary(self) -> str:
        """A few words naming the kind, e.g. ``categorical MLP``."""
        return f"{self.kind} MLP"

    def describe(self) -> str:
        """What the MLP computes: ``lookup(input, ...)``."""
        return f"lookup({', '.join(self.inputs)})"

    def validate(self, variables: dict[str, Variable], framing: Framing) -> None:
        if self.kind not in KINDS:
            fail(self.name, f"kind {self.kind!r}; expected one of {KINDS}")
        if not 1 <= len(self.inputs) <= 2:
            fail(self.name, f"reads {len(self.inputs)} inputs; expected 1 or 2")
        for name in self.inputs:
            if variables[name].kind != self.kind:
                fail(self.name, f"a {self.kind} MLP cannot read {variables[name].kind} {name!r}")
        shape = tuple(variables[name].size for name in self.inputs)
        check_size(math.prod(shape), LIMITS.table, f"{self.name}: table entries")
        if self.table.shape != shape or self.table.dtype.kind != "i":
            fail(self.name, f"table must be ints of shape {shape}, got {self.table.shape} "
                 f"{self.table.dtype}")
        k = variables[self.output].size
        if (self.table.size and (self.table.min() < 0 or self.table.max() >= k)
                or not 0 <= self.default < k):
            fail(self.name, f"table entries and default must be in 0 .. {k - 1}")
        check_output(self.name, variables[self.output], True)

    def to_json(self, variables: dict[str, Variable]) -> dict[str, Any]:
        """The table as output labels in row-major order, with the output's values."""
        out = variables[self.output].values
        return {"type": self.type_name, "name": self.name, "kind": self.kind,
                "inputs": list(self.inputs), "output": self.output, "output_values": list(out),
                "table": [out[i] for i in self.table.ravel().tolist()],
                "default": out[self.default]}

    @classmethod
    def from_json(cls, d: dict[str, Any], common: tuple[str, str, str], scope: Scope) -> Mlp:
        name, kind, out = common
        inputs = [scope.get(r, name) for r in need(d, "inputs", name, list)]
        if not 1 <= len(inputs) <= 2:
            fail(name, f"reads {len(inputs)} inputs; expected 1 or 2")
        shape = tuple(x.size for x in inputs)
        check_size(math.prod(shape), LIMITS.table, f"{name}: table entries")
        entries = need(d, "table", name, list)
        if len(entries) != math.prod(shape):
            fail(name, f"table has {len(entries)} entries; expected {math.prod(shape)}")
        ov = scope.add(out, "categorical", read_labels(need(d, "output_values", name), out))
        table = np.asarray([ov.index(x) for x in entries], dtype=np.int64).reshape(shape)
        return cls(name, kind, tuple(x.name for x in inputs), out, table,
                   ov.index(need(d, "default", name)))

    def kernel_op(self, slot: dict[str, int], variables: dict[str, Variable],
                  fparams_offset: int) -> KernelOp:
        """``a, b``: the input slots (``b = -1`` for one input); ``c``: the default;
        ``params``: the flat table; ``stride``: the second input's size (1 for one input);
        ``flag``: 1 for numerical inputs."""
        two = len(self.inputs) == 2
        return KernelOp(slot[self.inputs[0]], slot[self.inputs[1]] if two else -1, self.default,
                        stride=variables[self.inputs[1]].size if two else 1,
                        flag=int(self.kind == "numerical"), params=self.table.ravel())

    def table_index(self, env: dict[str, Any], variables: dict[str, Variable]) -> Any:
        """Flat table index per position, or ``-1`` where a numerical input is outside its
        values."""
        xp = xp_of(env["tokens"])
        flat = None
        for name in self.inputs:
            var = variables[name]
            x = env[name]
            if var.kind == "numerical":
                vals = xp.asarray(np.asarray(var.values, dtype=np.float64))
                pos = xp.clip(xp.searchsorted(vals, x), 0, var.size - 1)
                x = xp.where(vals[pos] == x, pos, -1)
            flat = x if flat is None else xp.where((flat < 0) | (x < 0), -1, flat * var.size + x)
        return flat

    def evaluate(self, env: dict[str, Any], batch: Batch) -> Any:
        xp = xp_of(env["tokens"])
        idx = self.table_index(env, batch.variables)
        table = xp.asarray(self.table.ravel())
        return xp.where(idx >= 0, table[xp.maximum(idx, 0)], self.default)

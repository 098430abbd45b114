"""The module kinds of the program IR and its classifier, each owning its code.

A kind is one class, in a file of this package (:mod:`~tpcore.programs.modules.head`,
:mod:`~tpcore.programs.modules.mlp`, :mod:`~tpcore.programs.modules.counts`): its fields, the
variables it ``reads``, its ``output`` variable, the ``opcode`` :func:`tpcore.programs.interpret.
compile_program` writes for it (:mod:`tpcore.kernels.program_opcodes`), and

- ``validate(variables, framing)``: raises unless it is well formed among a program's
  variables (whose names, order and reads :func:`tpcore.programs.ir.validate` checks first);
- ``to_json(variables)``: its JSON form, with labels, not indices, under ``"type":
  type_name``; ``from_json(d, common, scope)`` reads it back from untrusted JSON, checking
  every field and size before allocating, and defines its output variable in ``scope``;
- ``evaluate(env, batch)``: its output ``(B, N)`` from the variables before it (the array
  reference of :func:`tpcore.programs.interpret.evaluate`, array module from the inputs);
- ``kernel_op(slot, variables, fparams_offset)``: its operands and parameters in the compiled
  program (:class:`~tpcore.programs.modules.base.KernelOp`);
- ``summary()``: a few words naming it (a dependency graph's node); ``describe()``: what it
  computes, in words (:func:`tpcore.programs.describe.dependency_text`);
- ``with_reads(reads)``: a copy reading other variables in the roles of ``reads``.

The counting kinds, which read only the tokens, also give the values of their output on framed
inputs (``values(tokens, bos, eos, pad, max_len)``). :class:`Classifier`
(:mod:`~tpcore.programs.modules.classifier`) validates, converts and evaluates itself likewise.

:data:`ProgramModule` lists the kinds and :data:`MODULE_TYPES` maps each ``type_name`` back to its
class: adding a kind means adding its class in a file here and naming it in
:data:`ProgramModule`. Keys ``j`` past a sequence's length are masked, and keys after the query
too when the program is ``causal``. Host-only code (NumPy) but for ``evaluate``.
"""

from __future__ import annotations

from typing import Any, get_args

from tpcore.programs.modules.base import Batch, KernelOp
from tpcore.programs.modules.classifier import Classifier
from tpcore.programs.modules.counts import (
    ExpertCount,
    PrefixCount,
    RunningCount,
    Values,
    expert_rule,
    expert_values,
)
from tpcore.programs.modules.head import Head
from tpcore.programs.modules.mlp import Mlp
from tpcore.programs.values import Scope, Variable, check_variable_name, fail, need, shorten

__all__ = [
    "MODULE_TYPES", "Batch", "Classifier", "ExpertCount", "Head", "KernelOp", "Mlp",
    "PrefixCount", "ProgramModule", "RunningCount", "count_values", "expert_rule",
    "expert_values", "read_module",
]

ProgramModule = Head | Mlp | PrefixCount | RunningCount | ExpertCount
MODULE_TYPES: dict[str, type[ProgramModule]] = {kind.type_name: kind
                                                for kind in get_args(ProgramModule)}
"""The class of each module ``"type"`` of the JSON form."""


def read_module(d: Any, i: int, scope: Scope) -> ProgramModule:
    """Module ``i`` of a JSON program: its name, kind and output checked here, the rest by its
    kind's ``from_json``, which defines its output variable in ``scope``."""
    name = check_variable_name(need(d, "name", f"module {i}"), f"module {i} name")
    kind, out = need(d, "kind", name, str), need(d, "output", name, str)
    check_variable_name(out, f"{name} output")
    mtype = d.get("type")
    cls = MODULE_TYPES.get(mtype) if isinstance(mtype, str) else None
    if cls is None:
        names = [repr(t) for t in MODULE_TYPES]
        fail(f"module {i}", f"type {shorten(mtype)}; expected {', '.join(names[:-1])} or "
             f"{names[-1]}")
    return cls.from_json(d, (name, kind, out), scope)


def count_values(m: PrefixCount | RunningCount | ExpertCount, tokens: Variable,
                 bos: str | None, eos: str | None, pad: str | None, max_len: int) -> Values:
    """The values of the output of a module that reads only the tokens, on framed inputs of at
    most ``max_len`` tokens: its kind's ``values`` (a prefix count's ``0 .. max_len - 1``, a
    running count's ``1 .. max_len``, an expert gate's :func:`expert_values` once its shapes
    and size are checked)."""
    return m.values(tokens, bos, eos, pad, max_len)

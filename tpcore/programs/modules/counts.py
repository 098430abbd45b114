"""The counting kinds of the program IR, which read only the tokens: the prefix count, the
running count and the expert gate of the counting paper, each owning what the kinds own (see
:mod:`tpcore.programs.modules`) and the values its output can take on framed inputs
(``values``); and the expert gate's rule by length (:func:`expert_rule`) and values
(:func:`expert_values`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from tpcore.backend import xp_of
from tpcore.counts import EXPERTS, expert_features, length_rule, running_counts
from tpcore.kernels import program_opcodes as op
from tpcore.programs.modules.base import KernelOp, check_output
from tpcore.programs.values import (
    LIMITS,
    Framing,
    Scope,
    Variable,
    check_finite,
    check_size,
    fail,
    need,
    read_numbers,
    shorten,
)

if TYPE_CHECKING:
    from tpcore.programs.modules.base import Batch

FLOAT_TYPES = ("float32", "float64")
Values = tuple[int | float, ...]
"""The values a count's output can take."""
T = TypeVar("T", bound="ReadsTokens")


class ReadsTokens:
    """What the counting kinds share: they read only ``tokens``."""

    name: str

    @property
    def reads(self) -> tuple[str, ...]:
        """``("tokens",)``."""
        return ("tokens",)

    def with_reads(self: T, reads: Sequence[str]) -> T:
        """A copy; ``reads`` must be ``("tokens",)`` (the tokens are never renamed)."""
        if tuple(reads) != self.reads:
            fail(self.name, f"reads only the tokens, not {shorten(list(reads))}")
        return dataclasses.replace(self)


@dataclass
class PrefixCount(ReadsTokens):
    """PrefixSumCounts: ``out_t = #{i < t : tokens_i = token}``, a numerical variable
    with values ``0 .. max_len - 1``."""

    name: str
    token: str
    output: str
    kind: str = "numerical"

    type_name = "prefix_count"
    opcode = op.PREFIX_COUNT

    def values(self, tokens: Variable, bos: str | None, eos: str | None, pad: str | None,
               max_len: int) -> Values:
        """``0 .. max_len - 1``, whatever the framing."""
        return tuple(range(max_len))

    def summary(self) -> str:
        """A few words naming the kind, e.g. ``count of 'a'``."""
        return f"count of {self.token!r}"

    def describe(self) -> str:
        """What the module computes, in words."""
        return f"count of {self.token!r} before each position (tokens)"

    def validate(self, variables: dict[str, Variable], framing: Framing) -> None:
        tokens, max_len = variables["tokens"], variables["positions"].size
        if not isinstance(self.token, str) or self.token not in tokens.lookup or \
                variables[self.output].values != self.values(tokens, *framing, max_len):
            fail(self.name, f"counts a token of the vocabulary ({shorten(self.token)}) into "
                 f"values 0 .. {max_len - 1}")
        check_output(self.name, variables[self.output], self.kind == "categorical")

    def to_json(self, variables: dict[str, Variable]) -> dict[str, Any]:
        return {"type": self.type_name, "name": self.name, "kind": self.kind,
                "token": self.token, "output": self.output}

    @classmethod
    def from_json(cls, d: dict[str, Any], common: tuple[str, str, str],
                  scope: Scope) -> PrefixCount:
        name, _, out = common
        m = cls(name, need(d, "token", name, str), out)
        scope.add(out, "numerical", m.values(scope.tokens, *scope.framing, scope.max_len))
        return m

    def kernel_op(self, slot: dict[str, int], variables: dict[str, Variable],
                  fparams_offset: int) -> KernelOp:
        """``a``: the counted token's index."""
        return KernelOp(variables["tokens"].index(self.token))

    def evaluate(self, env: dict[str, Any], batch: Batch) -> Any:
        ids, lengths = env["tokens"], batch.lengths
        xp = xp_of(ids)
        hit = ((ids == batch.variables["tokens"].index(self.token))
               & (xp.arange(ids.shape[1])[None, :] < lengths[:, None]))
        return (xp.cumsum(hit, axis=1) - hit).astype(np.float64)


@dataclass
class RunningCount(ReadsTokens):
    """The running count of each position's own token, itself included: ``out_t = #{i <= t :
    tokens_i = tokens_t}``, a numerical variable with values ``1 .. max_len`` (the
    PrefixSumCounts of the counting paper's released code)."""

    name: str
    output: str
    kind: str = "numerical"

    type_name = "running_count"
    opcode = op.RUNNING_COUNT

    def values(self, tokens: Variable, bos: str | None, eos: str | None, pad: str | None,
               max_len: int) -> Values:
        """``1 .. max_len``, whatever the framing."""
        return tuple(range(1, max_len + 1))

    def summary(self) -> str:
        """A few words naming the kind."""
        return "running count of the own token"

    def describe(self) -> str:
        """What the module computes, in words."""
        return "count of each position's own token up to it (tokens)"

    def validate(self, variables: dict[str, Variable], framing: Framing) -> None:
        max_len = variables["positions"].size
        if variables[self.output].values != self.values(variables["tokens"], *framing, max_len):
            fail(self.name, f"counts into values 1 .. {max_len}")
        check_output(self.name, variables[self.output], False)

    def to_json(self, variables: dict[str, Variable]) -> dict[str, Any]:
        return {"type": self.type_name, "name": self.name, "kind": self.kind,
                "output": self.output}

    @classmethod
    def from_json(cls, d: dict[str, Any], common: tuple[str, str, str],
                  scope: Scope) -> RunningCount:
        name, _, out = common
        m = cls(name, out)
        scope.add(out, "numerical", m.values(scope.tokens, *scope.framing, scope.max_len))
        return m

    def kernel_op(self, slot: dict[str, int], variables: dict[str, Variable],
                  fparams_offset: int) -> KernelOp:
        """No operand."""
        return KernelOp()

    def evaluate(self, env: dict[str, Any], batch: Batch) -> Any:
        ids, lengths = env["tokens"], batch.lengths
        xp = xp_of(ids)
        pad = xp.arange(ids.shape[1])[None, :] >= lengths[:, None]
        return running_counts(xp.where(pad, 0, ids), batch.variables["tokens"].size, pad,
                              np.float64)


@dataclass
class ExpertCount(ReadsTokens):
    """The SparseExpertCountingNetwork's discrete gate: ``weights: (5, V)`` (columns
    in token order), ``bias: (5,)``, both host float64 (the model's values), ``dtype``: the
    model's float type, which relative frequencies are divided in (numerical output).

    With the histogram ``h[v]`` of the sequence's tokens (every position before its length,
    framing included) and ``n = sum h``, the experts at ``t`` are ``E1 = n``, ``E2 = h[x_t]``,
    ``E3 = [h[x_t] = max h]``, ``E4 = [h[x_t] = 1]``, ``E5 = h[x_t] / n``; the gate scores
    ``z_i = b_i + sum_v W[i, v] h[v]`` (float64, added in token order), the first maximum picks
    one expert per sequence, ``out_t = E_{i*}(t)``. Its values (:func:`expert_values`) are what
    the experts the gate can pick on framed inputs produce.
    """

    name: str
    output: str
    weights: np.ndarray
    bias: np.ndarray
    dtype: str = "float32"
    kind: str = "numerical"

    type_name = "expert_count"
    opcode = op.EXPERT_COUNT

    def check_gate(self, n_tokens: int, max_len: int) -> None:
        """Shapes, finiteness, size and float type of the gate (what :func:`expert_values`
        needs)."""
        shape = (len(EXPERTS), n_tokens)
        if self.weights.shape != shape or self.bias.shape != shape[:1]:
            fail(self.name, f"weights must have shape {shape} and bias ({shape[0]},), got "
                 f"{self.weights.shape} and {self.bias.shape}")
        check_finite(self.weights, f"{self.name}: gate weights")
        check_finite(self.bias, f"{self.name}: gate bias")
        check_size(n_tokens * max_len, LIMITS.gate,
                   f"{self.name}: vocabulary times maximum length")
        if self.dtype not in FLOAT_TYPES:
            fail(self.name, f"dtype {self.dtype!r}; expected one of {FLOAT_TYPES}")

    def values(self, tokens: Variable, bos: str | None, eos: str | None, pad: str | None,
               max_len: int) -> Values:
        """:func:`expert_values`, once the gate's shapes and size are checked."""
        self.check_gate(tokens.size, max_len)
        return expert_values(self, tokens, bos, eos, pad, max_len)

    def summary(self) -> str:
        """A few words naming the kind."""
        return "counting expert"

    def describe(self) -> str:
        """What the module computes, in words."""
        return "the counting expert the gate picks (tokens)"

    def validate(self, variables: dict[str, Variable], framing: Framing) -> None:
        if variables[self.output].values != self.values(variables["tokens"], *framing,
                                                        variables["positions"].size):
            fail(self.name, "output values must be those of the experts its gate can pick")
        check_output(self.name, variables[self.output], self.kind == "categorical")

    def to_json(self, variables: dict[str, Variable]) -> dict[str, Any]:
        """The gate as ``{expert: bias}`` and ``{expert: {token: weight}}``."""
        tok = variables["tokens"].values
        return {"type": self.type_name, "name": self.name, "kind": self.kind,
                "output": self.output, "dtype": self.dtype,
                "bias": dict(zip(EXPERTS, self.bias.tolist())),
                "weights": {e: dict(zip(tok, row))
                            for e, row in zip(EXPERTS, self.weights.tolist())}}

    @classmethod
    def from_json(cls, d: dict[str, Any], common: tuple[str, str, str],
                  scope: Scope) -> ExpertCount:
        name, _, out = common
        tok = scope.tokens
        gate_w, gate_b = need(d, "weights", name, dict), need(d, "bias", name, dict)
        rows = [[need(need(gate_w, e, name, dict), t, name) for t in tok.values]
                for e in EXPERTS]
        m = cls(name, out, read_numbers(rows, f"{name} gate weights", 2),
                read_numbers([need(gate_b, e, name) for e in EXPERTS], f"{name} gate bias", 1),
                need(d, "dtype", name, str))
        scope.add(out, "numerical", m.values(tok, *scope.framing, scope.max_len))
        return m

    def kernel_op(self, slot: dict[str, int], variables: dict[str, Variable],
                  fparams_offset: int) -> KernelOp:
        """``a``: the offset of ``W`` (row-major, then ``b``) in ``fparams``; ``stride``: the
        number of tokens; ``flag``: 1 when relative frequencies are divided in float32."""
        return KernelOp(fparams_offset, stride=self.weights.shape[1],
                        flag=int(self.dtype == "float32"),
                        fparams=np.concatenate([self.weights.ravel(), self.bias]))

    def evaluate(self, env: dict[str, Any], batch: Batch) -> Any:
        """The experts of :func:`tpcore.counts.expert_features` (in ``dtype``, as the model
        computes them) at the gate's first maximum ``argmax_i b_i + sum_v W[i, v] h[v]``
        (float64, added in token order, as the numba kernel and the generated program add
        them); float64, 0 past each length."""
        ids, lengths = env["tokens"], batch.lengths
        xp = xp_of(ids)
        pad = xp.arange(ids.shape[1])[None, :] >= lengths[:, None]
        h, e = expert_features(xp.where(pad, 0, ids), self.weights.shape[1], pad, self.dtype)
        h = h.astype(np.float64)
        w = xp.asarray(self.weights)
        z = xp.broadcast_to(xp.asarray(self.bias), (ids.shape[0], len(self.bias)))
        for v in range(w.shape[1]):
            z = z + h[:, v, None] * w[:, v]
        pick = z.argmax(axis=1)[None, :, None]
        return xp.take_along_axis(e, pick, axis=0)[0].astype(np.float64)


def expert_rule(m: ExpertCount, tokens: Variable, bos: str | None, eos: str | None,
                pad: str | None, max_len: int) -> dict[int, str | None]:
    """Content length ``L`` -> the expert ``m``'s gate picks for every framed input with ``L``
    content tokens, None where it depends on the input (:func:`tpcore.counts.
    length_rule`): ``bos``/``eos`` occur once, every other token but ``pad`` is content, and
    ``L`` runs over ``0 .. max_len - #framing``."""
    framing = {tokens.values.index(t): 1 for t in (bos, eos) if t in tokens.values}
    content = [i for i, t in enumerate(tokens.values) if t not in (bos, eos, pad)]
    longest = max_len - len(framing) if content else 0
    return length_rule(m.weights, m.bias, framing, content, range(longest + 1))


def expert_values(m: ExpertCount, tokens: Variable, bos: str | None, eos: str | None,
                  pad: str | None, max_len: int) -> Values:
    """Sorted values of ``m``'s output on framed inputs of at most ``max_len`` tokens: the
    integers ``0 .. max_len`` when the gate can pick a count or an indicator expert, and every
    ``a / n`` (``1 <= a <= n <= max_len``, divided in ``m.dtype``; integral ones as ints) when it
    can pick ``relative_frequency``. An expert can be picked when :func:`expert_rule` fixes it
    at some length; all can be where the choice depends on the input."""
    rule = expert_rule(m, tokens, bos, eos, pad, max_len)
    experts = set(EXPERTS) if None in rule.values() else set(rule.values())
    values: set[int | float] = set()
    if experts - {"relative_frequency"}:
        values.update(range(max_len + 1))
    if "relative_frequency" in experts:
        check_size(max_len * (max_len + 1) // 2, LIMITS.values,
                   f"{m.name}: relative frequencies a / n with n <= {max_len}")
        n = np.arange(1, max_len + 1)
        a, n = np.meshgrid(n, n, indexing="ij")
        q = (a.astype(m.dtype) / n.astype(m.dtype))[a <= n]
        values.update(int(x) if x.is_integer() else x for x in q.astype(np.float64).tolist())
    return tuple(sorted(values))

"""The attention head of the program IR (categorical or numerical): its predicate map, the rule
that picks one key, and everything it owns (see :mod:`tpcore.programs.modules`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tpcore.backend import xp_of
from tpcore.kernels import program_opcodes as op
from tpcore.programs.modules.base import KernelOp, check_output
from tpcore.programs.values import KINDS, Framing, Scope, Variable, fail, need, read_labels, shorten

if TYPE_CHECKING:
    from tpcore.programs.modules.base import Batch

RULES = ("closest", "published")


@dataclass
class Head:
    """An attention head (categorical or numerical) with its predicate map and rule.

    ``predicate[q] = k`` maps each query index to the one key index it matches (``-1``: matches
    nothing). ``kind="categorical"``: each position attends to one matching key chosen by
    ``rule``: ``"closest"`` (the tpcore model: the nearest matching position, the earlier one on
    equal distance, the query itself only if nothing else matches) or ``"published"`` (the
    authors' ``select_closest`` helper: the query's own position ranks as if at distance
    ``len(matches)``, first minimum in position order); position 0 when nothing matches. Output:
    the value variable at that position (a categorical variable with the value variable's
    labels). ``kind="numerical"``: ``out_i = sum_j [predicate(q_i) == k_j] * value_j`` over
    unmasked keys ``j`` (numerical value variable, numerical output).
    """

    name: str
    kind: str
    query: str
    key: str
    value: str
    output: str
    predicate: np.ndarray
    rule: str = "closest"

    type_name = "head"

    @property
    def reads(self) -> tuple[str, ...]:
        """``(query, key, value)``."""
        return (self.query, self.key, self.value)

    @property
    def opcode(self) -> int:
        """The kernel's opcode, by ``kind`` (the other kinds name theirs as a class
        attribute)."""
        return op.CAT_HEAD if self.kind == "categorical" else op.NUM_HEAD

    def with_reads(self, reads: Sequence[str]) -> Head:
        """A copy reading ``reads`` as its ``(query, key, value)``."""
        query, key, value = reads
        return dataclasses.replace(self, query=query, key=key, value=value)

    def summary(self) -> str:
        """A few words naming the kind, e.g. ``categorical head, closest``."""
        return f"{self.kind} head" + (f", {self.rule}" if self.kind == "categorical" else "")

    def describe(self) -> str:
        """What the head computes, in the published programs' words: ``select_closest(key=k,
        query=q), value=v [rule]`` or ``select+aggregate_sum(key=k, query=q), value=v``."""
        categorical = self.kind == "categorical"
        what = "select_closest" if categorical else "select+aggregate_sum"
        return (f"{what}(key={self.key}, query={self.query}), value={self.value}"
                + (f" [{self.rule}]" if categorical else ""))

    def validate(self, variables: dict[str, Variable], framing: Framing) -> None:
        if self.kind not in KINDS:
            fail(self.name, f"kind {self.kind!r}; expected one of {KINDS}")
        if self.rule not in RULES:
            fail(self.name, f"rule {self.rule!r}; expected one of {RULES}")
        q, k, val = variables[self.query], variables[self.key], variables[self.value]
        if q.kind != "categorical" or k.kind != "categorical":
            fail(self.name, "query and key must be categorical")
        if val.kind != self.kind:
            fail(self.name, f"a {self.kind} head needs a {self.kind} value, got {val.kind} "
                 f"{val.name!r}")
        if self.kind == "categorical" and variables[self.output].values != val.values:
            fail(self.name, "output labels must equal the value variable's labels")
        pred = self.predicate
        if pred.shape != (q.size,) or pred.dtype.kind != "i":
            fail(self.name, f"predicate must be {q.size} ints, got shape {pred.shape} "
                 f"{pred.dtype}")
        if pred.size and (pred.min() < -1 or pred.max() >= k.size):
            fail(self.name, f"predicate entries must be in -1 .. {k.size - 1}")
        check_output(self.name, variables[self.output], self.kind == "categorical")

    def to_json(self, variables: dict[str, Variable]) -> dict[str, Any]:
        """The predicate as ``[query label, key label]`` pairs of the queries that match."""
        q, k = variables[self.query], variables[self.key]
        pairs = [[q.values[i], k.values[j]] for i, j in enumerate(self.predicate.tolist())
                 if j >= 0]
        return {"type": self.type_name, "name": self.name, "kind": self.kind,
                "query": self.query, "key": self.key, "value": self.value,
                "output": self.output, "rule": self.rule, "predicate": pairs}

    @classmethod
    def from_json(cls, d: dict[str, Any], common: tuple[str, str, str], scope: Scope) -> Head:
        """A numerical head's output values are the file's ``numerical_values`` entry."""
        name, kind, out = common
        q, k, val = (scope.get(need(d, f, name, str), name) for f in ("query", "key", "value"))
        pred = np.full(q.size, -1, dtype=np.int64)
        for pair in need(d, "predicate", name, list):
            if not isinstance(pair, list) or len(pair) != 2:
                fail(name, f"predicate entries must be [query, key] pairs, got {shorten(pair)}")
            pred[q.index(pair[0])] = k.index(pair[1])
        if kind == "categorical":
            scope.add(out, "categorical", val.values)
        else:
            scope.add(out, "numerical", read_labels(need(scope.numerical, out, name), out))
        return cls(name, kind, q.name, k.name, val.name, out, pred, need(d, "rule", name, str))

    def kernel_op(self, slot: dict[str, int], variables: dict[str, Variable],
                  fparams_offset: int) -> KernelOp:
        """``a, b, c``: the query, key and value slots; ``params``: the predicate; ``flag``: the
        rule (1: published)."""
        return KernelOp(slot[self.query], slot[self.key], slot[self.value],
                        flag=int(self.rule == "published"), params=self.predicate)

    def match_scores(self, q: Any, k: Any, mask: Any) -> Any:
        """``S[b, i, j] = (predicate[q[b, i]] == k[b, j])`` on visible keys; ``(B, N, N)``
        bool."""
        xp = xp_of(q)
        target = xp.asarray(self.predicate)[q]
        return (target[:, :, None] == k[:, None, :]) & (target[:, :, None] >= 0) & mask

    def choose_key(self, scores: Any) -> Any:
        """Index of the attended key per query ``(B, N)``, by ``rule``; 0 when nothing matches.

        ``closest``: rank ``2|i-j| - [j < i]`` (nearest, earlier on ties), the query itself
        last. ``published``: rank ``|i-j|``, the query itself ``len(matches)``, ties to the
        earlier position.
        """
        xp = xp_of(scores)
        n = scores.shape[-1]
        i = xp.arange(n)[:, None]
        j = xp.arange(n)[None, :]
        dist = xp.abs(i - j)
        if self.rule == "closest":
            rank = xp.where(i == j, 4 * n, 2 * dist - (j < i))[None] * (n + 1) + j[None]
        else:
            count = scores.sum(axis=-1, keepdims=True)
            rank = xp.where((i == j)[None], count, dist[None]) * (n + 1) + j[None]
        big = 8 * n * (n + 1)
        best = xp.where(scores, rank, big).argmin(axis=-1)
        return xp.where(scores.any(axis=-1), best, 0)

    def evaluate(self, env: dict[str, Any], batch: Batch) -> Any:
        s = self.match_scores(env[self.query], env[self.key], batch.mask)
        if self.kind == "categorical":
            return xp_of(s).take_along_axis(env[self.value], self.choose_key(s), axis=1)
        return (s * env[self.value][:, None, :]).sum(axis=-1)

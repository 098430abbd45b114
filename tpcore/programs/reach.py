"""Value sets: the values each variable of a program can take on framed inputs, per sequence
length and position. Host-only code (NumPy).

A *framed input* of length ``L`` is ``bos`` (when the program has one), content tokens (any
token but ``pad``, ``bos`` and ``eos``), then ``eos`` (when it has one); every length from the
framing alone up to ``max_len`` counts. For each context ``(L, i)`` (position ``i`` of an input
of length ``L``) :func:`value_sets` gives a mask over every variable's values; when contexts
times values exceed :data:`BUDGET`, lengths are merged into contexts ``(None, i)`` holding the
values at position ``i`` of inputs of any length.

Soundness: on every framed input of length ``L``, each variable's value at position ``i``
lies in its set for ``(L, i)``. By induction over the modules in program order:

- inputs: ``tokens`` as framed above, ``positions`` ``{i}``, ``ones`` ``{1}``;
- a categorical head attends to a visible key ``j`` (``j < L``, and ``j <= i`` when causal)
  whose key equals the query's target ``t``, or to key 0 when no key matches; so its output is
  in the union of the value's sets at the keys where ``t`` is possible, plus the value's set at
  key 0 unless some visible key can only hold ``t`` (then a match always exists) or for the
  queries that match nothing;
- a numerical head adds the value at every visible matching key: each key ``j`` contributes
  ``0`` (its key differs from ``t``) or a value of its set (``0`` only if the key can differ),
  and the output lies in the sums of one choice per key (computed exactly for integers; an
  interval otherwise). A sum outside the output's listed values marks the variable ``outside``;
- an MLP's output is a table entry at a pair of input values that occur at one position, so it
  lies in the entries over the product of its inputs' sets (plus its default when a numerical
  input may be ``outside``);
- a prefix count counts the keys before ``i`` that can hold its token, at least those that
  must; a running count lies in ``1 ..`` the keys up to ``i``; an expert count keeps every
  listed value.

With lengths merged, a key after the query's position may be missing from shorter inputs, so
only keys up to it count as always there; merging otherwise only unions sets. The sets
over-approximate: values at different positions are treated as independent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpcore.programs.ir import (
    ExpertCount,
    Head,
    Mlp,
    PrefixCount,
    Program,
    ProgramModule,
    RunningCount,
)

BUDGET = 2**25
"""Most context-value entries (contexts times the values of all variables) with lengths apart;
past it lengths are merged."""
MAX_SUMS = 2**22
"""Widest range of integer sums tracked exactly; wider ones become intervals."""


@dataclass
class ValueSets:
    """``masks[name]: (C, size)`` bool per variable over ``contexts`` (``(L, i)``, ``L`` None
    when lengths are merged); ``outside``: numerical variables that may take a value not among
    their listed values."""

    contexts: list[tuple[int | None, int]]
    masks: dict[str, np.ndarray]
    outside: set[str]

    def union(self, name: str) -> np.ndarray:
        """Values ``name`` can take anywhere: ``(size,)`` bool."""
        return self.masks[name].any(axis=0)

    def domain(self, names: tuple[str, ...]) -> np.ndarray:
        """The combinations of values of ``names`` (one or two variables) that occur together
        at one position: a bool mask over the product of their values."""
        if len(names) == 1:
            return self.union(names[0])
        if names[0] == names[1]:
            return np.diag(self.union(names[0]))
        a, b = (self.masks[n] for n in names)
        pairs = np.unique(np.concatenate([a, b], axis=1), axis=0)
        out = np.zeros((a.shape[1], b.shape[1]), dtype=bool)
        for row in pairs:
            out |= np.outer(row[: a.shape[1]], row[a.shape[1]:])
        return out


def _contexts(p: Program) -> tuple[list[tuple[int | None, int]], list[int]]:
    """Contexts and the lengths of framed inputs (see the module docstring)."""
    framing = (p.bos is not None) + (p.eos is not None)
    content = any(t not in (p.bos, p.eos, p.pad) for t in p.tokens.values)
    lengths = list(range(max(framing, 1), p.max_len + 1)) if content else [framing]
    total = sum(v.size for v in p.variables.values())
    if sum(lengths) * total <= BUDGET:
        return [(n, i) for n in lengths for i in range(n)], lengths
    return [(None, i) for i in range(max(lengths))], lengths


def _token_mask(p: Program, length: int, i: int) -> np.ndarray:
    """Tokens at position ``i`` of framed inputs of length ``length``."""
    tok = p.tokens
    out = np.zeros(tok.size, dtype=bool)
    if p.bos is not None and i == 0:
        out[tok.index(p.bos)] = True
    elif p.eos is not None and i == length - 1:
        out[tok.index(p.eos)] = True
    else:
        out[[t not in (p.bos, p.eos, p.pad) for t in tok.values]] = True
    return out


class _Sets:
    """Value sets being built in program order."""

    def __init__(self, p: Program):
        self.p = p
        self.contexts, lengths = _contexts(p)
        self.index = {c: n for n, c in enumerate(self.contexts)}
        self.masks: dict[str, np.ndarray] = {}
        self.outside: set[str] = set()
        c = len(self.contexts)
        tokens = np.zeros((c, p.tokens.size), dtype=bool)
        positions = np.zeros((c, p.max_len), dtype=bool)
        for n, (length, i) in enumerate(self.contexts):
            for ln in ([length] if length is not None else [x for x in lengths if x > i]):
                tokens[n] |= _token_mask(p, ln, i)
            positions[n, i] = True
        self.masks.update(tokens=tokens, positions=positions, ones=np.ones((c, 1), dtype=bool))

    def keys(self, n: int, causal: bool) -> tuple[list[int], int]:
        """Contexts of the keys visible from context ``n``, in position order, and how many of
        the first ones every input with that context has (all with lengths apart; those up to
        the query's position when merged)."""
        length, i = self.contexts[n]
        last = (length if length is not None else self.p.max_len) - 1
        keys = [self.index[(length, j)] for j in range(min(i, last) + 1 if causal else last + 1)]
        return keys, len(keys) if length is not None else i + 1

    def add(self, m: ProgramModule) -> None:
        """Set the value sets of ``m``'s output by its kind's rule (module docstring). A switch
        over the kinds rather than a method of each: the rules are this module's soundness
        argument, which reads best in one place, next to the helpers they share."""
        if isinstance(m, Head):
            self.masks[m.output] = (self.categorical_head(m) if m.kind == "categorical"
                                    else self.numerical_head(m))
        elif isinstance(m, Mlp):
            self.masks[m.output] = self.mlp(m)
        elif isinstance(m, PrefixCount):
            self.masks[m.output] = self.prefix_count(m)
        elif isinstance(m, RunningCount):
            self.masks[m.output] = self.running_count(m)
        elif isinstance(m, ExpertCount):
            self.masks[m.output] = np.ones((len(self.contexts), self.p.variables[m.output].size),
                                           dtype=bool)

    def targets(self, m: Head, n: int) -> list[int]:
        """The key values the queries possible at context ``n`` look for (``-1``: none)."""
        seen = np.zeros(self.p.variables[m.key].size + 1, dtype=bool)
        seen[m.predicate[self.masks[m.query][n]] + 1] = True
        return (np.flatnonzero(seen) - 1).tolist()

    def categorical_head(self, m: Head) -> np.ndarray:
        rk, rv = self.masks[m.key], self.masks[m.value]
        sure = rk & (rk.sum(axis=1) == 1)[:, None]
        out = np.zeros((len(self.contexts), rv.shape[1]), dtype=bool)
        for n in range(len(self.contexts)):
            keys, present = self.keys(n, self.p.causal)
            for t in self.targets(m, n):
                if t < 0 or not sure[keys[:present], t].any():
                    out[n] |= rv[keys[0]]
                if t >= 0:
                    out[n] |= rv[keys][rk[keys, t]].any(axis=0)
        return out

    def numerical_head(self, m: Head) -> np.ndarray:
        var = self.p.variables[m.value]
        out_var = self.p.variables[m.output]
        rk, rv = self.masks[m.key], self.masks[m.value]
        sure = rk & (rk.sum(axis=1) == 1)[:, None]
        values = np.asarray(var.values, dtype=np.float64)
        listed = np.asarray(out_var.values, dtype=np.float64)
        integer = bool(np.all(values == np.round(values)) and np.all(np.abs(values) < 2**40))
        out = np.zeros((len(self.contexts), out_var.size), dtype=bool)
        cache: dict[tuple, tuple[int, np.ndarray] | tuple[float, float]] = {}
        for n in range(len(self.contexts)):
            keys, present = self.keys(n, self.p.causal)
            for t in self.targets(m, n):
                if t < 0:
                    sums: tuple = (0, np.ones(1, dtype=bool))
                else:
                    sig = (tuple(keys), present, t)
                    if sig not in cache:
                        cache[sig] = _sums([(values[rv[j]], not (sure[j, t] and k < present))
                                            for k, j in enumerate(keys) if rk[j, t]], integer)
                    sums = cache[sig]
                hit, outside = _mark(sums, listed)
                out[n] |= hit
                if outside:
                    self.outside.add(m.output)
        if not integer:
            self.outside.add(m.output)
        return out

    def mlp(self, m: Mlp) -> np.ndarray:
        """Table entries over the inputs' sets (the diagonal when it reads one variable
        twice), per distinct pair of input sets."""
        out = np.zeros((len(self.contexts), self.p.variables[m.output].size), dtype=bool)
        if len(m.inputs) == 2 and m.inputs[0] == m.inputs[1]:
            diagonal = np.diagonal(m.table)
            for n, row in enumerate(self.masks[m.inputs[0]]):
                out[n, diagonal[row]] = True
            return self.default(m, out)
        masks = [self.masks[x] for x in m.inputs]
        stacked = np.concatenate(masks, axis=1)
        rows, inverse = np.unique(stacked, axis=0, return_inverse=True)
        cut = np.cumsum([x.shape[1] for x in masks])[:-1]
        for r, row in enumerate(rows):
            parts = np.split(row, cut)
            seen = np.flatnonzero(np.bincount(m.table[np.ix_(*parts)].ravel(),
                                              minlength=out.shape[1]))
            out[inverse.ravel() == r, seen[:, None]] = True
        return self.default(m, out)

    def default(self, m: Mlp, out: np.ndarray) -> np.ndarray:
        """``out`` with ``m``'s default where a numerical input may be outside its values."""
        if any(x in self.outside for x in m.inputs):
            out[:, m.default] = True
        return out

    def prefix_count(self, m: PrefixCount) -> np.ndarray:
        rk = self.masks["tokens"]
        t = self.p.tokens.index(m.token)
        out = np.zeros((len(self.contexts), self.p.variables[m.output].size), dtype=bool)
        for n in range(len(self.contexts)):
            before = self.keys(n, True)[0][:-1]
            can, must = rk[before, t], rk[before, t] & (rk[before].sum(axis=1) == 1)
            out[n, int(must.sum()): int(can.sum()) + 1] = True
        return out

    def running_count(self, m: RunningCount) -> np.ndarray:
        """Counts ``1 .. k`` with ``k`` the positions up to the query's (a bound: which tokens
        can repeat is not followed)."""
        out = np.zeros((len(self.contexts), self.p.variables[m.output].size), dtype=bool)
        for n in range(len(self.contexts)):
            out[n, : len(self.keys(n, True)[0])] = True
        return out


def _sums(parts: list[tuple[np.ndarray, bool]], integer: bool
          ) -> tuple[int, np.ndarray] | tuple[float, float]:
    """The sums of one choice per part (``(values, may_be_zero)``): ``(offset, present)`` over
    consecutive integers, or the interval ``(lo, hi)`` when the values are not integers or the
    range passes :data:`MAX_SUMS`."""
    choices = [np.r_[v, 0.0] if zero else v for v, zero in parts]
    lo, hi = sum(c.min() for c in choices), sum(c.max() for c in choices)
    if not integer or hi - lo >= MAX_SUMS:
        return float(lo), float(hi)
    offset, present = 0, np.ones(1, dtype=bool)
    for choice in choices:
        base = int(choice.min())
        row = np.zeros(int(choice.max()) - base + 1)
        row[choice.astype(np.int64) - base] = 1
        present = _convolve(present.astype(np.float64), row) > 0.5
        offset += base
    return offset, present


def _convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Linear convolution of two non-negative 0/1-count vectors, by FFT when they are long."""
    if len(a) * len(b) <= 2**16:
        return np.convolve(a, b)
    n = len(a) + len(b) - 1
    return np.fft.irfft(np.fft.rfft(a, n) * np.fft.rfft(b, n), n)


def _mark(sums: tuple, listed: np.ndarray) -> tuple[np.ndarray, bool]:
    """Which ``listed`` values (sorted) are among ``sums``, and whether a sum is not listed."""
    if isinstance(sums[1], np.ndarray):
        offset, present = sums
        values = offset + np.flatnonzero(present)
        hit = np.isin(listed, values)
        return hit, int(hit.sum()) < len(values)
    lo, hi = sums
    hit = (listed >= lo) & (listed <= hi)
    return hit, True


def value_sets(program: Program) -> ValueSets:
    """The value sets of ``program`` (see the module docstring)."""
    sets = _Sets(program)
    for m in program.modules:
        sets.add(m)
    return ValueSets(sets.contexts, sets.masks, sets.outside)

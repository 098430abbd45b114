"""Short exact rules for a numerical MLP's table: thresholds on one input, straight cuts on two.

A numerical MLP ``out = argmax(relu([x, y] W1 + b1) W2 + b2)`` is piecewise linear in its
inputs, so its table is constant on intervals of one input and on regions bounded by straight
lines of two. :func:`fit` writes a table, over the input values a program can reach, as a
decision list:

- ``exceptions``: ``(key, output)`` pairs tested first (``if (x, y) in {...}: return k``), for
  outputs that occur at only a few keys (thin slivers where several regions meet);
- ``bands`` over the ``outer`` input, in increasing order: band ``b`` holds the outer values
  ``<= upto`` not held by an earlier band (the last band holds the rest);
- in each band, ``cuts`` tested in order: ``q * inner <= p * outer + r`` gives ``out``, then
  ``last``. With one input there is one band and ``p = 0``, ``q = 1`` (``x <= r``).

Every cut between two outputs is a line ``inner = (p * outer + r) / q`` with the simplest slope
``p / q`` that separates them over the whole band (integer inputs; inputs with other values get
horizontal cuts ``inner <= v`` at a value ``v`` of the table, compared exactly). Bands grow
greedily while such lines exist, which gives the fewest bands for the order of the outer values.
:func:`fit` checks its rules on every key of the domain it is given and returns them only when
they reproduce the table there. Host-only code (NumPy and the standard library).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

Number = int | float

RARE = 1 / 64
"""Outputs at no more than this fraction of the keys (and at most :data:`MAX_EXCEPTIONS`) may be
written as exceptions."""
MAX_EXCEPTIONS = 256
"""Most keys written as exceptions."""
MAX_SET_KEYS = 2**12
"""Largest table :func:`fit_sets` is tried on (its greedy search sorts the keys per test)."""
MAX_INTEGER = 2**16
"""Integer inputs up to this magnitude get sloped cuts. Their slopes are the simplest fractions
between two of ``(hi_j - lo_i) / (x_j - x_i)``, so ``q <= 2^18`` and ``|p| <= 2^35``: the cuts
are exact in 64-bit integers."""


@dataclass(frozen=True)
class Cut:
    """``q * inner <= p * outer + r`` -> ``out``; ``p == 0 and q == 1`` reads ``inner <= r``."""

    p: int
    q: int
    r: Number
    out: int


@dataclass(frozen=True)
class Band:
    """The outer values ``<= upto`` (``None``: all values left): ``cuts`` in order, else
    ``last``."""

    upto: Number | None
    cuts: tuple[Cut, ...]
    last: int


@dataclass(frozen=True)
class Rules:
    """A decision list over one input (``outer`` None) or two (``outer`` the index of the input
    the bands split; the other is the ``inner`` one): ``exceptions`` first, then ``bands``."""

    outer: int | None
    exceptions: tuple[tuple[tuple[Number, ...], int], ...]
    bands: tuple[Band, ...]

    def size(self) -> int:
        """Tests plus returns: about the number of lines the rules take as code."""
        n = 2 * len({o for _, o in self.exceptions}) + len(self.exceptions) // 6
        for b in self.bands:
            n += (b.upto is not None) + 2 * len(b.cuts) + 1
        return n

    def evaluate(self, keys: np.ndarray) -> np.ndarray:
        """Outputs for ``keys: (n, l)`` (one input value per column), as the rules' code
        computes them: integer arithmetic on integer inputs, exact comparisons otherwise."""
        keys = np.asarray(keys)
        out = np.full(len(keys), -1, dtype=np.int64)
        todo = np.ones(len(keys), dtype=bool)
        if self.exceptions:
            lookup = dict(self.exceptions)
            maybe = np.isin(keys[:, 0], [k[0] for k, _ in self.exceptions])
            for n in np.flatnonzero(maybe).tolist():
                o = lookup.get(tuple(keys[n].tolist()))
                if o is not None:
                    out[n], todo[n] = o, False
        outer = keys[:, self.outer] if self.outer is not None else np.zeros(len(keys))
        inner = keys[:, 1 - self.outer] if self.outer is not None else keys[:, 0]
        for band in self.bands:
            inside = todo & (outer <= band.upto if band.upto is not None else True)
            todo &= ~inside
            for cut in band.cuts:
                hit = inside & _below(cut, inner, outer)
                out[hit] = cut.out
                inside &= ~hit
            out[inside] = band.last
        return out


def _below(cut: Cut, inner: np.ndarray, outer: np.ndarray) -> np.ndarray:
    """``q * inner <= p * outer + r`` elementwise (``inner <= r`` for a horizontal cut)."""
    if cut.p == 0 and cut.q == 1:
        return inner <= cut.r
    return cut.q * inner.astype(np.int64) <= cut.p * outer.astype(np.int64) + int(cut.r)


def simplest_between(lo: Fraction | float, hi: Fraction | float) -> Fraction:
    """The fraction with the smallest denominator (then numerator) strictly between ``lo < hi``
    (either may be infinite): the Stern-Brocot search."""
    if lo < 0 < hi:
        return Fraction(0)
    if hi <= 0:
        return -simplest_between(-hi, -lo)
    if hi == math.inf:
        return Fraction(math.floor(lo) + 1)
    n = math.floor(lo)
    if n + 1 < hi:
        return Fraction(n + 1)
    lo, hi = Fraction(lo) - n, Fraction(hi) - n  # 0 <= lo < hi <= 1
    if lo == 0:
        return n + Fraction(1, math.floor(1 / hi) + 1)
    return n + 1 / simplest_between(1 / hi, 1 / lo)


Bound = Fraction | float
"""An exact slope bound, or an infinite float."""


@dataclass
class _Rows:
    """The domain as rows of the outer input: ``xs (m,)`` sorted, and per row the labels'
    runs along the inner input: ``sig[i]`` the run labels, ``lo[i][b]`` the last inner value of
    run ``b``, ``hi[i][b]`` the first of run ``b + 1``. ``segment[i]``: the first row of the
    stretch of consecutive rows with row ``i``'s signature."""

    xs: np.ndarray
    sig: list[tuple[int, ...]]
    lo: list[np.ndarray]
    hi: list[np.ndarray]
    segment: list[int]

    def stacked(self, s: int, cache: dict[int, tuple[np.ndarray, np.ndarray]]
                ) -> tuple[np.ndarray, np.ndarray]:
        """``lo, hi: (rows, k)`` from row ``s`` to the end of its segment."""
        first = self.segment[s]
        if first not in cache:
            end = first
            while end < len(self.xs) and self.segment[end] == first:
                end += 1
            cache[first] = (np.stack(self.lo[first:end]), np.stack(self.hi[first:end]))
        lo, hi = cache[first]
        return lo[s - first:], hi[s - first:]


def _rows(outer: np.ndarray, inner: np.ndarray, labels: np.ndarray) -> _Rows:
    """The rows of a domain sorted by ``(outer, inner)``."""
    n = len(outer)
    new_row = np.r_[True, outer[1:] != outer[:-1]]
    starts = np.flatnonzero(new_row)
    run_start = new_row | np.r_[True, labels[1:] != labels[:-1]]
    # the runs' first labels by row, and each boundary's last and first inner values
    row_of_run = np.cumsum(new_row)[run_start] - 1
    cut_at = np.flatnonzero(run_start & ~new_row)  # first key of a run that is not a row's first
    row_of_cut = np.cumsum(new_row)[cut_at] - 1
    split_runs = np.searchsorted(row_of_run, np.arange(1, len(starts)))
    split_cuts = np.searchsorted(row_of_cut, np.arange(1, len(starts)))
    sig = [tuple(x.tolist()) for x in np.split(labels[run_start], split_runs)] if n else []
    lo = np.split(inner[cut_at - 1], split_cuts)
    hi = np.split(inner[cut_at], split_cuts)
    segment = [0] * len(sig)
    for i in range(1, len(sig)):
        segment[i] = segment[i - 1] if sig[i] == sig[i - 1] else i
    return _Rows(outer[starts], sig, lo, hi, segment)


def _extreme(num: np.ndarray, den: np.ndarray, lowest: bool) -> Fraction:
    """The exact least (``lowest``) or greatest of the fractions ``num / den`` (int64,
    ``den > 0``): the float extreme, corrected while another fraction beats it exactly."""
    i = int(np.argmin(num / den) if lowest else np.argmax(num / den))
    while True:
        beat = num * den[i] < num[i] * den if lowest else num * den[i] > num[i] * den
        if not beat.any():
            return Fraction(int(num[i]), int(den[i]))
        i = int(np.flatnonzero(beat)[0])


def _band_end(rows: _Rows, s: int, integer: bool, cache: dict
              ) -> tuple[int, list[Bound], list[Bound]]:
    """The end ``e`` of the longest band from row ``s``: rows ``s .. e-1`` have one run
    signature and lines between their runs exist. Returns ``e`` and the exact bounds on each
    cut's slope ``a``: ``a (x_j - x_i) < hi_j - lo_i`` and ``> lo_j - hi_i`` for ``x_i < x_j``
    (integer inputs; horizontal cuts otherwise, which need ``max lo < min hi``)."""
    sig = rows.sig[s]
    k = len(sig) - 1
    a_lo: list[Bound] = [-math.inf] * k
    a_hi: list[Bound] = [math.inf] * k
    lo, hi = rows.stacked(s, cache)
    n = len(lo)
    if integer:
        lo, hi, xs = lo.astype(np.int64), hi.astype(np.int64), rows.xs.astype(np.int64)
    e = s + 1
    while e < s + n:
        j = e - s
        if k and integer:
            dx = xs[e] - xs[s:e]
            new_lo, new_hi = list(a_lo), list(a_hi)
            for b in range(k):
                new_hi[b] = min(new_hi[b], _extreme(hi[j, b] - lo[:j, b], dx, True))
                new_lo[b] = max(new_lo[b], _extreme(lo[j, b] - hi[:j, b], dx, False))
                if not new_lo[b] < new_hi[b]:
                    return e, a_lo, a_hi
            a_lo, a_hi = new_lo, new_hi
        elif k and not (lo[: j + 1].max(axis=0) < hi[: j + 1].min(axis=0)).all():
            return e, a_lo, a_hi
        e += 1
    return e, a_lo, a_hi


def _line(xs: np.ndarray, lo: np.ndarray, a_lo: Bound, a_hi: Bound) -> tuple[int, int, int]:
    """Integers ``p, q > 0, r`` with ``q lo <= p x + r < q hi`` at every row (``lo, hi: (rows,)``
    integers): the slope ``p / q`` is the simplest in the bounds ``(a_lo, a_hi)`` of
    :func:`_band_end`, so some offset passes every line between ``lo`` and ``hi``, and ``r`` is
    the least such offset."""
    a = simplest_between(a_lo, a_hi)
    p, q = a.numerator, a.denominator
    x, lo = xs.astype(np.int64), lo.astype(np.int64)
    return p, q, int((q * lo - p * x).max())


def _bands(rows: _Rows, integer: bool, budget: float) -> list[Band] | None:
    """The greedy bands of ``rows`` (see the module docstring), or None once their size passes
    ``budget``."""
    bands: list[Band] = []
    size, s, m = 0, 0, len(rows.xs)
    cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    while s < m:
        e, a_lo, a_hi = _band_end(rows, s, integer, cache)
        sig = rows.sig[s]
        lo = rows.stacked(s, cache)[0][: e - s]
        cuts = []
        for b in range(len(sig) - 1):
            p, q, r = (_line(rows.xs[s:e], lo[:, b], a_lo[b], a_hi[b]) if integer
                       else (0, 1, lo[:, b].max().item()))
            cuts.append(Cut(p, q, r, sig[b]))
        last = e >= m
        bands.append(Band(None if last else rows.xs[e - 1].item(), tuple(cuts), sig[-1]))
        size += (not last) + 2 * len(cuts) + 1
        if size > budget:
            return None
        s = e
    return bands


def fit(keys: np.ndarray, labels: np.ndarray) -> Rules | None:
    """The shortest rules found for ``labels[n]`` at ``keys[n]: (n, l)`` (``l`` 1 or 2 input
    values per key, distinct keys): both inputs tried as the outer one (the one with fewer
    values first), and the rarest outputs as exceptions; checked on every key (None if they
    would differ anywhere, which the construction rules out)."""
    keys, labels = np.asarray(keys), np.asarray(labels, dtype=np.int64)
    n, width = keys.shape
    integer = bool(np.all(np.abs(keys) <= MAX_INTEGER) and np.all(keys == np.round(keys)))
    values, counts = np.unique(labels, return_counts=True)
    rare, total, options = [], 0, [()]
    for c, v in sorted(zip(counts.tolist(), values.tolist())):
        total += c
        if c > max(1.0, RARE * n) or total > MAX_EXCEPTIONS or len(rare) == len(values) - 1:
            break
        rare.append(v)
        options.append(tuple(rare))
    outers = [None] if width == 1 else sorted(
        (0, 1), key=lambda i: len(np.unique(keys[:, i])))
    best: Rules | None = None
    for outer in outers:
        out_v = keys[:, outer] if outer is not None else np.zeros(n)
        in_v = keys[:, 1 - outer] if outer is not None else keys[:, 0]
        order = np.lexsort((in_v, out_v))
        for exc in options:
            keep = ~np.isin(labels[order], exc)
            at = order[~keep]
            exceptions = tuple(sorted(zip(map(tuple, keys[at].tolist()), labels[at].tolist())))
            spent = Rules(outer, exceptions, ()).size()
            budget = (best.size() if best is not None else math.inf) - spent
            kept = order[keep]
            bands = _bands(_rows(out_v[kept], in_v[kept], labels[kept]), integer, budget)
            if bands is not None:
                best = Rules(outer, exceptions, tuple(bands))
    if best is not None and not np.array_equal(best.evaluate(keys), labels):
        return None
    return best


@dataclass(frozen=True)
class SetTest:
    """``argument in values`` -> ``out`` (``arg`` None: the key of both arguments, ``values``
    pairs); values are indices into the arguments' values."""

    arg: int | None
    values: tuple
    out: int


def fit_sets(keys: np.ndarray, labels: np.ndarray) -> tuple[list[SetTest], int]:
    """A decision list for a table over two categorical arguments: tests ``arg in {...}`` and
    ``key in {...}`` in order, then a default. ``keys: (n, 2)`` value indices, ``labels: (n,)``.

    Greedy: while the keys left have more than one output, the values of one argument whose
    keys left all have one output are *pure*; the pure values with one output, over one
    argument, covering the most keys left become the next test, and their keys leave. When
    no value is pure, the keys left are tested as pairs, one test per output but the most
    common, which is the default. Every key gets its label: a test only takes keys left whose
    output it returns."""
    keys, labels = np.asarray(keys), np.asarray(labels)
    tests: list[SetTest] = []
    left = np.ones(len(labels), dtype=bool)
    while len(np.unique(labels[left])) > 1:
        best: tuple[int, int, int, np.ndarray] | None = None
        for arg in range(keys.shape[1]):
            col, lab = keys[left, arg], labels[left]
            pairs = np.unique(np.stack([col, lab], axis=1), axis=0)
            values, n_out = np.unique(pairs[:, 0], return_counts=True)
            pure = pairs[np.isin(pairs[:, 0], values[n_out == 1])]
            for out in np.unique(pure[:, 1]).tolist():
                vals = pure[pure[:, 1] == out, 0]
                cover = int(np.isin(col, vals).sum())
                if best is None or cover > best[0]:
                    best = (cover, arg, out, vals)
        if best is None:
            break
        _, arg, out, vals = best
        tests.append(SetTest(arg, tuple(vals.tolist()), out))
        left &= ~np.isin(keys[:, arg], vals)
    outs, counts = np.unique(labels[left], return_counts=True)
    default = int(outs[np.argmax(counts)])
    for out in outs.tolist():
        if out != default:
            at = left & (labels == out)
            tests.append(SetTest(None, tuple(map(tuple, keys[at].tolist())), out))
    return tests, default

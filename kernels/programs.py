"""numba kernel interpreting a compiled program IR one sequence at a time.

Positions are bits: for every categorical variable the kernel keeps, per value, the bitmask of
the positions holding it, so a head finds a query's matching keys with one AND, the nearest
match with a count-trailing/leading-zeros, and a selector width with a popcount (``O(1)`` per
query instead of a scan over keys).

Same semantics as the array reference :func:`tpcore.programs.interpret.run_reference` (tests
compare the two on random programs): select_closest by the head's rule, select + aggregate_sum,
MLP lookups, prefix and running counts, the expert gate (its scores added in the same
order), the classifier summed in feature order in float64 (first maximum wins), and the BOS/EOS
pass-through. The layout of the compiled arrays is documented in
:func:`tpcore.programs.interpret.compile_program`.
"""

from __future__ import annotations

import numba
import numpy as np
from tpcore.kernels.program_opcodes import (
    CAT_HEAD,
    EXPERT_COUNT,
    MLP,
    PREFIX_COUNT,
    RUNNING_COUNT,
)

from tpcore.errors import TpcoreError

ONE = np.uint64(1)
DEBRUIJN = np.uint64(0x03F79D71B4CA8B09)
CTZ_TABLE = np.zeros(64, dtype=np.int64)
for _i in range(64):
    CTZ_TABLE[(((1 << _i) * int(DEBRUIJN)) % (1 << 64)) >> 58] = _i
MAX_LEN = 64
"""Positions are bits of a uint64: the kernel runs sequences of at most 64 tokens."""


@numba.njit(cache=True, inline="always")
def _ctz(x):
    """Index of the lowest set bit of ``x != 0`` (de Bruijn multiplication)."""
    low = x & (~x + ONE)
    return CTZ_TABLE[(low * DEBRUIJN) >> np.uint64(58)]


@numba.njit(cache=True, inline="always")
def _msb(x):
    """Index of the highest set bit of ``x != 0``."""
    for s in (1, 2, 4, 8, 16, 32):
        x |= x >> np.uint64(s)
    return _ctz((x >> ONE) + ONE)


@numba.njit(cache=True, inline="always")
def _popcount(x):
    x = x - ((x >> ONE) & np.uint64(0x5555555555555555))
    m2 = np.uint64(0x3333333333333333)
    x = (x & m2) + ((x >> np.uint64(2)) & m2)
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@numba.njit(cache=True, inline="always")
def _attend(m, i, published):
    """Key attended by query ``i`` given the bitmask ``m`` of visible matching keys.

    closest: the nearest other match (the left one on equal distance), else ``i`` if it
    matches, else 0. published: ranks ``|i - j|`` and ``popcount(m)`` for ``i`` itself, the
    first minimum in position order (left neighbour, the query, right neighbour), 0 if none.
    """
    if m == 0:
        return 0
    bit = ONE << np.uint64(i)
    others = m & ~bit
    left = others & (bit - ONE)
    right = (others >> np.uint64(i)) >> ONE
    big = 1 << 20
    dl = i - _msb(left) if left != 0 else big
    dr = _ctz(right) + 1 if right != 0 else big
    if published:
        best, rank = 0, big
        if dl < big:
            best, rank = i - dl, dl
        count = _popcount(m)
        if ((m & bit) != 0) & (count < rank):
            best, rank = i, count
        if dr < rank:
            best = i + dr
        return best
    if others == 0:
        return i
    return i - dl if dl <= dr else i + dr


@numba.njit(cache=True)
def _num_search(num_vals, num_off, num_size, slot, x):
    """Index of ``x`` among the sorted values ``num_vals[num_off[slot]:][:num_size[slot]]`` of
    numerical slot ``slot`` (binary search)."""
    lo = num_off[slot]
    k = np.searchsorted(num_vals[lo : lo + num_size[slot]], x)
    if k < num_size[slot]:
        if num_vals[lo + k] == x:
            return np.int64(k)
    return np.int64(-1)


@numba.njit(cache=True)
def _num_index(num_vals, num_off, num_size, num_lo, slot, x):
    """Index of ``x`` among the values of numerical slot ``slot``; -1 when absent.
    ``num_lo[slot]``: the first value when the values are ``lo, lo + 1, ...`` (direct index),
    else NaN (binary search). Written with ``&`` rather than ``and``, which numba compiles into
    much slower code."""
    lo = num_lo[slot]
    if lo != lo:
        return _num_search(num_vals, num_off, num_size, slot, x)
    d = x - lo
    k = np.int64(d)
    return k if (k == d) & (k >= 0) & (k < num_size[slot]) else np.int64(-1)


@numba.njit(cache=True)
def _index_masks(cat, masks, cat_off, slot, length):
    """``masks[cat_off[slot] + v]``: bitmask of the positions where categorical slot ``slot``
    has value v."""
    masks[cat_off[slot] : cat_off[slot + 1]] = 0
    for j in range(length):
        masks[cat_off[slot] + cat[slot, j]] |= ONE << np.uint64(j)


@numba.njit(cache=True)
def _expert_count(fparams, off, n_tok, f32, tokens, length, hist, dst):
    """The expert the gate ``argmax_e b_e + sum_v W[e, v] h[v]`` picks (first maximum, scores
    added in token order), at each of the ``length`` positions of ``tokens``, into ``dst``.
    ``fparams[off:]``: ``W`` row-major then ``b``; ``hist``: scratch of at least ``n_tok``;
    ``f32``: divide relative frequencies in float32."""
    hist[:n_tok] = 0.0
    for i in range(length):
        hist[tokens[i]] += 1.0
    top = hist[:n_tok].max()
    best, best_score = 0, 0.0
    for e in range(5):
        score = fparams[off + 5 * n_tok + e]
        for v in range(n_tok):
            score += fparams[off + e * n_tok + v] * hist[v]
        if (e == 0) | (score > best_score):
            best, best_score = e, score
    for i in range(length):
        h = hist[tokens[i]]
        if best == 0:
            dst[i] = length
        elif best == 1:
            dst[i] = h
        elif best == 2:
            dst[i] = 1.0 if h == top else 0.0
        elif best == 3:
            dst[i] = 1.0 if h == 1.0 else 0.0
        elif f32:
            dst[i] = np.float32(h) / np.float32(length)
        else:
            dst[i] = h / length


@numba.njit(cache=True)
def _run(ids, lengths, ops, params, fparams, n_cat, n_num, n_tokens, cat_off, num_vals, num_off,
         num_size, num_lo, feat_ops, w_off, weights, bias, allowed, framing, causal, inputs, out):
    bsz, n = ids.shape
    n_cls = bias.shape[0]
    cat = np.zeros((n_cat, n), np.int64)
    masks = np.zeros(cat_off[n_cat], np.uint64)
    num = np.zeros((n_num, n), np.float64)
    numi = np.full((n_num, n), -1, np.int64)  # index of each numerical value in its value set
    ones_index = _num_index(num_vals, num_off, num_size, num_lo, inputs[2], 1.0)
    logits = np.empty(n_cls)
    hist = np.zeros(n_tokens)
    for b in range(bsz):
        length = lengths[b]
        for i in range(length):
            cat[inputs[0], i] = ids[b, i]
            cat[inputs[1], i] = i
            num[inputs[2], i] = 1.0
            numi[inputs[2], i] = ones_index
        _index_masks(cat, masks, cat_off, inputs[0], length)
        _index_masks(cat, masks, cat_off, inputs[1], length)
        visible_all = (ONE << np.uint64(length)) - ONE if length < 64 else ~np.uint64(0)
        for o in range(ops.shape[0]):
            kind, a, bb, c, dst, off, stride, flag = ops[o]
            if kind == PREFIX_COUNT:  # of token a; values 0 .. max_len - 1, so index = count
                count = 0
                for i in range(length):
                    num[dst, i] = count
                    numi[dst, i] = count
                    if cat[inputs[0], i] == a:
                        count += 1
                continue
            if kind == RUNNING_COUNT:  # values 1 .. max_len, so index = count - 1
                hist[:] = 0.0
                for i in range(length):
                    hist[cat[inputs[0], i]] += 1.0
                    num[dst, i] = hist[cat[inputs[0], i]]
                    numi[dst, i] = np.int64(num[dst, i]) - 1
                continue
            if kind == EXPERT_COUNT:  # gate parameters at fparams[a:], stride tokens
                _expert_count(fparams, a, stride, flag, cat[inputs[0]], length, hist, num[dst])
                for i in range(length):
                    numi[dst, i] = _num_index(num_vals, num_off, num_size, num_lo, dst,
                                              num[dst, i])
                continue
            if kind == MLP:
                for i in range(length):
                    if flag:
                        idx = numi[a, i]
                        if (bb >= 0) & (idx >= 0):
                            k2 = numi[bb, i]
                            idx = -1 if k2 < 0 else idx * stride + k2
                    else:
                        idx = cat[a, i]
                        if bb >= 0:
                            idx = idx * stride + cat[bb, i]
                    cat[dst, i] = c if idx < 0 else params[off + idx]
                _index_masks(cat, masks, cat_off, dst, length)
                continue
            for i in range(length):
                target = params[off + cat[a, i]]
                m = np.uint64(0)
                if target >= 0:
                    visible = ((ONE << np.uint64(i)) << ONE) - ONE if causal else visible_all
                    m = masks[cat_off[bb] + target] & visible
                if kind == CAT_HEAD:
                    cat[dst, i] = cat[c, _attend(m, i, flag)]
                else:
                    if c == inputs[2]:
                        s = float(_popcount(m))
                    else:
                        s = 0.0
                        while m != 0:
                            s += num[c, _ctz(m)]
                            m &= m - ONE
                    num[dst, i] = s
                    lo = num_lo[dst]
                    if lo != lo:
                        numi[dst, i] = _num_search(num_vals, num_off, num_size, dst, s)
                    else:  # consecutive values from lo: direct index (no call, no ``and``)
                        k = np.int64(s - lo)
                        ok = (k == s - lo) & (k >= 0) & (k < num_size[dst])
                        numi[dst, i] = k if ok else np.int64(-1)
            if kind == CAT_HEAD:
                _index_masks(cat, masks, cat_off, dst, length)
        for i in range(length):
            for t in range(n_cls):
                logits[t] = bias[t]
            for f in range(feat_ops.shape[0]):
                slot = feat_ops[f, 1]
                if feat_ops[f, 0] == 0:
                    row = w_off[f] + cat[slot, i]
                    for t in range(n_cls):
                        logits[t] = logits[t] + weights[row, t]
                else:
                    x = num[slot, i]
                    for t in range(n_cls):
                        logits[t] = logits[t] + x * weights[w_off[f], t]
            best = -1
            for t in range(n_cls):
                if allowed[t]:
                    if best < 0:
                        best = t
                    elif logits[t] > logits[best]:
                        best = t
            out[b, i] = best
        if (framing[0] >= 0) & (length > 0):
            if ids[b, 0] == framing[0]:
                out[b, 0] = framing[1]
        if (framing[2] >= 0) & (length > 0):
            if ids[b, length - 1] == framing[2]:
                out[b, length - 1] = framing[3]


@numba.njit(cache=True, parallel=True)
def _run_chunks(ids, lengths, ops, params, fparams, n_cat, n_num, n_tokens, cat_off, num_vals,
                num_off, num_size, num_lo, feat_ops, w_off, weights, bias, allowed, framing,
                causal, inputs, out, chunks):
    """:func:`_run` on ``chunks`` contiguous slices of the batch, one numba thread each."""
    bsz = ids.shape[0]
    for c in numba.prange(chunks):
        lo, hi = c * bsz // chunks, (c + 1) * bsz // chunks
        _run(ids[lo:hi], lengths[lo:hi], ops, params, fparams, n_cat, n_num, n_tokens, cat_off,
             num_vals, num_off, num_size, num_lo, feat_ops, w_off, weights, bias, allowed,
             framing, causal, inputs, out[lo:hi])


def run_compiled(compiled: dict[str, np.ndarray], ids: np.ndarray, lengths: np.ndarray,
                 threads: int = 1) -> np.ndarray:
    """Predictions ``(B, N)`` int64 for ``ids: (B, N)``, ``lengths: (B,)``; ``-1`` past lengths.

    ``threads > 1`` splits the batch over that many numba threads (at most the configured
    number); each sequence is still interpreted by the same single-threaded loop.
    """
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    if ids.shape[1] > MAX_LEN:
        raise TpcoreError(f"the numba kernel runs sequences of at most {MAX_LEN} tokens, got "
                          f"{ids.shape[1]}; use engine='numpy'")
    out = np.full(ids.shape, -1, dtype=np.int64)
    c = compiled
    args = (ids, lengths, c["ops"], c["params"], c["fparams"], int(c["n_cat"]), int(c["n_num"]),
            int(c["n_tokens"]), c["cat_off"], c["num_vals"], c["num_off"], c["num_size"],
            c["num_lo"], c["feat_ops"], c["w_off"], c["weights"], c["bias"], c["allowed"],
            c["framing"], bool(c["causal"]), c["inputs"], out)
    if threads > 1:
        threads = min(threads, numba.config.NUMBA_NUM_THREADS)
        numba.set_num_threads(threads)
        _run_chunks(*args, 4 * threads)
    else:
        _run(*args)
    return out

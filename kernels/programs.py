"""numba kernel interpreting a compiled program IR one sequence at a time.

Same semantics as the array reference :func:`tpcore.programs.interpret.run_reference` (tests
compare the two on random programs): select_closest by the head's rule, select + aggregate_sum,
MLP lookups, the classifier summed in feature order in float64 (first maximum wins), and the
BOS/EOS pass-through. The layout of the compiled arrays is documented in
:func:`tpcore.programs.interpret.compile_program`.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _attend(cat, bb, target, i, hi, n, published):
    """Key position attended by query ``i``: ``target`` matched in ``cat[bb, :hi]``, 0 if none."""
    best = -1
    best_rank = 8 * n * (n + 1)
    count = 0
    if published:
        for j in range(hi):
            if cat[bb, j] == target:
                count += 1
    for j in range(hi):
        if cat[bb, j] != target:
            continue
        if published:
            r = count if j == i else abs(i - j)
        elif j == i:
            r = 4 * n
        elif j < i:
            r = 2 * (i - j) - 1
        else:
            r = 2 * (j - i)
        if r < best_rank:
            best_rank = r
            best = j
    return 0 if best < 0 else best


@numba.njit(cache=True)
def _num_index(num_vals, num_size, slot, x):
    """Index of ``x`` among the sorted values of numerical slot ``slot``; -1 when absent."""
    k = np.searchsorted(num_vals[slot, : num_size[slot]], x)
    if k < num_size[slot] and num_vals[slot, k] == x:
        return k
    return -1


@numba.njit(cache=True)
def _run(ids, lengths, ops, params, n_cat, n_num, num_vals, num_size, feat_ops, w_off, weights,
         bias, allowed, framing, causal, inputs, out):
    bsz, n = ids.shape
    n_cls = bias.shape[0]
    cat = np.zeros((n_cat, n), np.int64)
    num = np.zeros((n_num, n), np.float64)
    logits = np.empty(n_cls)
    for b in range(bsz):
        length = lengths[b]
        for i in range(length):
            cat[inputs[0], i] = ids[b, i]
            cat[inputs[1], i] = i
            num[inputs[2], i] = 1.0
        for o in range(ops.shape[0]):
            kind, a, bb, c, dst, off, stride, flag = ops[o]
            if kind == 2:
                for i in range(length):
                    if flag:
                        idx = _num_index(num_vals, num_size, a, num[a, i])
                        if bb >= 0 and idx >= 0:
                            k2 = _num_index(num_vals, num_size, bb, num[bb, i])
                            idx = -1 if k2 < 0 else idx * stride + k2
                    else:
                        idx = cat[a, i]
                        if bb >= 0:
                            idx = idx * stride + cat[bb, i]
                    cat[dst, i] = c if idx < 0 else params[off + idx]
                continue
            for i in range(length):
                target = params[off + cat[a, i]]
                hi = i + 1 if causal else length
                if kind == 0:
                    j = _attend(cat, bb, target, i, hi, n, flag) if target >= 0 else 0
                    cat[dst, i] = cat[c, j]
                else:
                    s = 0.0
                    if target >= 0:
                        for j in range(hi):
                            if cat[bb, j] == target:
                                s += num[c, j]
                    num[dst, i] = s
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
                if allowed[t] and (best < 0 or logits[t] > logits[best]):
                    best = t
            out[b, i] = best
        if framing[0] >= 0 and length > 0 and ids[b, 0] == framing[0]:
            out[b, 0] = framing[1]
        if framing[2] >= 0 and length > 0 and ids[b, length - 1] == framing[2]:
            out[b, length - 1] = framing[3]


def run_compiled(compiled: dict[str, np.ndarray], ids: np.ndarray,
                 lengths: np.ndarray) -> np.ndarray:
    """Predictions ``(B, N)`` int64 for ``ids: (B, N)``, ``lengths: (B,)``; ``-1`` past lengths."""
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    out = np.full(ids.shape, -1, dtype=np.int64)
    c = compiled
    _run(ids, lengths, c["ops"], c["params"], int(c["n_cat"]), int(c["n_num"]), c["num_vals"],
         c["num_size"], c["feat_ops"], c["w_off"], c["weights"], c["bias"], c["allowed"],
         c["framing"],
         bool(c["causal"]), c["inputs"], out)
    return out

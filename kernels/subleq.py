"""Batched SUBLEQ interpreter: a numba kernel and its plain NumPy reference (same semantics).

Programs use absolute punchcard columns: ``commands: (B, k, 3)`` int64 ``(a, b, c)`` with memory
columns ``s..s+m-1`` and instruction columns ``s+m..s+m+k-1`` (the last is EOF); ``memory: (B, m)``
int64. One step at ``pc != EOF``: ``mem[b] = wrap_N(mem[b] - mem[a])``; ``pc = c if mem[b] <= 0
else pc + 1``. Each program runs until EOF or ``max_steps`` steps. Returns ``(memory, pc, steps)``
with ``memory`` a new array; a program that has not reached EOF has ``pc != s + m + k - 1``.
Inputs are assumed validated (``tpcore.looped.program.validate``).
"""

from __future__ import annotations

import numba
import numpy as np


def run_batch_reference(commands: np.ndarray, memory: np.ndarray, s: int, N: int,
                        max_steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plain NumPy/Python reference of :func:`run_batch`."""
    B, k, _ = commands.shape
    m = memory.shape[1]
    mem = memory.astype(np.int64).copy()
    pcs = np.full(B, s + m, dtype=np.int64)
    steps = np.zeros(B, dtype=np.int64)
    eof, half, size = s + m + k - 1, 1 << (N - 1), 1 << N
    for i in range(B):
        pc = s + m
        while pc != eof and steps[i] < max_steps:
            a, b, c = commands[i, pc - s - m]
            mem[i, b - s] = (mem[i, b - s] - mem[i, a - s] + half) % size - half
            pc = c if mem[i, b - s] <= 0 else pc + 1
            steps[i] += 1
        pcs[i] = pc
    return mem, pcs, steps


@numba.njit(cache=True, parallel=True)
def _run(commands, mem, pcs, steps, s, N, max_steps):
    B, k, _ = commands.shape
    m = mem.shape[1]
    eof = s + m + k - 1
    half = np.int64(1) << (N - 1)
    mask = (np.int64(1) << N) - 1
    for i in numba.prange(B):
        pc = s + m
        n = 0
        while pc != eof and n < max_steps:
            j = pc - s - m
            a = commands[i, j, 0] - s
            b = commands[i, j, 1] - s
            v = ((mem[i, b] - mem[i, a] + half) & mask) - half
            mem[i, b] = v
            pc = commands[i, j, 2] if v <= 0 else pc + 1
            n += 1
        pcs[i] = pc
        steps[i] = n


def run_batch(commands: np.ndarray, memory: np.ndarray, s: int, N: int,
              max_steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """numba kernel (parallel over programs); same contract as :func:`run_batch_reference`."""
    commands = np.ascontiguousarray(commands, dtype=np.int64)
    mem = np.array(memory, dtype=np.int64, order="C")
    B = commands.shape[0]
    pcs = np.zeros(B, dtype=np.int64)
    steps = np.zeros(B, dtype=np.int64)
    _run(commands, mem, pcs, steps, s, N, max_steps)
    return mem, pcs, steps


@numba.njit(cache=True)
def run_sparse(XT, iterations, g, hard, tol, head_off, lam, kq_off, K_ptr, K_idx, K_val, Q_ptr,
               Q_idx, Q_val, v_off, v_rows, V_ptr, V_idx, V_val, W1_ptr, W1_idx, W1_val, b1,
               W2_ptr, W2_idx, W2_val, b2, b2r_off, b2r, ug_off, units_g, ul_off, units_l):
    """``iterations`` passes of a stack of Eq. 1 layers on the sparse path, in place on
    ``XT: (B, n, d)`` (tokens as rows, so each column of X is contiguous).

    Per layer the semantics are those of ``tpcore.looped.layer.layer_forward_sparse`` (its NumPy
    reference): query columns ``< g`` attend to every key, the others to keys ``0..g-1`` and
    themselves; FF units of ``units_g`` run on columns ``< g`` and of ``units_l`` on the others.
    Weights of all layers are packed: layer ``l`` owns heads ``head_off[l]:head_off[l+1]``; head
    ``h`` owns the K/Q CSR rows ``kq_off[h]:kq_off[h+1]`` and the V CSR rows (output rows
    ``v_rows``) ``v_off[h]:v_off[h+1]``; FF units are CSR rows of ``W1`` (inputs) and ``W2``
    (outputs); ``b2: (layers, d)`` with non-zero rows ``b2r[b2r_off[l]:b2r_off[l+1]]``.
    Each program runs all its iterations while its ``(n, d)`` block is in cache. Serial: on the
    shared 2-core machine numba's thread pool costs more than it gains here.
    """
    B, n, d = XT.shape
    L = head_off.shape[0] - 1
    kmax, vmax, umax = 1, 1, 1
    for h in range(lam.shape[0]):
        kmax = max(kmax, kq_off[h + 1] - kq_off[h])
    for l in range(L):
        vmax = max(vmax, v_off[head_off[l + 1]] - v_off[head_off[l]])
        umax = max(umax, ug_off[l + 1] - ug_off[l], ul_off[l + 1] - ul_off[l])
    KX = np.empty((n, kmax))
    QX = np.empty((n, kmax))
    VX = np.empty((n, vmax))
    out = np.empty((n, vmax))
    w = np.empty(n)
    pre = np.empty(umax)
    for b in range(B):
        Xb = XT[b]
        for _ in range(iterations):
            for l in range(L):
                _attention(Xb, g, hard, tol, head_off[l], head_off[l + 1], lam, kq_off, K_ptr,
                           K_idx, K_val, Q_ptr, Q_idx, Q_val, v_off, v_rows, V_ptr, V_idx,
                           V_val, KX, QX, VX, out, w)
                _feed_forward(Xb, g, W1_ptr, W1_idx, W1_val, b1, W2_ptr, W2_idx, W2_val,
                              b2[l], b2r[b2r_off[l]:b2r_off[l + 1]],
                              units_g[ug_off[l]:ug_off[l + 1]],
                              units_l[ul_off[l]:ul_off[l + 1]], pre)


@numba.njit(cache=True)
def _attention(Xb, g, hard, tol, h0, h1, lam, kq_off, K_ptr, K_idx, K_val, Q_ptr, Q_idx, Q_val,
               v_off, v_rows, V_ptr, V_idx, V_val, KX, QX, VX, out, w):
    """``Xb += sum_h V_h X P_h`` for heads ``h0..h1-1`` of one program ``Xb: (n, d)``; every
    head reads ``Xb`` before any writes."""
    n = Xb.shape[0]
    vbase = v_off[h0]
    vtot = v_off[h1] - vbase
    if vtot == 0:
        return
    for h in range(h0, h1):
        k0, k1 = kq_off[h], kq_off[h + 1]
        v0, v1 = v_off[h], v_off[h + 1]
        for j in range(n):
            for r in range(k0, k1):
                acc_k = 0.0
                for p in range(K_ptr[r], K_ptr[r + 1]):
                    acc_k += K_val[p] * Xb[j, K_idx[p]]
                acc_q = 0.0
                for p in range(Q_ptr[r], Q_ptr[r + 1]):
                    acc_q += Q_val[p] * Xb[j, Q_idx[p]]
                KX[j, r - k0] = acc_k
                QX[j, r - k0] = acc_q
            for r in range(v0, v1):
                acc_v = 0.0
                for p in range(V_ptr[r], V_ptr[r + 1]):
                    acc_v += V_val[p] * Xb[j, V_idx[p]]
                VX[j, r - vbase] = acc_v
        for q in range(n):
            nk = n if q < g else g + 1
            top = -np.inf
            for t in range(nk):
                key = t if (q < g or t < g) else q
                s = 0.0
                for r in range(k1 - k0):
                    s += KX[key, r] * QX[q, r]
                w[t] = s
                if s > top:
                    top = s
            total = 0.0
            for t in range(nk):
                if hard:
                    w[t] = 1.0 if w[t] >= top - tol else 0.0
                else:
                    w[t] = np.exp(lam[h] * (w[t] - top))
                total += w[t]
            for r in range(v0 - vbase, v1 - vbase):
                acc = 0.0
                for t in range(nk):
                    key = t if (q < g or t < g) else q
                    acc += w[t] * VX[key, r]
                out[q, r] = acc / total
    for q in range(n):
        for r in range(vtot):
            Xb[q, v_rows[vbase + r]] += out[q, r]


@numba.njit(cache=True)
def _feed_forward(Xb, g, W1_ptr, W1_idx, W1_val, b1, W2_ptr, W2_idx, W2_val, b2, b2_rows,
                  units_g, units_l, pre):
    """``Xb += W2 ReLU(W1 Xb + b1) + b2`` per column with the column's unit list; each column
    reads all its pre-activations before writing."""
    n = Xb.shape[0]
    for q in range(n):
        row = Xb[q]
        units = units_g if q < g else units_l
        for i in range(units.shape[0]):
            u = units[i]
            z = b1[u]
            for p in range(W1_ptr[u], W1_ptr[u + 1]):
                z += W1_val[p] * row[W1_idx[p]]
            pre[i] = z
        for i in range(units.shape[0]):
            if pre[i] > 0.0:
                u = units[i]
                for p in range(W2_ptr[u], W2_ptr[u + 1]):
                    row[W2_idx[p]] += W2_val[p] * pre[i]
        for r in b2_rows:
            row[r] += b2[r]

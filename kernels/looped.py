"""The numba kernel of the looped transformer's sparse path: :func:`run_sparse` runs a stack of
Eq. 1 layers packed as CSR rows (``tpcore.looped.compiled``) with scratchpad-only global
attention. Its NumPy reference is ``tpcore.looped.layer.layer_forward_sparse``, which the tests
compare it with.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def _row_times_column(ptr, idx, val, r, X, j):
    """Row ``r`` of a CSR matrix times column ``j`` of the layer input (``X[j]``, tokens as rows):
    ``sum_p val[p] X[j, idx[p]]`` in storage order."""
    acc = 0.0
    for p in range(ptr[r], ptr[r + 1]):
        acc += val[p] * X[j, idx[p]]
    return acc


@numba.njit(cache=True)
def _project(X, h0, h1, g, todo, kq_off, K_ptr, K_idx, K_val, Q_ptr, Q_idx, Q_val, v_off, V_ptr,
             V_idx, V_val, KT, QT, VX, SS, ksame, vsame):
    """Heads ``h0..h1-1``'s key and query rows of the columns ``j`` of ``X: (n, d)`` with
    ``todo[j]`` (and the scratchpad ``j < g``) into ``KT[:, j], QT[:, j]``, their value rows into
    ``VX[j]`` and, for ``j >= g``, the self scores ``SS[h, j]`` (all heads packed: head ``h`` owns
    rows ``kq_off[h]:kq_off[h+1]`` and ``v_off[h]:v_off[h+1]``). ``ksame[h], vsame[h]``: whether
    the scratchpad's key rows and value rows are bitwise unchanged."""
    for h in range(h0, h1):
        ksame[h], vsame[h] = True, True
        for j in range(X.shape[0]):
            if j >= g and not todo[j]:
                continue
            ks = True
            for r in range(kq_off[h], kq_off[h + 1]):
                acc = _row_times_column(K_ptr, K_idx, K_val, r, X, j)
                ks = ks and acc == KT[r, j]
                KT[r, j] = acc
                QT[r, j] = _row_times_column(Q_ptr, Q_idx, Q_val, r, X, j)
            vs = True
            for r in range(v_off[h], v_off[h + 1]):
                acc = _row_times_column(V_ptr, V_idx, V_val, r, X, j)
                vs = vs and acc == VX[j, r]
                VX[j, r] = acc
            if j < g:
                ksame[h], vsame[h] = ksame[h] and ks, vsame[h] and vs
            else:
                s = 0.0
                for r in range(kq_off[h], kq_off[h + 1]):
                    s += KT[r, j] * QT[r, j]
                SS[h, j] = s


@numba.njit(cache=True, inline="always")
def _weight(s, top, hard, tol, lam):
    """Unnormalised weight of score ``s`` when the best score is ``top``: hardmax
    ``1[s >= top - tol]`` or softmax ``exp(lam (s - top))``."""
    return (1.0 if s >= top - tol else 0.0) if hard else np.exp(lam * (s - top))


@numba.njit(cache=True, inline="always")
def _normalise(w, nk, hard, tol, lam):
    """Scores ``w[:nk]`` to unnormalised weights (:func:`_weight`) in place; returns their sum."""
    top = -np.inf
    for t in range(nk):
        top = max(top, w[t])
    total = 0.0
    for t in range(nk):
        w[t] = _weight(w[t], top, hard, tol, lam)
        total += w[t]
    return total


@numba.njit(cache=True)
def _program(Xb, iterations, g, hard, tol, incremental, head_off, lam, kq_off, K_ptr, K_idx,
             K_val, Q_ptr, Q_idx, Q_val, v_off, v_rows, V_ptr, V_idx, V_val, F_ptr, F_idx,
             F_val, b1, W2_ptr, W2_idx, W2_val, b2, b2r_off, b2r, ug_off, units_g, forms_g,
             fg_off, ul_off, units_l, forms_l, fl_off):
    """``iterations`` passes of the layer stack on one program ``Xb: (n, d)`` (in place);
    returns ``max |X_out - X_in|`` of the last pass.

    Per layer, column ``q`` of ``A = X + sum_h V_h X P_h`` and ``f = A + W2 ReLU(W1 A + b1) + b2``
    depends on ``x_q`` and, for ``q >= g``, on the scratchpad keys ``j < g`` only through the
    weights ``P_h[j, q]`` (scores ``(K_h x_j) . (Q_h x_q)``) and the values ``V_h x_j``. So with
    ``incremental`` the kernel keeps, per layer, last pass's input of every column (``Xs[l]``),
    its projections ``K_h x, Q_h x, V_h x``, self score and weights, and recomputes a
    non-scratchpad column only if its input changed, its weights changed (possible only if a
    scratchpad key row changed), or a scratchpad key it attends to (weight != 0) changed its
    value rows. Otherwise its output is bitwise last pass's, which ``Xs[l + 1]`` already holds
    (like a KV cache). The arithmetic is that of a full pass in the same order, so the result is
    bitwise identical; per pass only the scratchpad and a few columns (the fetched instruction,
    the operands, the written cell) are recomputed.
    """
    n, d = Xb.shape
    L = head_off.shape[0] - 1
    H = lam.shape[0]
    umax = 1
    for l in range(L):
        umax = max(umax, ug_off[l + 1] - ug_off[l], ul_off[l + 1] - ul_off[l])
    # Xs[l]: input of layer l (Xs[0] is the loop state); full passes work in place on Xb
    if incremental:
        Xs = np.empty((L, n, d))
        Xs[0] = Xb
    else:
        Xs = Xb.reshape((1, n, d))
    S = Xs.shape[0]
    X0 = np.empty((n, d))                      # input of the last pass
    # K_h x_j, Q_h x_j of every column j as columns; rows padded off a power-of-two stride
    KT = np.zeros((kq_off[H], n + 8))
    QT = np.zeros((kq_off[H], n + 8))
    VX = np.zeros((n, v_off[H]))               # V_h x_j (non-zero rows)
    SG = np.empty((H, g, n))                   # scores of scratchpad keys for every query
    SS = np.empty((H, n))                      # self scores of non-scratchpad columns
    Wc = np.empty((H, n, g + 1))               # their weights over keys 0..g-1 and self
    dirty = np.ones(n, dtype=np.bool_)         # input of the current layer changed
    nxt = np.ones(n, dtype=np.bool_)
    stale = np.ones(n, dtype=np.bool_)         # column to recompute in this layer
    ksame = np.empty(H, dtype=np.bool_)        # scratchpad key / value rows unchanged
    vsame = np.empty(H, dtype=np.bool_)
    w = np.empty(n)
    buf = np.empty(d)                          # the column being computed (unless in place)
    acc = np.empty(v_off[H])
    pre = np.empty(umax)
    fv = np.empty(umax)
    for it in range(iterations):
        if it == iterations - 1:
            X0[:] = Xs[0]
        for l in range(L):
            Xin, Xout = Xs[l % S], Xs[(l + 1) % S]
            h0, h1 = head_off[l], head_off[l + 1]
            # compare outputs with Xout (last pass's) for the dirty flags
            track = incremental and (it > 0 or l == L - 1)
            for q in range(n):
                stale[q] = dirty[q] or not incremental
            _project(Xin, h0, h1, g, stale, kq_off, K_ptr, K_idx, K_val, Q_ptr, Q_idx, Q_val,
                     v_off, V_ptr, V_idx, V_val, KT, QT, VX, SS, ksame, vsame)
            for h in range(h0, h1):
                SG[h] = 0.0
                for t in range(g):
                    for r in range(kq_off[h], kq_off[h + 1]):
                        for q in range(n):
                            SG[h, t, q] += KT[r, t] * QT[r, q]
            for h in range(h0, h1):             # clean columns whose weights or values moved
                if ksame[h] and vsame[h]:
                    continue
                for q in range(g, n):
                    if stale[q]:
                        continue
                    top = SS[h, q]
                    for t in range(g):
                        top = max(top, SG[h, t, q])
                    keep = _weight(SS[h, q], top, hard, tol, lam[h]) == Wc[h, q, g]
                    for t in range(g):
                        wt = _weight(SG[h, t, q], top, hard, tol, lam[h])
                        keep = keep and wt == Wc[h, q, t] and (vsame[h] or wt == 0.0)
                    stale[q] = not keep
            for q in range(n):
                if q >= g and not stale[q]:
                    nxt[q] = False
                    continue
                if S == 1:
                    a = Xin[q]
                else:
                    a = buf
                    for r in range(d):
                        a[r] = Xin[q, r]
                for h in range(h0, h1):
                    if q < g:
                        nk = n
                        for t in range(n):
                            w[t] = 0.0
                        for r in range(kq_off[h], kq_off[h + 1]):
                            for t in range(n):
                                w[t] += KT[r, t] * QT[r, q]
                    else:
                        nk = g + 1
                        for t in range(g):
                            w[t] = SG[h, t, q]
                        w[g] = SS[h, q]
                    total = _normalise(w, nk, hard, tol, lam[h])
                    if q >= g:
                        for t in range(nk):
                            Wc[h, q, t] = w[t]
                    v0, v1 = v_off[h], v_off[h + 1]
                    for r in range(v0, v1):
                        acc[r] = 0.0
                    for t in range(nk):
                        if w[t] != 0.0:
                            key = t if (q < g or t < g) else q
                            for r in range(v0, v1):
                                acc[r] += w[t] * VX[key, r]
                    for r in range(v0, v1):
                        a[v_rows[r]] += acc[r] / total
                if q < g:
                    _feed_forward(a, units_g, forms_g, ug_off[l], ug_off[l + 1], fg_off[l],
                                  fg_off[l + 1], F_ptr, F_idx, F_val, b1, W2_ptr, W2_idx,
                                  W2_val, b2, l, b2r, b2r_off, fv, pre)
                else:
                    _feed_forward(a, units_l, forms_l, ul_off[l], ul_off[l + 1], fl_off[l],
                                  fl_off[l + 1], F_ptr, F_idx, F_val, b1, W2_ptr, W2_idx,
                                  W2_val, b2, l, b2r, b2r_off, fv, pre)
                changed = not track
                for r in range(d if S > 1 else 0):
                    if track and a[r] != Xout[q, r]:
                        changed = True
                    Xout[q, r] = a[r]
                nxt[q] = changed
            dirty, nxt = nxt, dirty
    if incremental:
        Xb[:] = Xs[0]
    delta = 0.0
    for j in range(n if iterations > 0 else 0):
        for r in range(d):
            delta = max(delta, abs(Xb[j, r] - X0[j, r]))
    return delta


@numba.njit(cache=True)
def _feed_forward(a, units, forms, u0, u1, f0, f1, F_ptr, F_idx, F_val, b1, W2_ptr, W2_idx,
                  W2_val, b2, l, b2r, b2r_off, fv, pre):
    """``a += W2[:, U] ReLU(W1[U] a + b1[U]) + b2[l]`` on one column ``a: (d,)``, with units
    ``U = units[u0:u1]`` and ``b2[l]``'s non-zero rows ``b2r[b2r_off[l]:b2r_off[l+1]]``; all
    pre-activations are read before any write. ``W1[U]`` is stored as its distinct rows (CSR
    rows ``f0:f1`` of ``F``), unit ``units[i]`` using row ``forms[i]``: each is summed once."""
    for f in range(f0, f1):
        z = 0.0
        for p in range(F_ptr[f], F_ptr[f + 1]):
            z += F_val[p] * a[F_idx[p]]
        fv[f - f0] = z
    for i in range(u0, u1):
        pre[i - u0] = fv[forms[i] - f0] + b1[units[i]]
    for i in range(u0, u1):
        z = pre[i - u0]
        if z > 0.0:
            u = units[i]
            for p in range(W2_ptr[u], W2_ptr[u + 1]):
                a[W2_idx[p]] += W2_val[p] * z
    for i in range(b2r_off[l], b2r_off[l + 1]):
        a[b2r[i]] += b2[l, b2r[i]]


@numba.njit(cache=True)
def _run_serial(XT, delta, iterations, g, hard, tol, incremental, *machine):
    for b in range(XT.shape[0]):
        delta[b] = _program(XT[b], iterations, g, hard, tol, incremental, *machine)


@numba.njit(cache=True, parallel=True)
def _run_parallel(XT, delta, iterations, g, hard, tol, incremental, *machine):
    for b in numba.prange(XT.shape[0]):
        delta[b] = _program(XT[b], iterations, g, hard, tol, incremental, *machine)


def run_sparse(XT: np.ndarray, iterations: int, g: int, hard: bool, tol: float,
               machine: tuple, incremental: bool = True, parallel: bool = False) -> np.ndarray:
    """``iterations`` passes of a stack of Eq. 1 layers on the sparse path, in place on
    ``XT: (B, n, d)`` float64 (tokens as rows, so each column of X is contiguous); returns
    ``(B,)`` ``max |X_out - X_in|`` of each program's last pass (0 at a fixed point).

    Per layer the semantics are those of ``tpcore.looped.layer.layer_forward_sparse`` (its NumPy
    reference): query columns ``< g`` attend to every key, the others to keys ``0..g-1`` and
    themselves; FF units of ``units_g`` run on columns ``< g`` and of ``units_l`` on the others.
    ``machine`` is ``CompiledLayers.args`` (``tpcore.looped.compiled``): all layers' weights
    packed as CSR rows. Each program runs all its passes while its state is in cache.
    ``incremental`` skips, from the second pass on, the columns whose output cannot have changed
    (see :func:`_program`; bitwise the same result); ``parallel`` spreads programs over numba's
    threads.
    """
    delta = np.zeros(XT.shape[0])
    run = _run_parallel if parallel else _run_serial
    run(XT, delta, iterations, g, hard, tol, incremental and iterations > 1, *machine)
    return delta

"""The two sorting algorithms of "How tiny transformers sort", as code, and the measurement of how
often a model's predictions follow each.

Host-only (NumPy directly): inputs are small integer arrays. Lists are ``(B, L)`` with their
``lengths: (B,)``; entries past a list's length are ignored; predictions are ``(B, L)``, item
``k`` being the model's ``k``-th sorted value (teacher-forced: given the true items before it).

1. ``min{>previous}``: item ``k`` is the smallest list value greater than the previous output
   ``s_{k-1}`` (anything for ``k = 0``); with nothing greater it repeats ``s_{k-1}``. Exact for
   distinct values, wrong whenever the next item repeats the previous one.
2. Concave argmax: ``f(x) = sum_i min(0, a_i - x)``, ``f_k(x) = f(x) + (k + 1/2) x``; item ``k``
   is ``argmax_x f_k(x)`` over the values ``x``. Since ``f_k(x+1) - f_k(x) = k + 1/2 -
   #{i : a_i <= x}``, ``f_k`` rises while ``x < s_k`` and falls from ``s_k`` on: the argmax is
   exactly the ``k``-th sorted item. The informative measurement is therefore where the two rules
   differ: which one the model follows there.
"""

from __future__ import annotations

import numpy as np


def _valid(lists: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    return np.arange(lists.shape[1])[None, :] < lengths[:, None]


def min_greater_previous(lists: np.ndarray, lengths: np.ndarray, n_values: int) -> np.ndarray:
    """Rule 1 for every item ``k`` given the true previous items: ``(B, L)`` (``n_values`` past a
    list's length)."""
    valid = _valid(lists, lengths)
    truth = np.sort(np.where(valid, lists, n_values), axis=1)
    prev = np.concatenate([np.full((len(lists), 1), -1), truth[:, :-1]], axis=1)
    above = valid[:, None, :] & (lists[:, None, :] > prev[:, :, None])
    rule = np.where(above, lists[:, None, :], n_values).min(axis=2)
    rule = np.where(rule == n_values, prev, rule)
    return np.where(valid, rule, n_values)


def concave_scores(lists: np.ndarray, lengths: np.ndarray, n_values: int) -> np.ndarray:
    """``f_k(x) = sum_i min(0, a_i - x) + (k + 1/2) x`` for ``x = 0..V-1``: ``(B, L, V)``."""
    valid = _valid(lists, lengths)
    x = np.arange(n_values)
    f = (np.minimum(0, lists[:, :, None] - x) * valid[:, :, None]).sum(axis=1)
    k = np.arange(lists.shape[1])[:, None] + 0.5
    return f[:, None, :] + k * x


def concave_argmax(lists: np.ndarray, lengths: np.ndarray, n_values: int) -> np.ndarray:
    """Rule 2: ``argmax_x f_k(x)`` for every item ``k``: ``(B, L)`` (``n_values`` past a list's
    length)."""
    rule = concave_scores(lists, lengths, n_values).argmax(axis=2)
    return np.where(_valid(lists, lengths), rule, n_values)


def rule_agreement(pred: np.ndarray, lists: np.ndarray, lengths: np.ndarray,
                   n_values: int) -> dict[str, float | int | None]:
    """Fractions of the (valid) items of ``pred: (B, L)`` equal to each rule's item; over the
    items where the rules differ, the fraction following each; and over the wrong items (where
    ``pred`` differs from the concave rule, i.e. the truth), the fraction equal to min{>previous}
    (None where a set is empty)."""
    valid = _valid(lists, lengths)
    r1 = min_greater_previous(lists, lengths, n_values)
    r2 = concave_argmax(lists, lengths, n_values)
    differ = valid & (r1 != r2)
    n_differ = int(differ.sum())

    def frac(hit: np.ndarray, where: np.ndarray) -> float | None:
        count = int(where.sum())
        return float((hit & where).sum()) / count if count else None

    return dict(
        min_greater=frac(pred == r1, valid), concave=frac(pred == r2, valid),
        items=int(valid.sum()), items_differ=n_differ,
        differ_follows_min_greater=frac(pred == r1, differ),
        differ_follows_concave=frac(pred == r2, differ),
        items_wrong=int((valid & (pred != r2)).sum()),
        wrong_follows_min_greater=frac(pred == r1, valid & (pred != r2)),
    )

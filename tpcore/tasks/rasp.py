"""The RASP tasks of Weiss et al. as generated for Transformer Programs (paper appendix B.2).

Host-only: NumPy and the standard library. Every generator is vectorised over samples and seeded.

Sizes follow the paper's Table 1, where the variable cardinality ``k`` is 8 for |V| = N = 8:
``vocab_size`` counts every token id (``<pad>``, ``<s>`` and, for ``sort``/``reverse``,
``</s>`` included) and ``max_len`` every position (framing included). So at small scale sort and
reverse use 5 symbols and at most 6 content tokens, hist, double hist and most-freq 6 symbols and
at most 7, Dyck 15 bracket tokens after ``<s>`` (as in the authors' release).

A sample is ``<s> x_1 ... x_L`` (``sort`` and ``reverse`` also append ``</s>``) padded with
``<pad>`` to a common length; ``L`` is uniform in ``min_len`` .. the longest content that fits
(Dyck: always the longest). Inputs are distinct: strings are drawn until the set of unique
strings has the intended size (or, as in the authors' release, until ``5 n`` draws when the
space is nearly exhausted: sort at small scale has 19,530 strings in all), shuffled, then split
80 / 10 / 10 (16,000 / 2,000 / 2,000 for 20,000). Targets exist at the content positions (``mask``);
``<s>``, ``</s>`` and padding carry no loss.

Tasks (``x`` the content, ``h(v)`` the number of occurrences of ``v`` in ``x``):
``reverse`` ``x_{L+1-i}``; ``hist`` ``h(x_i)``; ``double_hist`` the number of distinct tokens
``v`` with ``h(v) = h(x_i)``; ``sort`` the ``i``-th smallest token; ``most_freq`` the distinct
tokens by decreasing ``h``, ties broken by first position, then ``<s>`` at the remaining
content positions (the authors' labels, which the paper's accuracy counts); ``dyck1``/``dyck2``
per prefix: ``T`` balanced, ``P`` a valid prefix, ``F`` invalid, so the Dyck tasks are causal
(each position attends to itself and the positions before it, as the authors' code trains them
and their released Dyck programs select); the others attend to every position. Dyck inputs:
half uniform strings over the brackets, half a balanced string grown by appending or wrapping
pairs and cut to the length (the authors' ``make_dyck_pft``; :func:`dyck_sampler`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.tasks.data import BOS, EOS, PAD, TaskData, split, unique_rows


def letters(n: int) -> list[str]:
    """``a, b, ...`` for up to 26 symbols, else ``t0, t1, ...``."""
    return [chr(ord("a") + i) for i in range(n)] if n <= 26 else [f"t{i}" for i in range(n)]


def uniform_strings(v: int, min_len: int, max_len: int) -> Callable:
    """Sampler of uniform token strings with uniform lengths, ``-1`` past the end."""
    def sample(gen: np.random.Generator, size: int) -> np.ndarray:
        x = gen.integers(0, v, (size, max_len))
        lengths = gen.integers(min_len, max_len + 1, size)
        x[np.arange(max_len)[None, :] >= lengths[:, None]] = -1
        return x
    return sample


def counts(x: np.ndarray, v: int) -> np.ndarray:
    """``h[s, t] = #{i : x[s, i] == t}`` for ``t < v`` (``-1`` entries ignored): ``(S, v)``."""
    return (x[:, :, None] == np.arange(v)[None, None, :]).sum(axis=1)


def _reverse(x: np.ndarray, v: int) -> tuple[np.ndarray, list[str]]:
    lengths = (x >= 0).sum(axis=1)
    idx = np.clip(lengths[:, None] - 1 - np.arange(x.shape[1])[None, :], 0, None)
    return np.where(x >= 0, np.take_along_axis(x, idx, axis=1), -1), letters(v)


def _hist(x: np.ndarray, v: int) -> tuple[np.ndarray, list[str]]:
    h = counts(x, v)
    y = np.take_along_axis(h, np.clip(x, 0, None), axis=1) - 1
    return np.where(x >= 0, y, -1), [str(c) for c in range(1, x.shape[1] + 1)]


def _double_hist(x: np.ndarray, v: int) -> tuple[np.ndarray, list[str]]:
    h = counts(x, v)
    hx = np.take_along_axis(h, np.clip(x, 0, None), axis=1)
    same = ((h[:, None, :] == hx[:, :, None]) & (h[:, None, :] > 0)).sum(axis=2)
    return np.where(x >= 0, same - 1, -1), [str(c) for c in range(1, x.shape[1] + 1)]


def _sort(x: np.ndarray, v: int) -> tuple[np.ndarray, list[str]]:
    y = np.sort(np.where(x >= 0, x, v), axis=1)
    return np.where(x >= 0, y, -1), letters(v)


def _most_freq(x: np.ndarray, v: int) -> tuple[np.ndarray, list[str]]:
    s, n = x.shape
    h = counts(x, v)
    first = np.where(x[:, :, None] == np.arange(v)[None, None, :], np.arange(n)[None, :, None],
                     n).min(axis=1)
    order = np.lexsort((first, -h), axis=-1)  # by count desc, then first position
    y = np.full((s, n), -1)
    y[:, : min(n, v)] = order[:, : min(n, v)]
    ranked = np.take_along_axis(h, y.clip(0), axis=1)
    y = np.where((y >= 0) & (ranked > 0), y, v)  # class v: "<s>" past the distinct tokens
    return np.where(x >= 0, y, -1), [*letters(v), BOS]


def dyck_labels(x: np.ndarray, pairs: int) -> np.ndarray:
    """Per-prefix labels 0 = T (balanced), 1 = P (valid prefix), 2 = F (invalid) of bracket
    strings ``x`` (``2 t`` opens type ``t``, ``2 t + 1`` closes it)."""
    s, n = x.shape
    stack = np.zeros((s, n + 1), dtype=np.int64)
    depth = np.zeros(s, dtype=np.int64)
    bad = np.zeros(s, dtype=bool)
    out = np.zeros((s, n), dtype=np.int64)
    rows = np.arange(s)
    for i in range(n):
        kind, closing = x[:, i] // 2, x[:, i] % 2 == 1
        top = stack[rows, np.maximum(depth - 1, 0)]
        bad |= closing & ((depth == 0) | (top != kind))
        opening = ~closing & ~bad
        stack[rows[opening], depth[opening]] = kind[opening]
        depth = depth + opening - (closing & ~bad)
        out[:, i] = np.where(bad, 2, np.where(depth == 0, 0, 1))
    return out


def dyck_sampler(pairs: int, n: int) -> Callable:
    """The authors' biased Dyck sampler (their ``make_dyck_pft``): half the strings uniform over
    the ``2 pairs`` brackets, half grown from the empty string by ``(n + 1) // 2`` steps, each
    of which draws a bracket type and either appends an empty pair of it or wraps the whole
    string in one (probability 1/2 each), then cut to ``n`` tokens. So the valid half holds
    only ``pairs^k 2^(k-1)`` distinct strings for ``k`` steps (Dyck-1 at N = 16: 128), every
    one a valid prefix throughout."""
    steps = (n + 1) // 2

    def sample(gen: np.random.Generator, size: int) -> np.ndarray:
        x = gen.integers(0, 2 * pairs, (size, n))
        grown = np.zeros((size, 2 * steps), dtype=np.int64)
        valid = gen.random(size) < 0.5
        for length in range(0, 2 * steps, 2):
            kind = gen.integers(0, pairs, size)
            wrap = gen.random(size) < 0.5
            grown[wrap, 1:length + 1] = grown[wrap, :length].copy()
            grown[wrap, 0] = 2 * kind[wrap]
            grown[~wrap, length] = 2 * kind[~wrap]
            grown[:, length + 1] = 2 * kind + 1
        x[valid] = grown[valid, :n]
        return x
    return sample


RaspFn = Callable[[np.ndarray, int], tuple[np.ndarray, list[str]]]
RASP: dict[str, RaspFn] = {"reverse": _reverse, "hist": _hist, "double_hist": _double_hist,
                           "sort": _sort, "most_freq": _most_freq}
DYCK = {"dyck1": 1, "dyck2": 2}
EOS_TASKS = ("sort", "reverse")
"""The tasks whose inputs end with ``</s>``."""


def frame(x: np.ndarray, y: np.ndarray, eos: bool) -> dict[str, np.ndarray]:
    """Token and target arrays from contents ``x`` and targets ``y`` (``-1`` = none): shift ids
    past the special tokens (``<pad>``, ``<s>``, ``</s>`` if ``eos``), add framing and padding."""
    s, n = x.shape
    shift = 3 if eos else 2
    t = n + 1 + eos
    tokens = np.zeros((s, t), dtype=np.int64)
    tokens[:, 0] = 1
    tokens[:, 1 : n + 1] = np.where(x >= 0, x + shift, 0)
    if eos:
        tokens[np.arange(s), 1 + (x >= 0).sum(axis=1)] = 2
    targets = np.zeros((s, t), dtype=np.int64)
    targets[:, 1 : n + 1] = np.maximum(y, 0)
    mask = np.zeros((s, t), dtype=bool)
    mask[:, 1 : n + 1] = y >= 0
    return {"tokens": tokens, "targets": targets, "mask": mask, "pad": tokens == 0}


def special_tokens(name: str) -> list[str]:
    """The token ids task ``name`` uses besides its content symbols: ``<pad>``, ``<s>`` and, for
    ``sort`` and ``reverse``, ``</s>``."""
    return [PAD, BOS, EOS] if name in EOS_TASKS else [PAD, BOS]


def causal(name: str) -> bool:
    """Whether task ``name``'s models attend only to their own and earlier positions: the Dyck
    tasks, whose labels describe the prefix ending at each position."""
    return name in DYCK


def make_rasp(name: str, vocab_size: int, max_len: int, n_samples: int, seed: int,
              min_len: int) -> TaskData:
    """Generate the RASP or Dyck task ``name`` with ``vocab_size`` token ids and ``max_len``
    positions, special tokens and framing included (see the module docstring; Dyck: the bracket
    pairs are fixed and ``vocab_size`` is ignored)."""
    specials = special_tokens(name)
    eos = EOS in specials
    v, n = vocab_size - len(specials), max_len - 1 - eos
    if name not in DYCK and v < 1:
        raise TpcoreError(f"{name}: vocab_size={vocab_size} leaves no content symbol beside "
                          f"{', '.join(specials)}; expected vocab_size >= {len(specials) + 1}")
    if not 1 <= min_len <= n:
        raise TpcoreError(f"{name}: need 1 <= min_len <= max_len - {1 + eos} content tokens; "
                          f"got min_len={min_len}, max_len={max_len}")
    gen = np.random.default_rng(seed)
    if name in DYCK:
        pairs = DYCK[name]
        if n < 2:
            raise TpcoreError(f"{name}: max_len must be >= 3 (<s> and one bracket pair), "
                              f"got {max_len}")
        x = unique_rows(dyck_sampler(pairs, n), n_samples, gen, name)
        y, classes = dyck_labels(x, pairs), ["T", "P", "F"]
        words = ["(", ")", "{", "}", "[", "]"][: 2 * pairs]
        params = {"pairs": pairs}
    else:
        x = unique_rows(uniform_strings(v, min_len, n), n_samples, gen, name)
        y, classes = RASP[name](x, v)
        words = letters(v)
        params = {"vocab_size": vocab_size, "symbols": v, "min_len": min_len}
    data = frame(x, y, eos)
    params.update(max_len=max_len, n_samples=len(x), seed=seed)
    return TaskData(name, tuple(specials + words), tuple(classes), causal(name),
                    data["tokens"].shape[1], split(data, len(x)), params)

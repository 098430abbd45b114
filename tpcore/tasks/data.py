"""A generated task's data and how its inputs are drawn and split.

Host-only: NumPy and the standard library. Token id 0 is ``<pad>``, id 1 ``<s>``; tasks that end
their inputs with ``</s>`` give it id 2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tpcore.errors import TpcoreError

__all__ = ["BOS", "EOS", "PAD", "SPLITS", "Split", "TaskData", "split", "unique_rows"]

PAD, BOS, EOS = "<pad>", "<s>", "</s>"
SPLITS = ("train", "val", "test")
Split = dict[str, np.ndarray]


@dataclass
class TaskData:
    """A generated task. ``vocab[i]`` is the string of token id ``i`` (id 0 is ``<pad>``);
    ``classes[c]`` the label of output class ``c``; ``splits[name]`` holds ``tokens``,
    ``targets`` (class ids, 0 where masked), ``mask`` (positions with a target) and ``pad``
    (padding positions), all ``(S, T)``; ``max_len = T``."""

    name: str
    vocab: tuple[str, ...]
    classes: tuple[str, ...]
    causal: bool
    max_len: int
    splits: dict[str, Split] = field(default_factory=dict)
    params: dict = field(default_factory=dict)

    @property
    def bos(self) -> str | None:
        """The token that starts every input (``<s>``), None when the task has none."""
        return BOS if BOS in self.vocab else None

    @property
    def eos(self) -> str | None:
        """The token that ends every input (``</s>``), None when the task has none."""
        return EOS if EOS in self.vocab else None

    @property
    def pad(self) -> str | None:
        """The padding token (``<pad>``), None when the task has none."""
        return PAD if PAD in self.vocab else None

    def encode(self, words: list[str]) -> np.ndarray:
        """Token ids of ``words`` (framing tokens included); unknown words raise naming them."""
        index = {w: i for i, w in enumerate(self.vocab)}
        bad = [w for w in words if w not in index]
        if bad:
            raise TpcoreError(f"token {bad[0]!r} is not in the {self.name} vocabulary {self.vocab}")
        if len(words) > self.max_len:
            raise TpcoreError(f"sequence of length {len(words)} exceeds max_len {self.max_len}")
        return np.array([index[w] for w in words])


def unique_rows(sample: Callable[[np.random.Generator, int], np.ndarray], n: int,
                gen: np.random.Generator, what: str) -> np.ndarray:
    """Up to ``n`` distinct rows, drawing batches from ``sample(gen, size)`` (rows of ints, ``-1``
    = padding) until ``n`` are unique or ``5 n`` rows have been drawn (then all the distinct ones
    found); the first ``n`` distinct rows in draw order, returned shuffled. Shuffling matters:
    frequent strings (short ones) come first in draw order, and :func:`split` cuts the rows in
    order. Raises if fewer than ``n / 2`` are found: the space is too small."""
    rows = np.zeros((0, 0), dtype=np.int64)
    drawn = 0
    while len(rows) < n and drawn < 5 * n:
        size = min(max(2 * (n - len(rows)), 64), 5 * n - drawn)
        new = sample(gen, size)
        drawn += size
        rows = new if rows.size == 0 else np.concatenate([rows, new])
        _, first = np.unique(rows, axis=0, return_index=True)
        rows = rows[np.sort(first)]
    if 2 * len(rows) < n:
        raise TpcoreError(f"cannot draw {n} distinct {what} inputs (only {len(rows)} found in "
                          f"{drawn} draws); lower n_samples or raise vocab_size / max_len")
    rows = rows[:n]
    return rows[gen.permutation(len(rows))]


def split(data: dict[str, np.ndarray], n: int, fractions: tuple[float, float] = (0.8, 0.1)
          ) -> dict[str, Split]:
    """First 80 % train, next 10 % validation, rest test (rows must already be in random order,
    as :func:`unique_rows` returns them)."""
    a, b = int(n * fractions[0]), int(n * (fractions[0] + fractions[1]))
    return {name: {k: v[lo:hi] for k, v in data.items()}
            for name, (lo, hi) in zip(SPLITS, ((0, a), (a, b), (b, n)))}

"""The in-context (induction) task of the Transformer Programs paper (appendix B.1).

Host-only (NumPy). A sequence is ``<s>`` followed by alternating letters (``a .. d``) and numbers
(``0 .. 3``), ``length`` tokens in all, ending on a letter; each sequence draws its own random
many-to-one map from letters to numbers, and every letter is followed by its number. The target
at each letter is the number that followed the same letter earlier in the sequence, or ``unk`` if
the letter has not appeared before; numbers carry no target. Causal.
"""

from __future__ import annotations

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.tasks.data import BOS, PAD, TaskData, split, unique_rows

LETTERS, NUMBERS = ("a", "b", "c", "d"), ("0", "1", "2", "3")
UNK = "unk"


def make_induction(n_samples: int = 20000, length: int = 10, seed: int = 0) -> TaskData:
    """Generate the task; ``length`` counts ``<s>`` (the paper: 10), so it must be even."""
    if length < 2 or length % 2:
        raise TpcoreError(f"induction length must be even and >= 2 (<s> + letters/numbers ending "
                          f"on a letter), got {length}")
    n_l = len(LETTERS)
    steps = length // 2  # letters per sequence

    def sample(gen: np.random.Generator, size: int) -> np.ndarray:
        keys = gen.integers(0, n_l, (size, steps))
        table = gen.integers(0, len(NUMBERS), (size, n_l))
        vals = np.take_along_axis(table, keys, axis=1)
        x = np.zeros((size, 2 * steps - 1), dtype=np.int64)
        x[:, 0::2] = keys
        x[:, 1::2] = n_l + vals[:, :-1]
        return x

    gen = np.random.default_rng(seed)
    x = unique_rows(sample, n_samples, gen, "induction")
    keys = x[:, 0::2]
    s = len(x)
    unk = len(NUMBERS)
    targets_at_letters = np.full((s, steps), unk)
    for i in range(steps):  # the latest earlier occurrence of the same letter
        for j in range(i):
            hit = keys[:, j] == keys[:, i]
            targets_at_letters[hit, i] = x[hit, 2 * j + 1] - n_l
    tokens = np.concatenate([np.ones((s, 1), dtype=np.int64), x + 2], axis=1)
    targets = np.zeros_like(tokens)
    mask = np.zeros(tokens.shape, dtype=bool)
    targets[:, 1::2], mask[:, 1::2] = targets_at_letters, True
    data = {"tokens": tokens, "targets": targets, "mask": mask, "pad": tokens == 0}
    return TaskData("induction", (PAD, BOS, *LETTERS, *NUMBERS), (*NUMBERS, UNK), True, length,
                    split(data, n_samples), {"max_len": length, "n_samples": n_samples,
                                             "seed": seed})

"""Sorting tasks of "How tiny transformers sort" (Qi and Zhong): data generators and encodings.

Host-only code (data generation): NumPy is used directly; batches move to the active backend in
the training loop.

Three tasks, values ``0..V-1`` are their own token ids, then ``BOS = V``, ``SEP = V + 1`` (``MOS``
for the causal tasks, ``EOS`` for the bidirectional one) and ``PAD = V + 2``:

- ``causal``: 10 values in 0-9 with duplicates, ``BOS a0..a9 MOS s0..s9`` (22 tokens); the logits
  at positions ``11 + k`` (``MOS``, ``s0``, ..) predict ``s_k``: loss only on the sorted half;
- ``distinct``: the same with 10 distinct values from 0-14;
- ``bidirectional``: length ``n`` uniform in 1..10, values 0-9, ``BOS a0..a_{n-1} EOS PAD..``
  (12 tokens); the target at input position ``1 + k`` is ``s_k``; ``PAD`` keys are masked.

Lists are ``(B, L)`` int arrays with their ``lengths: (B,)``; entries past a list's length are
``V`` (so they sort last). The *hard* generator is the post's procedure, vectorised: with
probability 2/3 a set ``S`` keeps each value independently with probability ``p ~ U(0, 1)``
(redrawn while empty), otherwise ``S`` is the interval between two uniform values; the list is
``n`` uniform draws from ``S``.

:func:`task_of` names the task a model was built for; :func:`one_list` encodes one list of any
length up to ``L``, filling a short one for the fixed-length tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import Any

import numpy as np

from tpcore.backend import to_host
from tpcore.errors import TpcoreError, unknown_name

__all__ = [
    "GENERATORS", "TASKS", "SortingTask", "all_distinct_lists", "batches", "encode", "generate",
    "get_task", "hard_lists", "hard_sets", "one_list", "random_lists", "sorted_predictions",
    "task_of",
]

GENERATORS = ("random", "hard")


@dataclass(frozen=True)
class SortingTask:
    """A sorting task: ``n_values`` values, lists of at most ``length`` items."""

    name: str
    n_values: int
    length: int = 10
    causal: bool = True
    distinct: bool = False
    variable_length: bool = False

    @property
    def bos(self) -> int:
        return self.n_values

    @property
    def sep(self) -> int:
        """``MOS`` (causal) or ``EOS`` (bidirectional)."""
        return self.n_values + 1

    @property
    def pad(self) -> int:
        return self.n_values + 2

    @property
    def vocab_size(self) -> int:
        return self.n_values + (2 if self.causal else 3)

    @property
    def seq_len(self) -> int:
        return 2 * self.length + 2 if self.causal else self.length + 2

    @property
    def first_target(self) -> int:
        """Sequence position whose logits predict ``s_0``."""
        return self.length + 1 if self.causal else 1

    def token_names(self) -> list[str]:
        names = [str(v) for v in range(self.n_values)] + ["BOS", "MOS" if self.causal else "EOS"]
        return names if self.causal else names + ["PAD"]

    def to_tokens(self, lists: str | Sequence[Any]) -> np.ndarray:
        """The token ids ``(B, seq_len)`` the task's models read for ``lists``: one list (its
        values, or a string of them split on spaces) gives ``(1, seq_len)``, a list of lists
        one row each. Each list is framed as :func:`one_list` says (a causal task's row holds
        the sorted list after ``MOS``, which the model reads shifted by one; a short list is
        filled), a bidirectional row ends in ``EOS`` and ``PAD``, which the model masks. A list
        that does not fit raises naming it."""
        if isinstance(lists, str) or (len(lists) > 0 and not isinstance(lists[0], str)
                                      and not hasattr(lists[0], "__len__")):
            lists = [lists]
        if not lists:
            raise TpcoreError("to_tokens takes one list or a list of lists; got none")
        rows = [one_list(self, [int(v) for v in x.split()] if isinstance(x, str) else x)
                for x in lists]
        return encode(self, np.concatenate([r[0] for r in rows]),
                      np.concatenate([r[1] for r in rows]))["tokens"]

    def to_str_tokens(self, tokens: Any) -> list[str] | list[list[str]]:
        """Token ids back as the task's names (``BOS``, ``3``, ``MOS``, ...; padding left out):
        a list for one row ``(N,)`` or ``(1, N)``, a list per row for ``(B, N)``. An id outside
        the vocabulary raises naming its row, position and id."""
        ids = np.asarray(to_host(tokens))
        one = ids.ndim == 1
        ids = ids[None] if one else ids
        if ids.ndim != 2 or ids.dtype.kind not in "iu":
            raise TpcoreError(f"tokens of shape {ids.shape} and dtype {ids.dtype}: expected "
                              "integer ids (N,) or (B, N)")
        names = self.token_names()
        bad = np.argwhere((ids < 0) | (ids >= len(names)))
        if len(bad):
            b, n = bad[0]
            raise TpcoreError(f"row {b}, position {n}: token id {ids[b, n]} is outside the "
                              f"{self.name} task's vocabulary 0..{len(names) - 1}")
        rows = [[names[t] for t in row if t != self.pad] for row in ids.tolist()]
        return rows[0] if one or len(rows) == 1 else rows


TASKS = {
    "causal": SortingTask("causal", 10),
    "distinct": SortingTask("distinct", 15, distinct=True),
    "bidirectional": SortingTask("bidirectional", 10, causal=False, variable_length=True),
}


def get_task(name: str) -> SortingTask:
    if name not in TASKS:
        raise unknown_name("sorting task", name, TASKS)
    return TASKS[name]


def task_of(model: Any) -> SortingTask:
    """The sorting task ``model`` (a saved or trained transformer) was built for, matched on its
    ``config``'s vocabulary size, context length and causality."""
    c = model.config
    for task in TASKS.values():
        if (task.vocab_size, task.seq_len, task.causal) == (c.vocab_size, c.max_len, c.causal):
            return task
    raise TpcoreError(f"model (vocab {c.vocab_size}, max_len {c.max_len}, causal {c.causal}) "
                      f"matches none of the sorting tasks {tuple(TASKS)}")


def one_list(task: SortingTask, values: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``values`` as a batch of one list ``((1, L), (1,))`` for ``task``.

    The bidirectional task takes 1..L values as they are. The causal tasks always sort L values,
    so a shorter list is filled up to L with values that sort after all of its own (the largest
    value; for the distinct task the largest values it lacks), and the first ``len(values)``
    items of the sorted list are its sorted values. Raises naming the list when a value is out
    of range, the distinct task gets a repeated value, or no such filling exists.
    """
    if isinstance(values, str) or not all(
            isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values):
        raise TpcoreError(f"list {list(values) if not isinstance(values, str) else values!r:.60}: "
                          "expected integers")
    values = [int(v) for v in values]
    n = len(values)
    what = f"{'1..' if task.variable_length else 'up to '}{task.length}"
    if not 1 <= n <= task.length or min(values) < 0 or max(values) >= task.n_values:
        raise TpcoreError(f"list {values} does not fit the {task.name} task: expected {what} "
                          f"values in 0..{task.n_values - 1}")
    if task.distinct and len(set(values)) < n:
        raise TpcoreError(f"list {values} repeats a value; the {task.name} task sorts distinct "
                          "values")
    lists = np.full((1, task.length), task.n_values, dtype=np.int64)
    lists[0, :n] = values
    if task.variable_length or n == task.length:
        return lists, np.array([n])
    missing = task.length - n
    fill = ([v for v in range(task.n_values) if v not in values][-missing:] if task.distinct
            else [task.n_values - 1] * missing)
    if min(fill) < max(values):
        raise TpcoreError(f"list {values} cannot be filled up to {task.length} distinct values "
                          f"that sort after it (values 0..{task.n_values - 1}); give "
                          f"{task.length} values")
    lists[0, n:] = fill
    return lists, np.array([task.length])


def _lengths(task: SortingTask, n: int, rng: np.random.Generator) -> np.ndarray:
    if task.variable_length:
        return rng.integers(1, task.length + 1, n)
    return np.full(n, task.length, dtype=np.int64)


def _blank_tail(task: SortingTask, lists: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    lists[np.arange(task.length)[None, :] >= lengths[:, None]] = task.n_values
    return lists


def random_lists(task: SortingTask, n: int, rng: np.random.Generator
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uniform lists: ``(lists (n, L), lengths (n,))``. Distinct tasks draw a uniform
    ``L``-subset in uniform order (the first ``L`` of a random permutation)."""
    if task.distinct:
        lists = np.argsort(rng.random((n, task.n_values)), axis=1)[:, : task.length]
    else:
        lists = rng.integers(0, task.n_values, (n, task.length))
    lengths = _lengths(task, n, rng)
    return _blank_tail(task, lists.astype(np.int64), lengths), lengths


def hard_sets(n: int, n_values: int, rng: np.random.Generator) -> np.ndarray:
    """The post's value sets ``S: (n, V)`` booleans, never empty: with probability 2/3 each value
    kept with probability ``p ~ U(0,1)`` (rows redrawn while empty), else ``[min(x,y), max(x,y)]``
    for uniform ``x, y``."""
    values = np.arange(n_values)
    subset = rng.random(n) < 2 / 3
    xy = np.sort(rng.integers(0, n_values, (n, 2)), axis=1)
    sets = (values >= xy[:, :1]) & (values <= xy[:, 1:])
    todo = np.flatnonzero(subset)
    while todo.size:
        p = rng.random(todo.size)[:, None]
        draw = rng.random((todo.size, n_values)) < p
        sets[todo] = draw
        todo = todo[~draw.any(axis=1)]
    return sets


@lru_cache(maxsize=4)
def _set_table(n_values: int) -> tuple[np.ndarray, np.ndarray]:
    """For every set ``S`` of values coded as ``c = sum_{v in S} 2^v``: its elements in increasing
    order ``(2^V, V)`` (padding after them) and its size ``(2^V,)``."""
    bits = (np.arange(2**n_values)[:, None] >> np.arange(n_values)) & 1
    return np.argsort(1 - bits, axis=1, kind="stable"), bits.sum(axis=1)


def hard_lists(task: SortingTask, n: int, rng: np.random.Generator
               ) -> tuple[np.ndarray, np.ndarray]:
    """``n`` lists of uniform draws (with replacement) from :func:`hard_sets`.

    Each set is coded as an integer and its sorted elements looked up in a table; the ``j``-th
    item of a list is ``elements[floor(u_j |S|)]`` for ``u_j ~ U(0, 1)``."""
    if task.distinct:
        raise TpcoreError(f"task {task.name!r} has distinct values; the hard generator draws "
                          "with replacement (use the random generator)")
    elements, sizes = _set_table(task.n_values)
    code = hard_sets(n, task.n_values, rng) @ (1 << np.arange(task.n_values))
    size = sizes[code][:, None]
    index = (rng.random((n, task.length), dtype=np.float32) * size).astype(np.intp)
    np.minimum(index, size - 1, out=index)  # float32 rounding can reach |S| itself
    lists = elements[code[:, None], index]
    lengths = _lengths(task, n, rng)
    return _blank_tail(task, lists, lengths), lengths


def generate(task: SortingTask, generator: str, n: int, rng: np.random.Generator
             ) -> tuple[np.ndarray, np.ndarray]:
    """``random_lists`` or ``hard_lists`` by name."""
    if generator not in GENERATORS:
        raise TpcoreError(f"generator {generator!r} unknown; expected one of {GENERATORS}")
    return (hard_lists if generator == "hard" else random_lists)(task, n, rng)


def all_distinct_lists(task: SortingTask, rng: np.random.Generator) -> np.ndarray:
    """Every ``L``-subset of the values (``C(V, L)`` rows, 3003 for the distinct task), each in a
    random order: the exhaustive test "up to reordering"."""
    combos = np.array(list(combinations(range(task.n_values), task.length)), dtype=np.int64)
    order = np.argsort(rng.random(combos.shape), axis=1)
    return np.take_along_axis(combos, order, axis=1)


def encode(task: SortingTask, lists: np.ndarray, lengths: np.ndarray | None = None
           ) -> dict[str, Any]:
    """Model batch for ``lists: (B, L)``: ``tokens, targets, mask: (B, N)`` (and ``pad`` for the
    bidirectional task), with ``N = task.seq_len``; targets are 0 where ``mask`` is False."""
    b, length = lists.shape
    if length != task.length:
        raise TpcoreError(f"lists have length {length}; task {task.name!r} expects {task.length}")
    if lengths is None:
        lengths = np.full(b, length, dtype=np.int64)
    ordered = np.sort(lists, axis=1)
    k = np.arange(length)[None, :]
    valid = k < lengths[:, None]
    tokens = np.full((b, task.seq_len), task.pad, dtype=np.int64)
    tokens[:, 0] = task.bos
    targets = np.zeros((b, task.seq_len), dtype=np.int64)
    mask = np.zeros((b, task.seq_len), dtype=bool)
    first = task.first_target
    targets[:, first : first + length] = np.where(valid, ordered, 0)
    mask[:, first : first + length] = valid
    if task.causal:
        tokens[:, 1 : length + 1] = lists
        tokens[:, length + 1] = task.sep
        tokens[:, length + 2 :] = ordered
        return {"tokens": tokens, "targets": targets, "mask": mask}
    tokens[:, 1 : length + 1] = np.where(valid, lists, task.pad)
    tokens[np.arange(b), lengths + 1] = task.sep
    return {"tokens": tokens, "targets": targets, "mask": mask, "pad": tokens == task.pad}


def batches(task: SortingTask, batch_size: int, seed: int, generator: str | None = None,
            start: int = 0):
    """Endless fresh training batches (host arrays): the hard generator for tasks with
    duplicates, the random one for distinct values (``generator`` overrides). ``start``: begin
    with batch ``start`` of that sequence, as a resumed run does (the lists of the batches
    before it are drawn, not encoded)."""
    generator = generator or ("random" if task.distinct else "hard")
    rng = np.random.default_rng(seed)
    for _ in range(start):
        generate(task, generator, batch_size, rng)
    while True:
        yield encode(task, *generate(task, generator, batch_size, rng))


def sorted_predictions(task: SortingTask, logits: Any, lengths: np.ndarray) -> np.ndarray:
    """The model's sorted list ``(B, L)`` read from ``logits: (B, N, C)`` (argmax at the target
    positions, teacher-forced for causal tasks; ``V`` past each list's length).

    A causal model sorts a list correctly by greedy decoding exactly when every teacher-forced
    prediction is right (by induction the fed prefix is then the true one), so this also decides
    full-list correctness of generation."""
    first = task.first_target
    pred = to_host(logits[:, first : first + task.length].argmax(axis=-1)).astype(np.int64)
    return _blank_tail(task, pred, lengths)

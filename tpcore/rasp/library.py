"""The RASP tasks of "Learning Transformer Programs", written in the program language.

Each ``write_<task>(vocab, max_len)`` builds the task's program for the inputs of
:func:`tpcore.tasks.rasp.make_rasp` (``<s>`` first, ``</s>`` last for sort and reverse,
labels its classes), so that the compiled model predicts the task's targets on every input and
trains on its data. :data:`TASKS` lists them with the sizes of the paper's small scale;
:func:`task_check` compares a compiled model with the task's own targets on every input (or a
stated sample).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.rasp import lang
from tpcore.rasp.compiler import Compiled, run_engine
from tpcore.rasp.lang import (
    EQ,
    Program,
    aggregate,
    indices,
    map,
    select,
    selector_width,
    sequence_map,
    tokens,
)
from tpcore.tasks.data import BOS, EOS, PAD
from tpcore.tasks.induction import LETTERS, NUMBERS, UNK
from tpcore.tasks.rasp import DYCK, RASP, causal, dyck_labels, frame, letters, special_tokens


def _symbols(vocab: tuple[str, ...]) -> list[str]:
    return [t for t in vocab if t not in (PAD, BOS, EOS)]


def write_reverse(vocab: tuple[str, ...], max_len: int) -> lang.Node:
    """``x_{L+1-i}``: find ``</s>``'s position, then copy the token that far back."""
    syms = _symbols(vocab)
    eos = aggregate(select(tokens, indices, lambda k, q: k == EOS), indices).named("eos")
    source = sequence_map(lambda e, i: max(e - i, 0), eos, indices).named("source")
    symbol = map(lambda t: t if t in syms else syms[0], tokens).named("symbol")
    return aggregate(select(indices, source, EQ), symbol).named("reverse")


def write_hist(vocab: tuple[str, ...], max_len: int) -> lang.Node:
    """``h(x_i)``: count the positions holding the same token."""
    same = selector_width(select(tokens, tokens, EQ)).named("same")
    return map(lambda c: str(min(max(c, 1), max_len - 1)), same).named("hist")


def write_double_hist(vocab: tuple[str, ...], max_len: int) -> lang.Node:
    """How many distinct tokens occur as often as ``x_i``: the positions whose count equals
    this one's, divided by that count (``<s>`` counts nothing)."""
    syms = _symbols(vocab)
    count = selector_width(select(tokens, tokens, {t: t for t in syms})).named("count")
    label = map(lambda c: c, count).named("count_label")
    alike = selector_width(select(label, label, EQ)).named("alike")
    return sequence_map(lambda a, c: str(min(max(a // c if c else 1, 1), max_len - 1)),
                        alike, count).named("double_hist")


def write_sort(vocab: tuple[str, ...], max_len: int) -> lang.Node:
    """The ``i``-th smallest token: the smallest ``v`` with at least ``i`` tokens ``<= v``
    (one count per symbol but the last), decided two symbols at a time."""
    syms = _symbols(vocab)
    reached = []
    for v in syms[:-1]:
        below = map(lambda t, v=v: "y" if t in syms and t <= v else "n", tokens).named(
            f"upto_{v}")
        width = selector_width(select(below, tokens, lambda k, q: k == "y")).named(f"n_{v}")
        count = map(lambda c: c, width).named(f"count_{v}")
        reached.append(sequence_map(lambda c, i, v=v: v if c >= i else "", count, indices)
                       .named(f"reached_{v}"))
    while len(reached) > 2:
        pairs = zip(reached[::2], reached[1::2])
        reached = [sequence_map(lambda x, y: x or y, a, b).named(f"{a.name}_{b.name[8:]}")
                   for a, b in pairs] + reached[len(reached) - len(reached) % 2:]
    if len(reached) == 1:
        return map(lambda x: x or syms[-1], reached[0]).named("sort")
    return sequence_map(lambda x, y: x or y or syms[-1], *reached).named("sort")


def write_dyck1(vocab: tuple[str, ...], max_len: int) -> lang.Node:
    """Per prefix: ``T`` balanced, ``P`` a valid prefix, ``F`` invalid (causal): the prefix's
    opening and closing counts, and whether any prefix so far closed more than it opened."""
    opened = selector_width(select(tokens, tokens, lambda k, q: k == "(")).named("opened")
    closed = selector_width(select(tokens, tokens, lambda k, q: k == ")")).named("closed")
    state = sequence_map(lambda o, c: "F" if c > o else "T" if o == c else "P", opened,
                         closed).named("state")
    failed = aggregate(select(state, tokens, lambda k, q: k == "F"), state).named("failed")
    return sequence_map(lambda s, f: "F" if f == "F" else s, state, failed).named("dyck1")


BRACKETS = {"(": "round_open", ")": "round_close", "{": "curly_open", "}": "curly_close"}
"""Dyck-2's brackets and the names its program gives their variables."""


def write_dyck2(vocab: tuple[str, ...], max_len: int) -> lang.Node:
    """Dyck-2 per prefix (causal), by counting alone: the depth after each bracket; each
    bracket's level (the depth outside it) kept per bracket type; at a closing bracket, the
    openings and closings of each type at its level so far, equal for both types exactly when it
    closes the type its opener opened (between a level's opening bracket and its closing one,
    every bracket lies deeper); a prefix fails once the depth goes below 0 or a count differs,
    and stays failed."""
    side = map(lambda t: "open" if t in "({" else "close" if t in ")}" else "", tokens).named(
        "side")
    opened = selector_width(select(side, side, lambda k, q: k == "open")).named("opened")
    closed = selector_width(select(side, side, lambda k, q: k == "close")).named("closed")
    depth = sequence_map(lambda o, c: o - c if o >= c else "neg", opened, closed).named("depth")
    level = {b: sequence_map(lambda d, t, b=b: "" if t != b or d == "neg" else d - (b in "({"),
                             depth, tokens).named(f"level_{name}") for b, name in BRACKETS.items()}
    leaves = sequence_map(lambda d, t: d if t in ")}" and d != "neg" else "", depth,
                          tokens).named("leaves")
    at_level = {b: selector_width(select(level[b], leaves, lambda k, q: q != "" and k == q))
                for b in "(){}"}
    kept = [sequence_map(lambda a, b: "" if a == b else "F", at_level[o], at_level[c])
            for o, c in ("()", "{}")]
    bad = sequence_map(lambda x, y: x or y, *kept).named("bad")
    negative = selector_width(select(depth, tokens, lambda k, q: k == "neg")).named("negative")
    mismatched = selector_width(select(bad, tokens, lambda k, q: k == "F")).named("mismatched")
    failed = sequence_map(lambda n, m: "F" if n or m else "", negative, mismatched)
    return sequence_map(lambda d, f: f or ("T" if d == 0 else "P"), depth, failed).named("dyck2")


def _fold(nodes: list[lang.Node], f: Callable[[Any, Any], Any]) -> lang.Node:
    """``nodes`` combined two at a time by ``sequence_map(f, ...)`` until one is left."""
    while len(nodes) > 1:
        nodes = [sequence_map(f, a, b) for a, b in zip(nodes[::2], nodes[1::2])] + \
            nodes[len(nodes) - len(nodes) % 2:]
    return nodes[0]


def _earlier(u: str, s: str) -> Callable[[int, int], str]:
    """Of symbols ``u`` and ``s`` by their first positions ``a`` and ``b`` (0: absent), the one
    seen first, then the absent ones: ``"u"``, ``"su"`` (``u`` absent), ..."""
    return lambda a, b: (u if 0 < a and (a < b or b == 0) else s) + u * (a == 0) + s * (b == 0)


def _above(s: str) -> Callable[[Any, Any], Any]:
    """How many symbols rank above ``s``, added up over the pairs with ``s`` (a pair's label:
    the higher symbol then the absent ones; or a sum so far); ``"absent"`` once ``s`` is."""
    def add(x: Any, y: Any) -> Any:
        parts = [str(z) for z in (x, y)]
        if "absent" in parts or any(s in z[1:] for z in parts if not z.isdigit()):
            return "absent"
        return sum(int(z) if z.isdigit() else z[0] != s for z in parts)
    return add


def write_most_freq(vocab: tuple[str, ...], max_len: int) -> lang.Node:
    """The distinct tokens by decreasing count, ties to the earlier first occurrence, then
    ``<s>``: per symbol its count and its first position (the closest match to position 0, read
    there and copied everywhere; 0 when absent); per pair of symbols the one ranked higher; per
    symbol how many rank above it; position ``i`` takes the symbol with ``i - 1`` above it."""
    syms = _symbols(vocab)
    count = {s: selector_width(select(tokens, indices, lambda k, q, s=s: k == s)) for s in syms}
    first = {s: aggregate(select(indices, indices, lambda k, q: k == 0), aggregate(
        select(tokens, indices, lambda k, q, s=s: k == s), indices)) for s in syms}
    pair = {}
    for u, s in itertools.combinations(syms, 2):
        more = sequence_map(lambda a, b: (a > b) - (a < b), count[u], count[s])
        earlier = sequence_map(_earlier(u, s), first[u], first[s])
        pair[u, s] = pair[s, u] = sequence_map(
            lambda m, e, u=u, s=s: (u if m > 0 else s if m < 0 else e[0]) + e[1:], more, earlier)
    picks = [sequence_map(lambda r, i, s=s: s if r == i - 1 else "",
                          _fold([pair[u, s] for u in syms if u != s], _above(s)), indices)
             for s in syms]
    return map(lambda x: x or BOS, _fold(picks, lambda x, y: x or y)).named("most_freq")


def write_induction(vocab: tuple[str, ...], max_len: int) -> lang.Node:
    """The in-context task (causal): at a letter, the number that followed the latest earlier
    occurrence of that letter (``unk`` if none). A previous-token head, then an induction head
    keyed on its output."""
    letters_, numbers = [t for t in vocab if t in LETTERS], [t for t in vocab if t in NUMBERS]
    prev = aggregate(select(indices, indices, lambda k, q: k == q - 1), tokens).named("prev")
    follows = aggregate(select(prev, tokens, {x: x for x in letters_}), tokens).named("follows")
    return map(lambda t: t if t in numbers else UNK, follows).named("induction")


@dataclass(frozen=True)
class Task:
    """A task at the paper's scale: ``vocab_size`` token ids and ``max_len`` positions as
    :func:`tpcore.tasks.registry.make_task` counts them, and its program."""

    name: str
    vocab_size: int
    max_len: int
    write: Callable[[tuple[str, ...], int], lang.Node]

    def vocab(self) -> tuple[str, ...]:
        if self.name == "induction":
            return (PAD, BOS, *LETTERS, *NUMBERS)
        if self.name in DYCK:
            words = ["(", ")", "{", "}"][: 2 * DYCK[self.name]]
        else:
            words = letters(self.vocab_size - len(special_tokens(self.name)))
        return (*special_tokens(self.name), *words)

    def classes(self) -> tuple[str, ...]:
        if self.name == "induction":
            return (*NUMBERS, UNK)
        if self.name in DYCK:
            return ("T", "P", "F")
        x = np.zeros((1, self.content_len()), dtype=np.int64)
        return tuple(RASP[self.name](x, len(_symbols(self.vocab())))[1])

    def content_len(self) -> int:
        """The most content tokens an input holds (framing excluded)."""
        return self.max_len - 1 - (EOS in self.vocab())

    def program(self) -> Program:
        """The task's written program, on its inputs and classes."""
        vocab = self.vocab()
        return Program(self.write(vocab, self.max_len), vocab, self.max_len, bos=BOS,
                       eos=EOS if EOS in vocab else None, pad=PAD,
                       causal=self.name == "induction" or causal(self.name),
                       classes=self.classes(), name=self.name)

    def domain(self, exhaustive: int, sample: int, seed: int
               ) -> tuple[dict[str, np.ndarray], int, bool]:
        """The task's inputs with their targets (``tokens``, ``targets``, ``mask``, ``pad``,
        as :func:`tpcore.tasks.rasp.frame` lays them out): all of them when there are at most
        ``exhaustive``, else ``sample`` random ones; with their number and whether that is
        all."""
        if self.name == "induction":
            return _induction_domain(self.max_len, exhaustive, sample, seed)
        n, v = self.content_len(), len(_symbols(self.vocab()))
        total = sum(v ** length for length in range(1, n + 1))
        gen = np.random.default_rng(seed)
        if total <= exhaustive:
            x = np.full((total, n), -1, dtype=np.int64)
            start = 0
            for length in range(1, n + 1):
                rows = np.asarray(np.unravel_index(np.arange(v ** length), (v,) * length)).T
                x[start:start + len(rows), :length] = rows
                start += len(rows)
        else:
            x = gen.integers(0, v, (sample, n))
            x[np.arange(n)[None, :] >= gen.integers(1, n + 1, sample)[:, None]] = -1
        if self.name in DYCK:
            y = np.where(x >= 0, dyck_labels(np.maximum(x, 0), DYCK[self.name]), -1)
        else:
            y = RASP[self.name](x, v)[0]
        return frame(x, y, EOS in self.vocab()), total, total <= exhaustive


def _induction_domain(length: int, exhaustive: int, sample: int, seed: int
                      ) -> tuple[dict[str, np.ndarray], int, bool]:
    """The in-context task's inputs (:func:`tpcore.tasks.induction.make_induction`): ``<s>``
    then letters and numbers alternating, ``length`` tokens in all, each labelled at its
    letters."""
    steps = length // 2
    total = len(LETTERS) ** steps * len(NUMBERS) ** (steps - 1)
    if total <= exhaustive:
        code = np.asarray(np.unravel_index(np.arange(total), (len(LETTERS),) * steps
                                           + (len(NUMBERS),) * (steps - 1))).T
    else:
        gen = np.random.default_rng(seed)
        code = np.concatenate([gen.integers(0, len(LETTERS), (sample, steps)),
                               gen.integers(0, len(NUMBERS), (sample, steps - 1))], axis=1)
    keys, values = code[:, :steps], code[:, steps:]
    s = len(code)
    tokens = np.ones((s, length), dtype=np.int64)
    tokens[:, 1::2] = 2 + keys
    tokens[:, 2::2] = 2 + len(LETTERS) + values
    targets = np.zeros_like(tokens)
    for i in range(steps):
        target = np.full(s, len(NUMBERS))
        for j in range(i):
            hit = keys[:, j] == keys[:, i]
            target[hit] = values[hit, j]
        targets[:, 1 + 2 * i] = target
    mask = np.zeros(tokens.shape, dtype=bool)
    mask[:, 1::2] = True
    return ({"tokens": tokens, "targets": targets, "mask": mask, "pad": tokens == 0}, total,
            total <= exhaustive)


TASKS = {t.name: t for t in (
    Task("reverse", 8, 8, write_reverse), Task("hist", 8, 8, write_hist),
    Task("double_hist", 8, 8, write_double_hist), Task("sort", 8, 8, write_sort),
    Task("most_freq", 8, 8, write_most_freq), Task("dyck1", 4, 16, write_dyck1),
    Task("dyck2", 6, 16, write_dyck2),
    Task("induction", 10, 10, write_induction))}
"""The tasks written so far, at the paper's scale (the RASP tasks of Table 1, small; the
in-context task of Fig. 2)."""


def task(name: str) -> Task:
    """The task ``name`` of :data:`TASKS`."""
    if name not in TASKS:
        raise TpcoreError(f"no written program for task {name!r}; expected one of "
                          f"{', '.join(TASKS)}")
    return TASKS[name]


def task_check(compiled: Compiled, t: Task, engine: str = "model", exhaustive: int = 400_000,
               sample: int = 20_000, seed: int = 0) -> dict[str, Any]:
    """The compiled program's accuracy on the task's own targets at every target position,
    run by ``engine`` (:data:`tpcore.rasp.compiler.ENGINES`), on the inputs of
    :meth:`Task.domain`."""
    data, total, everything = t.domain(exhaustive, sample, seed)
    lengths = (~data["pad"]).sum(axis=1)
    vocab = t.vocab()
    sequences = [[vocab[i] for i in row[:n]] for row, n in zip(data["tokens"], lengths)]
    got = run_engine(engine, compiled, data["tokens"], lengths, sequences,
               list(compiled.ir.classifier.classes))
    mask, right = data["mask"], got == data["targets"]
    return {"task": t.name, "engine": engine, "inputs": len(lengths), "domain": total,
            "exhaustive": everything, "token_accuracy": float(right[mask].mean()),
            "sequence_accuracy": float((right | ~mask).all(axis=1).mean())}

"""The program language: RASP's primitives, restricted to what a Transformer Program computes.

A program is a graph of :class:`Node` objects built by calling the primitives below on the three
inputs :data:`tokens`, :data:`indices` and :data:`ones`; nothing runs until a :class:`Program`
fixes the vocabulary and the maximum length. Then every node gets its value set and its lookup
tables, by calling the user's functions on each value (never on a string of code), and every
construct the architecture cannot express is refused, naming the node.

Kinds: a *categorical* node holds one of a finite set of labels (strings or numbers) per
position; a *numerical* node holds a number. The primitives and what they compute at query
position ``i`` of an input of length ``L`` (positions ``j < L`` are visible, and only ``j <= i``
in a ``causal`` program):

- ``select(keys, queries, predicate)``: a selector, matching key position ``j`` to query position
  ``i`` when ``predicate(keys[j], queries[i])``. Both sides categorical. As in Transformer
  Programs, each query value may match **one** key value at most (the predicate is a partial map
  from query values to key values); a predicate matching two key values for a query value is
  refused (map the keys so that one value stands for both).
- ``aggregate(selector, values)``: categorical ``values`` copied from the *closest* matching
  position (the nearer one, the earlier on equal distance, the query itself only when nothing
  else matches); position 0 (BOS) when nothing matches. One categorical attention head.
- ``aggregate_sum(selector, values)``: ``sum_j values[j]`` over the matching positions, for
  numerical ``values`` with integer values. One numerical attention head (a sum, where RASP's
  numerical aggregate is a mean).
- ``selector_width(selector)``: the number of matching positions, ``aggregate_sum(selector,
  ones)``.
- ``map(f, x)`` and ``sequence_map(f, x, y)``: ``f`` of one or two variables of the same kind,
  giving a categorical label. One MLP (categorical or numerical) computing a lookup table.

The output of a program is a categorical node whose labels are its classes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tpcore.errors import TpcoreError
from tpcore.programs.values import LIMITS, Label, check_label, check_size, check_variable_name

CATEGORICAL, NUMERICAL = "categorical", "numerical"
_counter = itertools.count()


class Node:
    """A variable of a program: its ``kind``, the nodes it reads (``parents``) and its name
    (``.named(...)`` sets one; else ``{primitive}_{n}``)."""

    kind: str = CATEGORICAL
    primitive: str = "node"

    def __init__(self, *parents: Node):
        self.parents = parents
        self.name = f"{self.primitive}_{next(_counter)}"

    def named(self, name: str) -> Node:
        """Name this node (a Python identifier); returns the node."""
        self.name = check_variable_name(name, "node name")
        return self

    def __repr__(self) -> str:
        return f"<{self.kind} {self.primitive} {self.name!r}>"


class Input(Node):
    """One of the three inputs (:data:`tokens`, :data:`indices`, :data:`ones`)."""

    primitive = "input"

    def __init__(self, name: str, kind: str):
        super().__init__()
        self.name, self.kind = name, kind


tokens = Input("tokens", CATEGORICAL)
"""The input tokens: the program's vocabulary."""
indices = Input("positions", CATEGORICAL)
"""The positions ``0 .. max_len - 1`` (the variable ``positions`` of the program IR)."""
ones = Input("ones", NUMERICAL)
"""The number 1 at every position."""

Predicate = Callable[[Any, Any], bool] | Mapping[Any, Any]


def EQ(key: Any, query: Any) -> bool:  # noqa: N802 (RASP's name)
    """RASP's ``Comparison.EQ``: the key equals the query."""
    return bool(key == query)


class Select:
    """A selector (see the module docstring); not a variable itself."""

    def __init__(self, keys: Node, queries: Node, predicate: Predicate):
        for what, x in (("keys", keys), ("queries", queries)):
            _check_node(x, f"select {what}")
            if x.kind != CATEGORICAL:
                raise TpcoreError(f"select: {what} {x.name!r} is numerical; a head matches "
                                  "categorical keys and queries")
        if not (callable(predicate) or isinstance(predicate, Mapping)):
            raise TpcoreError(f"select: predicate {predicate!r} is neither a function of (key, "
                              "query) nor a mapping query -> key")
        self.keys, self.queries, self.predicate = keys, queries, predicate


class Aggregate(Node):
    """A head: categorical (``aggregate``) or numerical (``aggregate_sum``)."""

    primitive = "aggregate"

    def __init__(self, selector: Select, values: Node, kind: str):
        if not isinstance(selector, Select):
            raise TpcoreError(f"aggregate: {selector!r} is not a selector (make one with "
                              "select)")
        _check_node(values, "aggregate values")
        if values.kind != kind:
            hint = ("aggregate_sum or selector_width" if values.kind == NUMERICAL
                    else "aggregate")
            raise TpcoreError(f"aggregate: values {values.name!r} are {values.kind}; use {hint}")
        super().__init__(selector.keys, selector.queries, values)
        self.selector, self.kind = selector, kind
        if kind == NUMERICAL:
            self.primitive = "aggregate_sum"


class Map(Node):
    """An MLP: ``f`` of one or two variables of the same kind, a categorical label."""

    primitive = "map"

    def __init__(self, f: Callable[..., Any], inputs: Sequence[Node]):
        for x in inputs:
            _check_node(x, "map input")
        if not callable(f):
            raise TpcoreError(f"map: {f!r} is not a function")
        kinds = {x.kind for x in inputs}
        if len(kinds) > 1:
            raise TpcoreError(f"sequence_map reads {inputs[0].kind} {inputs[0].name!r} and "
                              f"{inputs[1].kind} {inputs[1].name!r}; an MLP reads two variables "
                              "of one kind: map one of them to the other kind first")
        super().__init__(*inputs)
        self.f = f
        self.primitive = "map" if len(inputs) == 1 else "sequence_map"


def select(keys: Node, queries: Node, predicate: Predicate) -> Select:
    """The selector matching key position ``j`` to query ``i`` when ``predicate(keys[j],
    queries[i])`` (a function, e.g. :func:`EQ`, or a mapping ``{query value: key value}``)."""
    return Select(keys, queries, predicate)


def aggregate(selector: Select, values: Node) -> Node:
    """Categorical ``values`` at the closest matching position (module docstring)."""
    return Aggregate(selector, values, CATEGORICAL)


def aggregate_sum(selector: Select, values: Node) -> Node:
    """``sum_j values[j]`` over the matching positions (numerical)."""
    return Aggregate(selector, values, NUMERICAL)


def selector_width(selector: Select) -> Node:
    """The number of matching positions (numerical)."""
    return Aggregate(selector, ones, NUMERICAL)


def map(f: Callable[[Any], Any], x: Node) -> Node:  # noqa: A001 (RASP's name)
    """``f(x)`` at each position, a categorical label."""
    return Map(f, (x,))


def sequence_map(f: Callable[[Any, Any], Any], x: Node, y: Node) -> Node:
    """``f(x, y)`` at each position, a categorical label; ``x`` and ``y`` of one kind."""
    return Map(f, (x, y))


def _check_node(x: Any, what: str) -> None:
    if not isinstance(x, Node):
        raise TpcoreError(f"{what}: {x!r} is not a variable of the program language (tokens, "
                          "indices, ones or what the primitives return)")


# ------------------------------------------------------------------------------- program


@dataclass
class Resolved:
    """A node with everything fixed by the program: its ``values`` (labels of a categorical
    node in index order; every value of a numerical one, sorted) and, by primitive,
    ``predicate[q] = k`` (the key index a query index matches, ``-1`` none) or ``table``
    (the output index for each input index, or pair of indices, row-major)."""

    node: Node
    values: tuple[Label, ...]
    predicate: tuple[int, ...] = ()
    table: tuple[int, ...] = ()


@dataclass
class Program:
    """A written program: its ``output`` node and the inputs it runs on.

    ``vocab``: the tokens (BOS/EOS/padding included); ``max_len``: the longest input, framing
    included; ``bos``/``eos``/``pad``: the framing tokens; ``causal``: every head sees only the
    positions up to its query; ``classes``: the output labels as strings in class order
    (default: the output's labels). Building one resolves every node (:class:`Resolved`) in
    dependency order and raises, naming the node, on what cannot be compiled.
    """

    output: Node
    vocab: Sequence[str]
    max_len: int
    bos: str | None = None
    eos: str | None = None
    pad: str | None = None
    causal: bool = False
    classes: Sequence[str] | None = None
    name: str = "program"
    nodes: dict[Node, Resolved] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _check_node(self.output, "program output")
        self.vocab = tuple(self.vocab)
        check_size(len(self.vocab), LIMITS.vocabulary, "vocabulary")
        check_size(self.max_len, LIMITS.max_len, "maximum length")
        if self.max_len < 1 or not all(isinstance(t, str) for t in self.vocab) or \
                len(set(self.vocab)) != len(self.vocab):
            raise TpcoreError("a program needs max_len >= 1 and distinct string tokens")
        for t in (self.bos, self.eos, self.pad):
            if t is not None and t not in self.vocab:
                raise TpcoreError(f"framing token {t!r} is not in the vocabulary")
        self.nodes = {}
        for node in self.order():
            self.nodes[node] = self._resolve(node)
        out = self.nodes[self.output]
        if self.output.kind != CATEGORICAL:
            raise TpcoreError(f"program output {self.output.name!r} is numerical; map it to "
                              "categorical labels (the classes) first")
        labels = [str(v) for v in out.values]
        self.classes = tuple(labels if self.classes is None else self.classes)
        missing = [x for x in labels if x not in self.classes]
        if missing:
            raise TpcoreError(f"program output {self.output.name!r} takes the value "
                              f"{missing[0]!r}, which is not among the classes "
                              f"{list(self.classes)}")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            twice = next(x for x in names if names.count(x) > 1)
            raise TpcoreError(f"two nodes are named {twice!r}")

    def order(self) -> list[Node]:
        """Every node the output depends on, each after the nodes it reads; a cycle (a node
        reading itself through others, possible only by editing ``parents``) raises naming
        it."""
        done: dict[Node, None] = {}
        active: set[Node] = set()
        stack: list[tuple[Node, bool]] = [(self.output, False)]
        while stack:
            node, leaving = stack.pop()
            if leaving:
                active.discard(node)
                done.setdefault(node, None)
                continue
            if node in done:
                continue
            if node in active:
                raise TpcoreError(f"node {node.name!r} reads itself (a cycle)")
            _check_node(node, "program node")
            active.add(node)
            stack.append((node, True))
            for p in reversed(node.parents):
                _check_node(p, f"{node.name} input")
                if p in active:
                    raise TpcoreError(f"node {p.name!r} reads itself (a cycle through "
                                      f"{node.name!r})")
                if p not in done:
                    stack.append((p, False))
            check_size(len(done) + len(active), LIMITS.variables, "nodes")
        return list(done)

    def _resolve(self, node: Node) -> Resolved:
        if node is tokens:
            return Resolved(node, self.vocab)
        if node is indices:
            return Resolved(node, tuple(range(self.max_len)))
        if node is ones:
            return Resolved(node, (1,))
        if isinstance(node, Input):
            raise TpcoreError(f"input {node.name!r} is not one of tokens, indices, ones")
        if isinstance(node, Aggregate):
            return self._resolve_head(node)
        assert isinstance(node, Map)
        return self._resolve_map(node)

    def _resolve_head(self, node: Aggregate) -> Resolved:
        sel = node.selector
        keys, queries = self.nodes[sel.keys], self.nodes[sel.queries]
        predicate = []
        for q in queries.values:
            if isinstance(sel.predicate, Mapping):
                want = sel.predicate.get(q, _NOTHING)
                hits = [i for i, k in enumerate(keys.values) if _same(k, want)]
                if want is not _NOTHING and not hits:
                    raise TpcoreError(f"{node.name}: the predicate maps query value {q!r} to "
                                      f"{want!r}, which is not a value of {sel.keys.name!r}")
            else:
                hits = [i for i, k in enumerate(keys.values) if _call(sel.predicate, node,
                                                                        k, q)]
            if len(hits) > 1:
                shown = ", ".join(repr(keys.values[i]) for i in hits[:4])
                raise TpcoreError(
                    f"{node.name}: the predicate matches {len(hits)} key values ({shown}) for "
                    f"query value {q!r}; a head matches one key value per query value: map "
                    f"{sel.keys.name!r} so that one value stands for them")
            predicate.append(hits[0] if hits else -1)
        if isinstance(sel.predicate, Mapping):
            unknown = [q for q in sel.predicate if not any(_same(q, v) for v in queries.values)]
            if unknown:
                raise TpcoreError(f"{node.name}: the predicate maps {unknown[0]!r}, which is not "
                                  f"a value of {sel.queries.name!r}")
        values = self.nodes[node.parents[2]].values
        if node.kind == NUMERICAL:
            if not all(float(v).is_integer() for v in values):
                raise TpcoreError(f"{node.name}: sums non-integer values of "
                                  f"{node.parents[2].name!r}")
            lo = min(0, self.max_len * int(min(values)))
            hi = max(0, self.max_len * int(max(values)))
            check_size(hi - lo + 1, LIMITS.values, f"{node.name}: values")
            values = tuple(range(lo, hi + 1))
        return Resolved(node, values, predicate=tuple(predicate))

    def _resolve_map(self, node: Map) -> Resolved:
        inputs = [self.nodes[p].values for p in node.parents]
        check_size(len(inputs[0]) * (len(inputs[1]) if len(inputs) > 1 else 1), LIMITS.table,
                   f"{node.name}: table entries")
        outputs: dict[Hashable, int] = {}
        labels: list[Label] = []
        table = []
        for args in itertools.product(*inputs):
            y = _call(node.f, node, *args)
            if isinstance(y, bool) or not isinstance(y, (str, int, float)):
                raise TpcoreError(f"{node.name}: f{args!r} returned {y!r}; return a string or "
                                  "a number (not a bool)")
            check_label(y, node.name)
            if y not in outputs:
                outputs[y] = len(labels)
                labels.append(y)
            table.append(outputs[y])
        check_size(len(labels), LIMITS.values, f"{node.name}: output values")
        return Resolved(node, tuple(labels), table=tuple(table))


_NOTHING = object()


def _same(a: Any, b: Any) -> bool:
    """Equal labels of the same type family (``1`` and ``"1"`` differ; ``1`` and ``1.0`` not)."""
    return isinstance(a, str) == isinstance(b, str) and a == b


def _call(f: Callable[..., Any], node: Node, *args: Any) -> Any:
    """``f(*args)``, an exception in it named with the node and the arguments."""
    try:
        return f(*args)
    except Exception as exc:  # the user's function failed: say where
        raise TpcoreError(f"{node.name}: f{args!r} raised {type(exc).__name__}: {exc}") from None

"""A written program -> its layout in a Transformer Program and its program IR.

Layer assignment (:func:`assign`) follows what each module of a layer can read: a layer's heads
read the categorical and numerical variables written before the layer; its categorical MLPs also
read the outputs of its categorical heads, its numerical MLPs those of its numerical heads. A
module's layer lies between its earliest (the first layer where everything it reads is there:
its dependency depth; the deepest module sets how many layers the program needs) and its latest
(the last layer that still leaves each module reading it a layer it can sit in). Every layer of
a Transformer Program carries as many modules of a kind as its widest layer, so within those
windows the modules are spread to keep the widest layer narrow (:func:`spread`). Each module
then gets the next index among the modules of its kind in its layer (in the order the program
lists them), which names it as the model does: ``attn_{l}_{h}``, ``num_attn_{l}_{h}``,
``mlp_{l}_{i}``, ``num_mlp_{l}_{i}``, writing ``{name}_outputs``.

The widths (:class:`Layout`): ``k`` (the values of an MLP output) is the largest number of labels
an MLP gives, and grows by one where a head needs a key index that no key value takes (a query
value that matches nothing) and every index of the stream's width ``d = max(V, max_len, k)`` is
taken. The IR (:func:`to_ir`) is the program in the model's names, which is what decompiling
the compiled model gives back; ``meta["written_names"]`` maps each module to the node it
computes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.programs.ir import Classifier, Head, Mlp, Program, ProgramModule, Variable
from tpcore.rasp import lang

KIND_OF = {("aggregate", lang.CATEGORICAL): "attn", ("aggregate", lang.NUMERICAL): "num_attn",
           ("map", lang.CATEGORICAL): "mlp", ("map", lang.NUMERICAL): "num_mlp"}
"""The model's module kind of each primitive, by the kind of what it reads (a head: of its
values; an MLP: of its inputs)."""
KINDS = ("attn", "num_attn", "mlp", "num_mlp")
"""The module kinds in a layer's execution order."""


@dataclass(frozen=True)
class Placed:
    """Where a node's module sits: its ``layer``, model module ``kind`` and ``index``."""

    layer: int
    kind: str
    index: int

    @property
    def name(self) -> str:
        return f"{self.kind}_{self.layer}_{self.index}"

    @property
    def output(self) -> str:
        return f"{self.name}_outputs"


@dataclass(frozen=True)
class Layout:
    """The model a program needs: ``layers``, per layer the most modules of each kind
    (``counts[kind]``) and ``k``, the values of an MLP output (the hidden units an MLP needs
    are counted where its weights are built, :mod:`tpcore.rasp.weights`)."""

    layers: int
    counts: dict[str, int]
    k: int


def module_kind(node: lang.Node) -> str:
    """``attn``, ``num_attn``, ``mlp`` or ``num_mlp`` for a head or MLP node."""
    if isinstance(node, lang.Aggregate):
        return KIND_OF["aggregate", node.kind]
    return KIND_OF["map", node.parents[0].kind]


def assign(program: lang.Program, layers: int | None = None) -> dict[lang.Node, Placed]:
    """The place of every module node in a model of ``layers`` layers (None: as many as the
    program needs; fewer raises, naming the chain of modules that needs them; module
    docstring)."""
    kinds = {n: module_kind(n) for n in program.nodes if not isinstance(n, lang.Input)}
    first: dict[lang.Node, int] = {}
    for node, kind in kinds.items():  # program.nodes lists parents first
        first[node] = max((earliest(kind, kinds[p], first[p]) for p in node.parents if p in kinds),
                          default=0)
    needed = 1 + max(first.values(), default=0)
    if layers is not None and layers < needed:
        chain = " -> ".join(f"{n.name} (layer {first[n]})" for n in deepest_chain(kinds, first))
        raise TpcoreError(f"program {program.name!r} needs {needed} layers, not {layers}: "
                          f"{chain}")
    layer = spread(kinds, needed if layers is None else layers)
    placed: dict[lang.Node, Placed] = {}
    used: dict[tuple[int, str], int] = {}
    for node, kind in kinds.items():
        index = used.get((layer[node], kind), 0)
        used[layer[node], kind] = index + 1
        placed[node] = Placed(layer[node], kind, index)
    return placed


def spread(kinds: dict[lang.Node, str], layers: int) -> dict[lang.Node, int]:
    """A layer for each module (``kinds``: the module nodes, parents first, and their kinds) in
    ``layers`` layers, keeping the most modules of each kind in one layer small.

    Each module's latest layer comes from the modules reading it, last to first. Then, for
    widths starting at ``ceil(modules of the kind / layers)``: layer by layer, heads before
    MLPs, the modules whose inputs are there are placed, those with the earliest latest layer
    first, up to the kind's width; when a module is left past its latest layer, its kind's width
    grows by one and the layers are filled again. The widths only grow, and at the widths of
    placing every module in its earliest layer nothing is left behind, so this ends."""
    readers: dict[lang.Node, list[lang.Node]] = {n: [] for n in kinds}
    for node in kinds:
        for p in node.parents:
            if p in kinds:
                readers[p].append(node)
    latest: dict[lang.Node, int] = {}
    for node in reversed(kinds):
        latest[node] = min((latest[r] - (earliest(kinds[r], kinds[node], 0) == 1)
                            for r in readers[node]), default=layers - 1)
    order = {n: i for i, n in enumerate(kinds)}
    width = {kind: -(-sum(k == kind for k in kinds.values()) // layers) for kind in KINDS}
    while True:
        layer: dict[lang.Node, int] = {}
        late = None
        for here in range(layers):
            for kind in KINDS:
                ready = sorted((n for n, k in kinds.items() if k == kind and n not in layer
                                and all(p in layer and earliest(kind, kinds[p], layer[p]) <= here
                                        for p in n.parents if p in kinds)),
                               key=lambda n: (latest[n], order[n]))
                layer.update((n, here) for n in ready[: width[kind]])
                late = next((n for n in ready[width[kind]:] if latest[n] <= here), None)
                if late is not None:
                    break
            if late is not None:
                break
        if late is None:
            return layer
        width[kinds[late]] += 1


def deepest_chain(kinds: dict[lang.Node, str], first: dict[lang.Node, int]) -> list[lang.Node]:
    """The modules that make the program as deep as it is (``first``: each module's earliest
    layer): from a module in the last layer back through, at each step, a module it reads that
    holds it in its layer."""
    node = max(first, key=first.get)
    chain = [node]
    while True:
        ups = [p for p in node.parents
               if p in kinds and earliest(kinds[node], kinds[p], first[p]) == first[node]]
        if not ups or first[node] == 0:
            return chain[::-1]
        node = ups[0]
        chain.append(node)


def earliest(kind: str, parent_kind: str, parent_layer: int) -> int:
    """The first layer where a module of ``kind`` can read what a module of ``parent_kind`` in
    ``parent_layer`` writes: its own layer for an MLP reading a head of its kind, else the next
    one."""
    same_layer = (kind, parent_kind) in (("mlp", "attn"), ("num_mlp", "num_attn"))
    return parent_layer if same_layer else parent_layer + 1


def layout(program: lang.Program, placed: dict[lang.Node, Placed],
           layers: int | None = None) -> Layout:
    """The widths and counts of the model ``program`` needs with its modules ``placed``
    (module docstring), with ``layers`` layers (None: as many as the placement uses; more: the
    last ones compute nothing it uses)."""
    needed = 1 + max((p.layer for p in placed.values()), default=0)
    layers = needed if layers is None else max(layers, needed)
    counts = {kind: 1 + max((p.index for p in placed.values() if p.kind == kind), default=-1)
              for kind in KINDS}
    k = max([2] + [len(r.values) for n, r in program.nodes.items() if isinstance(n, lang.Map)])
    while True:
        d = max(len(program.vocab), program.max_len, k)
        full = [n for n, r in program.nodes.items() if isinstance(n, lang.Aggregate)
                and -1 in r.predicate and len(program.nodes[n.parents[0]].values) >= d]
        if not full:
            return Layout(layers, counts, k)
        k = d + 1


def variable_name(node: lang.Node, placed: dict[lang.Node, Placed]) -> str:
    """The IR variable of ``node``: an input's own name, else its module's output."""
    return node.name if isinstance(node, lang.Input) else placed[node].output


def to_ir(program: lang.Program, placed: dict[lang.Node, Placed]) -> Program:
    """The program IR of ``program`` in the model's names (module docstring), with
    ``passthrough=False`` (the model's own prediction at every position)."""
    nodes = program.nodes
    variables = {variable_name(n, placed): Variable(variable_name(n, placed), n.kind, r.values)
                 for n, r in nodes.items()}
    for name, values in (("tokens", program.vocab), ("positions", tuple(range(program.max_len))),
                         ("ones", (1,))):
        variables.setdefault(name, Variable(name, "numerical" if name == "ones"
                                            else "categorical", tuple(values)))
    modules: list[ProgramModule] = []
    for node in sorted(placed, key=lambda n: _model_order(placed[n])):
        where, r = placed[node], nodes[node]
        reads = [variable_name(p, placed) for p in node.parents]
        if isinstance(node, lang.Aggregate):
            modules.append(Head(where.name, node.kind, reads[1], reads[0], reads[2], where.output,
                                np.asarray(r.predicate, dtype=np.int64), "closest"))
        else:
            shape = tuple(len(nodes[p].values) for p in node.parents)
            table = np.asarray(r.table, dtype=np.int64).reshape(shape)
            modules.append(Mlp(where.name, node.parents[0].kind, tuple(reads), where.output,
                               table, default_entry(table)))
    out = nodes[program.output]
    classes = tuple(program.classes or ())
    weights = np.zeros((len(out.values), len(classes)))
    weights[np.arange(len(out.values)), [classes.index(str(v)) for v in out.values]] = 1.0
    feature = variable_name(program.output, placed)
    classifier = Classifier(classes, (feature,), {feature: weights}, np.zeros(len(classes)))
    return Program(program.name, variables, modules, classifier, causal=program.causal,
                   bos=program.bos, eos=program.eos, pad=program.pad, passthrough=False,
                   meta={"written_names": {placed[n].name: n.name for n in placed}})


def default_entry(table: np.ndarray) -> int:
    """The most frequent entry of an MLP table (the first on ties): the output its weights give
    when no hidden unit fires."""
    return int(np.bincount(table.ravel()).argmax())


def _model_order(p: Placed) -> tuple[int, int, int]:
    """Execution order in the model: by layer, then categorical heads, numerical heads,
    categorical MLPs, numerical MLPs, then index."""
    return p.layer, KINDS.index(p.kind), p.index

"""A written program -> its layout in a Transformer Program and its program IR.

Layer assignment (:func:`assign`) follows what each module of a layer can read: a layer's heads
read the categorical and numerical variables written before the layer; its categorical MLPs also
read the outputs of its categorical heads, its numerical MLPs those of its numerical heads. Each
module goes into the first layer where everything it reads is there (its dependency depth), and
gets the next index among the modules of its kind in that layer (in the order the program lists
them), which names it as the model does: ``attn_{l}_{h}``, ``num_attn_{l}_{h}``, ``mlp_{l}_{i}``,
``num_mlp_{l}_{i}``, writing ``{name}_outputs``.

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


def assign(program: lang.Program) -> dict[lang.Node, Placed]:
    """The place of every module node (module docstring)."""
    placed: dict[lang.Node, Placed] = {}
    used: dict[tuple[int, str], int] = {}
    for node in program.nodes:
        if isinstance(node, lang.Input):
            continue
        kind = module_kind(node)
        layer = max([earliest(kind, placed[p]) for p in node.parents if p in placed],
                    default=0)
        index = used.get((layer, kind), 0)
        used[layer, kind] = index + 1
        placed[node] = Placed(layer, kind, index)
    return placed


def layout(program: lang.Program, placed: dict[lang.Node, Placed],
           layers: int | None = None) -> Layout:
    """The widths and counts of the model ``program`` needs (module docstring), with ``layers``
    layers (None: as many as it needs; more: the last ones compute nothing it uses)."""
    needed = 1 + max((p.layer for p in placed.values()), default=0)
    if layers is not None and layers < needed:
        chain = " -> ".join(f"{n.name} (layer {placed[n].layer})"
                            for n in deepest_chain(placed))
        raise TpcoreError(f"program {program.name!r} needs {needed} layers, not {layers}: "
                          f"{chain}")
    layers = needed if layers is None else layers
    counts = {kind: 1 + max((p.index for p in placed.values() if p.kind == kind), default=-1)
              for kind in ("attn", "num_attn", "mlp", "num_mlp")}
    k = max([2] + [len(r.values) for n, r in program.nodes.items() if isinstance(n, lang.Map)])
    while True:
        d = max(len(program.vocab), program.max_len, k)
        full = [n for n, r in program.nodes.items() if isinstance(n, lang.Aggregate)
                and -1 in r.predicate and len(program.nodes[n.parents[0]].values) >= d]
        if not full:
            return Layout(layers, counts, k)
        k = d + 1


def deepest_chain(placed: dict[lang.Node, Placed]) -> list[lang.Node]:
    """The modules that make the program as deep as it is: from a module in the last layer
    back through, at each step, a module it reads that holds it in its layer."""
    node = max(placed, key=lambda n: placed[n].layer)
    chain = [node]
    while True:
        here = placed[node]
        ups = [p for p in node.parents
               if p in placed and earliest(here.kind, placed[p]) == here.layer]
        if not ups or here.layer == 0:
            return chain[::-1]
        node = ups[0]
        chain.append(node)


def earliest(kind: str, parent: Placed) -> int:
    """The first layer where a module of ``kind`` can read what ``parent`` writes: its own
    layer for an MLP reading a head of its kind, else the next one."""
    same_layer = (kind, parent.kind) in (("mlp", "attn"), ("num_mlp", "num_attn"))
    return parent.layer if same_layer else parent.layer + 1


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
    return p.layer, ("attn", "num_attn", "mlp", "num_mlp").index(p.kind), p.index

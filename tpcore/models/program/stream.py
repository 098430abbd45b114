"""The stream's variables and the hook vocabulary of the Transformer Program.

The residual stream is a list of named variables (:class:`VarSpec`): categorical ones live in
``x: (m, B, N, d)`` and numerical ones in ``xn: (p, B, N)``, each at its ``slot``, in the order
:func:`stream_variables` lists them:

- the inputs ``tokens`` (or the learned ``embed_0 ...``), ``positions``, ``ones``, then the
  outputs of stream extensions that enter before layer 0;
- per layer ``l``: the categorical heads' outputs ``attn_{l}_{h}_outputs`` (width ``d``), the
  numerical heads' ``num_attn_{l}_{h}_outputs``, the MLPs' ``mlp_{l}_{i}_outputs`` and
  ``num_mlp_{l}_{i}_outputs`` (categorical, width ``k``), then the outputs of extensions that
  enter after layer ``l``.

Hook points: every variable under its own name, as it enters the stream (categorical
``(batch, pos, value)`` of width ``d``, numerical ``(batch, pos)``), and every head's pattern
``attn_{l}_{h}.pattern`` / ``num_attn_{l}_{h}.pattern`` (``(batch, query_pos, key_pos)``: the
attention of a categorical head, the masked scores a numerical head sums with). :class:`StreamNames`
answers the questions of :class:`~tpcore.models.hooks.Hooked` (``hook_names()`` and the rest)
from the variables; :func:`through` runs the hooks on variables as they enter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tpcore.backend import Array
from tpcore.errors import TpcoreError
from tpcore.models.hooks import Hooked
from tpcore.models.program.config import ProgramConfig
from tpcore.models.program.extension import StreamExtension

HookPass = Callable[[str, Array], Array]
"""A pass of the hook points over the stream: ``hooks`` in the forward, ``hooks.grad`` in the
backward (:class:`~tpcore.nn.hookpoints.Hooks`): ``fn(name, value)`` returns the value to use."""
MODULE_KINDS = ("attn", "num_attn", "mlp", "num_mlp")
"""The module kinds of a layer, in execution order; module ``i`` of kind ``K`` in layer ``l`` is
``K_{l}_{i}``."""


@dataclass(frozen=True)
class VarSpec:
    """A stream variable: ``name``, ``kind`` (categorical / numerical), ``width`` (number of
    meaningful one-hot indices; 1 for numerical), ``slot`` (index in its stream) and the module
    that wrote it (None for inputs)."""

    name: str
    kind: str
    width: int
    slot: int
    source: str | None = None


def module_names(kind: str, layer: int, count: int) -> list[str]:
    """The names of layer ``layer``'s ``count`` modules of ``kind`` (:data:`MODULE_KINDS`):
    ``attn_0_0``, ``attn_0_1``, ..."""
    return [f"{kind}_{layer}_{i}" for i in range(count)]


def output_name(module: str) -> str:
    """The variable module ``module`` writes: ``attn_0_1`` -> ``attn_0_1_outputs``."""
    return f"{module}_outputs"


def pattern_name(head: str) -> str:
    """The hook point of head ``head``'s pattern: ``attn_0_1`` -> ``attn_0_1.pattern``."""
    return f"{head}.pattern"


def stream_variables(cfg: ProgramConfig, extensions: list[StreamExtension]
                     ) -> tuple[list[VarSpec], list[tuple[int, int]]]:
    """Every variable of the stream in order (module docstring), and for each layer the numbers
    ``(m, p)`` of categorical and numerical variables before it: the ones it reads."""
    variables: list[VarSpec] = []
    before: list[tuple[int, int]] = []

    def count(kind: str) -> int:
        return sum(v.kind == kind for v in variables)

    def add(name: str, kind: str, width: int, source: str | None = None) -> None:
        variables.append(VarSpec(name, kind, width, count(kind), source))

    def add_extensions(after: int) -> None:
        for e in extensions:
            if e.after == after:
                for name in e.outputs:
                    add(name, "numerical", 1, e.name)

    d, k = cfg.width, cfg.out_k
    if cfg.n_embed_vars:
        for i in range(cfg.n_embed_vars):
            add(f"embed_{i}", "categorical", k)
    else:
        add("tokens", "categorical", cfg.vocab_size)
    add("positions", "categorical", cfg.max_len)
    add("ones", "numerical", 1)
    add_extensions(-1)
    writes = {"attn": (cfg.n_cat_heads, "categorical", d),
              "num_attn": (cfg.n_num_heads, "numerical", 1),
              "mlp": (cfg.n_cat_mlps, "categorical", k),
              "num_mlp": (cfg.n_num_mlps, "categorical", k)}
    for layer in range(cfg.n_layers):
        before.append((count("categorical"), count("numerical")))
        for kind in MODULE_KINDS:
            n, var_kind, width = writes[kind]
            for module in module_names(kind, layer, n):
                add(output_name(module), var_kind, width, module)
        add_extensions(layer)
    return variables, before


def through(fn: HookPass, x: Array, xn: Array, variables: list[VarSpec]) -> None:
    """Pass each variable of the streams ``x``, ``xn`` (or their gradients) through ``fn``
    (``hooks`` or ``hooks.grad``), writing back the ones it edits."""
    for v in variables:
        stream = x if v.kind == "categorical" else xn
        part = stream[v.slot]
        new = fn(v.name, part)
        if new is not part:
            stream[v.slot] = new


@dataclass(frozen=True)
class LayerVariables:
    """The variables a layer's heads write (``heads``: categorical then numerical), those its
    MLPs write (``mlps``: categorical then numerical) and those entering the stream after it
    (``entering``: stream extensions' outputs), each in slot order: the layer passes their hook
    points in this order (its heads pass their patterns' before, as they compute them)."""

    heads: list[VarSpec]
    mlps: list[VarSpec]
    entering: list[VarSpec]


class StreamNames(Hooked):
    """The hook vocabulary of a model with a stream of ``variables`` (:class:`VarSpec`),
    ``extensions`` and ``config.n_layers`` layers (module docstring)."""

    config: Any
    variables: list[VarSpec]
    extensions: list[StreamExtension]

    def n_vars(self, kind: str) -> int:
        """Number of variables of ``kind`` in the full stream."""
        return sum(v.kind == kind for v in self.variables)

    def variable_names(self, kind: str) -> list[str]:
        """Names of the ``kind`` variables in slot order."""
        return [v.name for v in self.variables if v.kind == kind]

    def written(self, li: int, module: str) -> list[VarSpec]:
        """The variables that layer ``li``'s modules ``{module}_{li}_*`` write (``module``:
        one of :data:`MODULE_KINDS`), in slot order."""
        memo = self.__dict__.setdefault("_written_memo", {})
        if (li, module) not in memo:
            head = f"{module}_{li}_"
            memo[li, module] = [v for v in self.variables if v.source and v.source.startswith(head)
                                and v.source[len(head):].isdigit()]
        return memo[li, module]

    def entering(self, after: int) -> list[VarSpec]:
        """The variables that enter the stream after layer ``after``'s MLPs from outside the
        layers: the inputs (``after=-1``) and stream extensions' outputs."""
        names = {o for e in self.extensions if e.after == after for o in e.outputs}
        return [v for v in self.variables
                if v.name in names or (after == -1 and v.source is None)]

    def layer_variables(self, li: int) -> LayerVariables:
        """Layer ``li``'s hook points (:class:`LayerVariables`)."""
        return LayerVariables(self.written(li, "attn") + self.written(li, "num_attn"),
                              self.written(li, "mlp") + self.written(li, "num_mlp"),
                              self.entering(li))

    def hook_names(self) -> list[str]:
        """Every hook point's name, in forward order: the inputs, then per layer the heads'
        patterns and outputs (categorical heads first), the MLPs' outputs, and extensions'
        variables where they enter."""
        names = [v.name for v in self.entering(-1)]
        for li in range(self.config.n_layers):
            layer = self.layer_variables(li)
            names += [pattern_name(v.source) for v in layer.heads] + [v.name for v in layer.heads]
            names += [v.name for v in layer.mlps + layer.entering]
        return names

    def hook_axes(self, name: str) -> tuple[str, ...]:
        """``(batch, query_pos, key_pos)`` for a pattern, ``(batch, pos, value)`` for a
        categorical variable (width ``d``), ``(batch, pos)`` for a numerical one."""
        self.check_hook_names([name])
        if name.endswith(".pattern"):
            return ("batch", "query_pos", "key_pos")
        kind = next(v.kind for v in self.variables if v.name == name)
        return ("batch", "pos", "value") if kind == "categorical" else ("batch", "pos")

    def hook_name(self, kind: str, where: str | None = None) -> str:
        """``("pattern", "attn_0_1")`` -> ``attn_0_1.pattern``; a variable's name is its own
        (``("attn_0_1_outputs",)``)."""
        name = kind if where is None else f"{where}.{kind}"
        self.check_hook_names([name])
        return name

    def heads(self) -> list[list[tuple[str, str]]]:
        """Every head by layer, categorical then numerical: ``("attn_1_0", "cat head 0")``,
        ``("num_attn_1_0", "num head 0")``."""
        names = [v.source for v in self.variables if v.source and "attn_" in v.source]
        return [[(n, f"{'num' if n.startswith('num') else 'cat'} head {n.rsplit('_', 1)[1]}")
                 for n in names if int(n.split("_")[-2]) == layer]
                for layer in range(self.config.n_layers)]

    def head_output(self, head: str) -> tuple[str, dict[str, int]]:
        """Head ``head``'s (e.g. ``"attn_1_0"``) output variable; no selection."""
        out = [v.name for v in self.variables if v.source == head and "attn_" in head]
        if not out:
            heads = [v.source for v in self.variables if v.source and "attn_" in v.source]
            raise TpcoreError(f"head {head!r} does not exist; expected one of "
                              f"{', '.join(heads)}")
        return out[0], {}

"""Keep some of a program's categorical heads: the start of a narrower model of the same layers.

A program decompiled from a model names its categorical heads ``attn_{l}_{h}`` and their output
variables ``attn_{l}_{h}_outputs``. :func:`keep_heads` keeps the heads ``choice[l]`` of each layer
``l`` and renumbers them ``attn_{l}_0, attn_{l}_1, ...`` in that order, output variables renamed
to match, so that the result names its modules and variables as a model with ``len(choice[l])``
categorical heads per layer does (:mod:`tpcore.models.init_from` can then start such a model from
it). Every other module stays as it is; the classifier loses the features of the dropped heads.

:func:`head_choices` lists every choice of ``k`` heads per layer whose kept modules read only kept
variables, in lexicographic order; there are at most ``prod_l C(H_l, k)`` of them, and a program
with more than :data:`MAX_CHOICES` is refused before any is built. Host-only code.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re

from tpcore.errors import TpcoreError
from tpcore.programs.ir import Head, Program

__all__ = ["MAX_CHOICES", "HeadChoice", "categorical_heads", "head_choices", "keep_heads"]

MAX_CHOICES = 256
"""Most head choices :func:`head_choices` enumerates."""

HeadChoice = tuple[tuple[int, ...], ...]
"""The heads kept in each layer, ``choice[l]``: indices ``h`` of ``attn_{l}_{h}``."""

_CAT_HEAD = re.compile(r"attn_(\d+)_(\d+)")


def _heads(program: Program) -> dict[str, tuple[int, int]]:
    """Name -> ``(layer, head)`` of every categorical head ``attn_{l}_{h}``, in module order.
    A layer or head number that is not below the program's number of modules (it cannot have
    more layers or heads than modules) is refused naming the head."""
    out = {}
    bound = len(program.modules)
    for m in program.modules:
        match = _CAT_HEAD.fullmatch(m.name)
        if isinstance(m, Head) and m.kind == "categorical" and match:
            if len(match[1]) > 9 or len(match[2]) > 9 or max(int(match[1]), int(match[2])) >= bound:
                raise TpcoreError(f"head {m.name[:60]!r}: layer and head numbers must be below "
                                  f"the program's {bound} modules")
            out[m.name] = (int(match[1]), int(match[2]))
    return out


def categorical_heads(program: Program) -> list[list[int]]:
    """Per layer ``l``, the indices ``h`` of the program's categorical heads ``attn_{l}_{h}``, in
    module order (layers up to the last that has one)."""
    layers: list[list[int]] = []
    for layer, head in _heads(program).values():
        layers.extend([] for _ in range(layer + 1 - len(layers)))
        layers[layer].append(head)
    return layers


def renaming(program: Program, choice: HeadChoice) -> dict[str, str | None]:
    """Old module name -> new name (``None``: dropped) for every categorical head."""
    heads = categorical_heads(program)
    if len(choice) != len(heads):
        raise TpcoreError(f"head choice {choice} names {len(choice)} layers; the program has "
                          f"categorical heads in {len(heads)}")
    out: dict[str, str | None] = {f"attn_{l}_{h}": None for l, hs in enumerate(heads) for h in hs}
    for layer, kept in enumerate(choice):
        if len(set(kept)) != len(kept) or not set(kept) <= set(heads[layer]):
            raise TpcoreError(f"layer {layer}: head choice {kept}; expected distinct heads of "
                              f"{heads[layer]}")
        for new, h in enumerate(kept):
            out[f"attn_{layer}_{h}"] = f"attn_{layer}_{new}"
    return out


def keep_heads(program: Program, choice: HeadChoice) -> Program:
    """``program`` with only the categorical heads of ``choice``, renumbered per layer in the
    order given (see the module docstring). Refused in one line when a kept module reads the
    output of a dropped head."""
    rename = renaming(program, choice)
    variables: dict[str, str | None] = {m.output: None if rename[m.name] is None
                                        else f"{rename[m.name]}_outputs"
                                        for m in program.modules if m.name in rename}

    def var(name: str, reader: str) -> str:
        new = variables.get(name, name)
        if new is None:
            raise TpcoreError(f"{reader} reads {name!r}, the output of a head not kept")
        return new

    modules = []
    for m in program.modules:
        if rename.get(m.name, m.name) is None:
            continue
        moved = m.with_reads([var(read, m.name) for read in m.reads])
        modules.append(dataclasses.replace(moved, name=rename.get(m.name, m.name),
                                           output=var(m.output, m.name)))
    kept_vars = {}
    for name, v in program.variables.items():
        new = variables.get(name, name)
        if new is not None:
            kept_vars[new] = dataclasses.replace(v, name=new)
    c = program.classifier
    features = [f for f in c.features if variables.get(f, f) is not None]
    classifier = dataclasses.replace(c, features=tuple(variables.get(f, f) for f in features),
                                     weights={variables.get(f, f): c.weights[f]
                                              for f in features})
    return dataclasses.replace(program, variables=kept_vars, modules=modules,
                               classifier=classifier)


def head_choices(program: Program, per_layer: int) -> list[HeadChoice]:
    """Every choice of ``per_layer`` categorical heads in each layer (heads in increasing order)
    under which no kept module reads a dropped head's output."""
    heads = categorical_heads(program)
    short = [layer for layer, hs in enumerate(heads) if len(hs) < per_layer]
    if per_layer < 1 or short:
        raise TpcoreError(f"keeping {per_layer} categorical heads per layer; expected 1 .. the "
                          f"fewest a layer has ({min(map(len, heads), default=0)})")
    count = math.prod(math.comb(len(hs), per_layer) for hs in heads)
    if count > MAX_CHOICES:
        raise TpcoreError(f"{count} ways to keep {per_layer} of {[len(h) for h in heads]} "
                          f"categorical heads per layer; expected at most {MAX_CHOICES}")
    names = _heads(program)
    heads_out = {m.name: m.output for m in program.modules if m.name in names}
    choices = []
    for choice in itertools.product(*(itertools.combinations(hs, per_layer) for hs in heads)):
        kept = {f"attn_{layer}_{h}" for layer, hs in enumerate(choice) for h in hs}
        dropped = {out for name, out in heads_out.items() if name not in kept}
        if not any(read in dropped for m in program.modules
                   if m.name not in heads_out or m.name in kept for read in m.reads):
            choices.append(tuple(choice))
    return choices

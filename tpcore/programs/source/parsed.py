"""What the lines of a program file parse into (:mod:`tpcore.programs.source.reader`), one
record per module, before :mod:`tpcore.programs.source.build` turns them into the IR. Host-only
code."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from tpcore.programs.ir import Label

SAME = object()
"""A predicate branch ``return k == q``: the key value equal to the query value."""


@dataclass
class Count:
    """``prefix_count_X`` (counting ``token``) or ``running_count`` (``token`` None)."""

    name: str
    node: ast.AST
    token: str | None


@dataclass
class Constant:
    """``NAME_outputs = [<literal>] * len(tokens)``: a variable of one ``value``."""

    name: str
    node: ast.AST
    value: Label


@dataclass
class Pattern:
    """A head: its ``NAME_pattern`` line, and the ``value`` its ``NAME_outputs`` line reads
    (None until that line)."""

    name: str
    node: ast.AST
    query: str
    key: str
    rule: str
    fn: ast.FunctionDef
    value: str | None = None


@dataclass
class Lookup:
    """An MLP: its function and the variables its ``NAME_outputs`` line applies it to."""

    name: str
    node: ast.AST
    inputs: list[str]
    fn: ast.FunctionDef


Parsed = Count | Constant | Pattern | Lookup
"""What a module's lines parse into."""

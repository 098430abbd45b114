"""What reading a program file needs whatever its format: the file parsed with :mod:`ast`
within bounds, syntax trees compared with canonical texts (docstrings and positions aside),
literals checked as labels, and refusals that name the file and line (:class:`Reader`, which
the program reader :class:`tpcore.programs.source.reader.ProgramReader` extends with the
grammar of ``run``). Nothing in the file is executed. Host-only code (standard library).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from tpcore.errors import TpcoreError
from tpcore.programs.ir import LIMITS, Label, check_label
from tpcore.programs.source.parsed import Parsed

T = TypeVar("T")


class ProgramSyntaxError(TpcoreError):
    """The file is not a program in an accepted format; the message names the file and line."""


def dump(node: ast.AST) -> tuple[str, ...]:
    """The tree under ``node`` without docstrings or positions, for comparing with canonical
    texts: node types, list lengths and constant values in pre-order (which determine the tree).
    Iterative, so any depth the parser accepts is safe."""
    if isinstance(node, ast.FunctionDef | ast.Module) and node.body and isinstance(
            node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) and isinstance(
            node.body[0].value.value, str):
        node = type(node)(**{**{f: getattr(node, f) for f in node._fields},
                             "body": node.body[1:]})
    out: list[str] = []
    stack: list[Any] = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, ast.AST):
            out.append(type(x).__name__)
            stack.extend(getattr(x, f, None) for f in reversed(x._fields))
        elif isinstance(x, list):
            out.append(f"[{len(x)}]")
            stack.extend(reversed(x))
        else:
            out.append(f"{type(x).__name__}:{x!r}")
    return tuple(out)


def depth(tree: ast.AST) -> int:
    """Nesting depth of ``tree``; an ``elif`` continues its ``if`` at the same depth (iterative,
    as the chains of branches of long programs are deep)."""
    deepest = 0
    stack = [(tree, 0)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        for child in ast.iter_child_nodes(node):
            same = isinstance(node, ast.If) and node.orelse == [child]
            stack.append((child, level if same else level + 1))
    return deepest


def canon(text: str) -> tuple[str, ...]:
    """:func:`dump` of the statement (or module) ``text``."""
    tree = ast.parse(text.strip("\n"))
    return dump(tree.body[0]) if len(tree.body) == 1 else dump(tree)


def is_name(node: ast.AST, name: str) -> bool:
    """Whether ``node`` is the name ``name``."""
    return isinstance(node, ast.Name) and node.id == name


def imported(lines: tuple[str, ...]) -> dict[str, str | None]:
    """``{module: alias or None}`` of the ``import`` lines ``lines``."""
    tree = ast.parse("\n".join(lines))
    return {a.name: a.asname for node in tree.body if isinstance(node, ast.Import)
            for a in node.names}


class Reader:
    """A program file being read: its syntax tree (parsed within :data:`LIMITS`), what its
    statements have given so far, and refusals that name the file and line."""

    def __init__(self, text: str, filename: str):
        self.file = filename
        try:
            self.tree = ast.parse(text, filename)
        except SyntaxError as exc:
            raise ProgramSyntaxError(f"{filename}:{exc.lineno}: not valid Python ({exc.msg})") \
                from None
        except (RecursionError, MemoryError, ValueError) as exc:
            hint = (f"; nesting is limited to {LIMITS.depth} levels"
                    if isinstance(exc, RecursionError) else "")
            raise ProgramSyntaxError(f"{filename}: cannot be parsed ({type(exc).__name__}: "
                                     f"{str(exc)[:100]}){hint}") from None
        levels = depth(self.tree)
        if levels > LIMITS.depth:
            raise ProgramSyntaxError(f"{filename}: nested {levels} levels deep; the limit is "
                                     f"{LIMITS.depth}")
        self.style: str | None = None
        """The format: set by the first statement only one format has."""
        self.rules: dict[str, str] = {}
        """``select_closest`` helpers defined: name -> rule."""
        self.causal: set[bool] = set()
        """Whether the select helpers defined cut the keys causally."""
        self.consts: dict[str, Any] = {}
        """The tpcore header's ``VOCAB``, ``MAX_LEN``, ``BOS`` and ``EOS``."""
        self.weights_name: str | None = None
        """The weights CSV file the program names."""
        self.funcs: dict[str, ast.FunctionDef] = {}
        """Helpers, predicates and MLP functions defined."""
        self.defined = {"tokens", "positions", "ones"}
        """Variables defined so far."""
        self.modules: list[Parsed] = []
        """One record per module, in order."""
        self.features: list[str] = []
        """The classifier's features."""
        self.passthrough: dict[str, Label] = {}
        """``"bos"``/``"eos"``: the token passed through at that end."""
        self.scores: dict[str, str] = {}
        """Published format: classifier-score frame -> its variable."""

    def fail(self, node: ast.AST | None, msg: str) -> NoReturn:
        """Refuse the file at ``node``'s line."""
        line = getattr(node, "lineno", 0)
        raise ProgramSyntaxError(f"{self.file}:{line}: {msg}")

    def bounded(self, node: ast.AST | None, n: int, limit: int, what: str) -> None:
        """Fail naming ``what`` when ``n`` exceeds ``limit``."""
        if n > limit:
            self.fail(node, f"{what}: {n:,} exceeds the limit of {limit:,}")

    def label(self, node: ast.AST | None, x: Any) -> Label:
        """``x`` checked as a label (:func:`tpcore.programs.ir.check_label`)."""
        try:
            return check_label(x, "literal")
        except TpcoreError as exc:
            self.fail(node, str(exc))

    def matched(self, node: ast.AST, take: Callable[[], T], line: Callable[[T], str],
                msg: str) -> T:
        """What ``take`` takes from ``node``'s tree, provided that ``node`` is the statement
        ``line`` of it (compared by :func:`canon`); else a refusal with ``msg``."""
        try:
            found = take()
        except (AttributeError, IndexError):
            self.fail(node, msg)
        if dump(node) != canon(line(found)):
            self.fail(node, msg)
        return found

    def set_style(self, style: str, node: ast.AST) -> None:
        """Record that ``node`` belongs to format ``style``; a file has one format."""
        if self.style not in (None, style):
            self.fail(node, f"mixes the {self.style} and {style} program formats")
        self.style = style

    def const(self, node: ast.AST) -> Label:
        """A string or number literal (a negative number too)."""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.const(node.operand)
            if isinstance(v, str):
                self.fail(node, "cannot negate a string")
            return -v
        if isinstance(node, ast.Constant) and type(node.value) in (str, int, float):
            return self.label(node, node.value)
        self.fail(node, "expected a string or number literal")
        raise AssertionError

    def key_const(self, node: ast.AST, arity: int) -> tuple[Label, ...]:
        """A key of ``arity`` literals: one literal, or a tuple of them."""
        if arity == 1:
            return (self.const(node),)
        if isinstance(node, ast.Tuple) and len(node.elts) == arity:
            return tuple(self.const(e) for e in node.elts)
        self.fail(node, f"expected a {arity}-tuple of literals")
        raise AssertionError

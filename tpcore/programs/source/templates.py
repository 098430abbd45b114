"""The lines of ``run`` that both program formats write, each defined once and used both ways.

The writers fill a template in with the program's names and literals and lay it out at 88
characters (:meth:`Line.wrapped`); the readers fill it in with the names and literals a
statement has and compare the statement's syntax tree with the template's one-line text
(:attr:`Line.text`, :func:`tpcore.programs.source.grammar.canon`), so that a file is read back
only in the shape it is written in. The lines of one format only sit in that format's module
(:mod:`~tpcore.programs.source.tpcore_style`, :mod:`~tpcore.programs.source.published_style`).
Host-only code (standard library).
"""

from __future__ import annotations

from dataclasses import dataclass

from tpcore.programs.source.layout import wrap


@dataclass(frozen=True)
class Line:
    """A statement ``head + sep.join(items) + tail``, written on one line when it fits."""

    head: str
    items: tuple[str, ...]
    tail: str
    sep: str = ", "

    @property
    def text(self) -> str:
        """The statement on one line (what a reader compares with)."""
        return f"{self.head}{self.sep.join(self.items)}{self.tail}"

    def wrapped(self, indent: int) -> list[str]:
        """The statement at ``indent``, one item per line when it does not fit on one."""
        return wrap(indent, self.head, list(self.items), self.tail, self.sep)

    def broken(self, indent: int) -> list[str]:
        """The statement at ``indent`` on three lines, however short: head, items, tail."""
        pad, inner = " " * indent, " " * (indent + 4)
        return [f"{pad}{self.head}", f"{inner}{self.sep.join(self.items)}",
                f"{pad}{self.tail}"]


RUN = "def run(tokens):"
"""The program's one entry point."""

POSITIONS = "positions = list(range(len(tokens)))"
ONES = "ones = [1 for _ in range(len(tokens))]"
"""The inputs ``run`` defines besides ``tokens``."""

RETURN_FALSE = "return False"
"""The body of a predicate that matches nothing."""

SELECT = "select"
"""The helper a numerical head selects its keys with."""

AGGREGATE = {"categorical": "aggregate", "numerical": "aggregate_sum"}
"""The helper a head of each kind reads its value with."""


def weights_csv_name(stem: str) -> str:
    """The file name of the weights CSV of the program file ``stem.py``."""
    return f"{stem}_weights.csv"


def predicate_name(head: str) -> str:
    """The predicate function of head ``head`` (``attn_0_1`` -> ``predicate_0_1``)."""
    return head.replace("attn", "predicate", 1)


def listed(name: str, item: str) -> Line:
    """``name = [item]``: a variable computed by a comprehension."""
    return Line(f"{name} = [", (item,), "]")


def prefix_count(name: str, token: str) -> Line:
    """``name``: how often the token (literal ``token``) occurs before each position."""
    return listed(name, f"tokens[:i].count({token}) for i in range(len(tokens))")


def running_count(name: str) -> Line:
    """``name``: how often each position's own token occurs up to and including it."""
    return listed(name, "tokens[:i + 1].count(tokens[i]) for i in range(len(tokens))")


def constant(name: str, value: str) -> str:
    """``name``: a variable with the one value (literal) ``value``."""
    return f"{name} = [{value}] * len(tokens)"


def pattern(head: str, select: str, key: str, query: str) -> Line:
    """Head ``head``'s selection of keys ``key`` for queries ``query`` with helper ``select``."""
    return Line(f"{head}_pattern = {select}(", (key, query, predicate_name(head)), ")")


def aggregated(output: str, aggregate: str, head: str, value: str) -> Line:
    """Head ``head``'s output ``output``: ``value`` read at its selected keys."""
    return Line(f"{output} = {aggregate}(", (f"{head}_pattern", value), ")")


def applied(mlp: str, arity: int, inputs: list[str]) -> tuple[str, str]:
    """The call and the loop of the comprehension that applies MLP function ``mlp`` of
    ``arity`` (one or two) arguments to ``inputs``: ``mlp(k0) for k0 in X`` or ``mlp(k0, k1)
    for k0, k1 in zip(X, Y)``."""
    if arity == 1:
        return f"{mlp}(k0)", f"k0 in {inputs[0]}"
    return f"{mlp}(k0, k1)", f"k0, k1 in zip({', '.join(inputs)})"


def subject(args: list[str]) -> str:
    """What an MLP function's set tests look a key up as: its argument, or their tuple."""
    return args[0] if len(args) == 1 else f"({', '.join(args)})"


def key(args: list[str]) -> str:
    """``key = ...``: the line that names an MLP function's key before its set tests."""
    return f"key = {subject(args)}"


def passthrough(index: str, token: str) -> list[str]:
    """The BOS (``index`` 0) or EOS (-1) pass-through: the token (literal ``token``) at that
    end is its own prediction."""
    return [f"if tokens[{index}] == {token}:", f"    predictions[{index}] = {token}"]

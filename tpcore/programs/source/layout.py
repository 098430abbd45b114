"""How generated program text is laid out, whatever the format: labels as Python literals,
docstring escapes, argument names, lines of at most :data:`WIDTH` characters (a list that does
not fit on one line gets one element per line, as black writes it), banners and ``if``/``elif``
chains of set tests. Host-only code (standard library).
"""

from __future__ import annotations

import json
import keyword

from tpcore.programs.ir import Label
from tpcore.programs.source import library

WIDTH = 88
"""The longest line a generated program has (black's default)."""


def literal(x: Label) -> str:
    """Python literal for a label: double-quoted strings (escaped as JSON, which Python reads
    back as the same string), plain numbers. Labels enter generated code only through here."""
    if isinstance(x, str):
        return json.dumps(x)
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return repr(x)


def optional(x: str | None) -> str:
    """:func:`literal` of ``x``, or ``None``."""
    return "None" if x is None else literal(x)


def docstring(text: str) -> str:
    """``text`` escaped for a docstring: backslashes and double quotes, so nothing in it can end
    the string."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def argument(name: str) -> str:
    """The argument name for variable ``name``: without a trailing ``s``, unless that leaves no
    name."""
    short = library.stem(name)
    return short if short.isidentifier() and not keyword.iskeyword(short) else name


def wrap(indent: int, head: str, items: list[str], tail: str, sep: str = ", ") -> list[str]:
    """``head + items + tail`` on one line if it fits, else one item per line (black style)."""
    pad = " " * indent
    one = f"{pad}{head}{sep.join(items)}{tail}"
    if len(one) <= WIDTH:
        return [one]
    inner = " " * (indent + 4)
    joined = f"{inner}{sep.join(items)}"
    if len(joined) <= WIDTH:
        return [f"{pad}{head}", joined, f"{pad}{tail.lstrip()}"]
    return [f"{pad}{head}", *(f"{inner}{it}," for it in items), f"{pad}{tail.lstrip()}"]


def packed(indent: int, head: str, items: list[str], tail: str) -> list[str]:
    """:func:`wrap`, except that items that need several lines fill each line."""
    lines = wrap(indent, head, items, tail)
    if len(lines) <= 3:
        return lines
    rows: list[str] = []
    for it in items:
        if rows and len(f"{rows[-1]} {it},") <= WIDTH:
            rows[-1] += f" {it},"
        else:
            rows.append(f"{' ' * (indent + 4)}{it},")
    return [lines[0], *rows, lines[-1]]


def indented(indent: int, lines: list[str]) -> list[str]:
    """``lines`` with ``indent`` more spaces in front of each."""
    return [" " * indent + line for line in lines]


def banner(indent: int, name: str) -> str:
    """``# name ####...``: the comment line that opens a section (72 characters, or longer
    for a long name)."""
    text = f"{' ' * indent}# {name} "
    return text + "#" * max(4, 72 - len(text))


def set_test(indent: int, word: str, subject: str, items: list[str]) -> list[str]:
    """``if subject in {items}:`` (``word`` is ``if`` or ``elif``), wrapped."""
    return wrap(indent, f"{word} {subject} in {{", items, "}:")


def branches(indent: int, subject: str, groups: list[tuple[list[str], str]]) -> list[str]:
    """``if subject in {...}: <stmt>`` / ``elif`` chain; ``groups``: (literals, statement)."""
    lines: list[str] = []
    for n, (items, stmt) in enumerate(groups):
        lines += set_test(indent, "if" if n == 0 else "elif", subject, items)
        lines.append(f"{' ' * (indent + 4)}{stmt}")
    return lines

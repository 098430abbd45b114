"""What a command prints: its results as text for people or, with ``--json``, as one JSON
document for programs.

A command gathers its results in a dict of plain values and hands it to :func:`emit` with the
text it prints otherwise. Lines that are not results (progress, notes) go through :func:`note`:
to stdout as text, to stderr under ``--json``, so that stdout then holds the JSON document and
nothing else (``tpcore ... --json | python -m json.tool`` works). The document is standard
JSON: a number that is not finite (an overflowed log-likelihood, a loss that diverged) is
``null``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

from tpcore.io import json_text


def add_json_option(p: argparse.ArgumentParser) -> None:
    """Give the command ``p`` the ``--json`` flag."""
    p.add_argument("--json", action="store_true",
                   help="print the results as one JSON document on stdout (progress and notes "
                        "go to stderr)")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters other than newline and tab: a label holding one (``\x1b]0;...``) would
act on the reader's terminal."""


def printable(text: str) -> str:
    """``text`` with each control character other than newline and tab written as its escape
    (``\x1b``), so that labels from a file cannot act on a terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


def emit(args: argparse.Namespace, result: Mapping[str, Any],
         text: str | Callable[[], str]) -> None:
    """Print ``result`` as JSON under ``--json``, else ``text`` (a callable is called only
    then, so costly text is not built for nothing) with control characters escaped
    (:func:`printable`)."""
    if getattr(args, "json", False):
        print(json_text(dict(result), strict=True))
    else:
        print(printable(text() if callable(text) else text))


def note(args: argparse.Namespace, line: str) -> None:
    """Print a line that is not a result: on stdout as text, on stderr under ``--json``."""
    print(printable(line), file=sys.stderr if getattr(args, "json", False) else sys.stdout,
          flush=True)

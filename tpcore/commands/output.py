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
import sys
from collections.abc import Callable, Mapping
from typing import Any

from tpcore.io import json_text


def add_json_option(p: argparse.ArgumentParser) -> None:
    """Give the command ``p`` the ``--json`` flag."""
    p.add_argument("--json", action="store_true",
                   help="print the results as one JSON document on stdout (progress and notes "
                        "go to stderr)")


def emit(args: argparse.Namespace, result: Mapping[str, Any],
         text: str | Callable[[], str]) -> None:
    """Print ``result`` as JSON under ``--json``, else ``text`` (a callable is called only
    then, so costly text is not built for nothing)."""
    if getattr(args, "json", False):
        print(json_text(dict(result), strict=True))
    else:
        print(text() if callable(text) else text)


def note(args: argparse.Namespace, line: str) -> None:
    """Print a line that is not a result: on stdout as text, on stderr under ``--json``."""
    print(line, file=sys.stderr if getattr(args, "json", False) else sys.stdout, flush=True)

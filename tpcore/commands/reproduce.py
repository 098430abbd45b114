"""``tpcore reproduce NAME``: reproductions of the papers' tables and figures.

Each verb lives in the commands module of its feature, which exposes
``register_reproduce(subparsers)``; ``VERBS`` lists those modules.
"""

from __future__ import annotations

import argparse
import importlib

VERBS: tuple[str, ...] = ("trees", "looped", "sorting", "learn", "nlp", "program", "counting",
                          "fleq")
"""Modules of ``tpcore.commands`` that add a ``reproduce`` verb."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="reproduce a paper's table or figure")
    verbs = p.add_subparsers(dest="verb", metavar="NAME")
    for name in VERBS:
        importlib.import_module(f"tpcore.commands.{name}").register_reproduce(verbs)

"""The ``tpcore`` command.

Each feature registers its subcommands from a module in ``tpcore/commands/`` exposing
``register(subparsers)``; a subcommand sets ``func(args) -> int``. Bad input raises a
``ValueError`` (or :class:`tpcore.errors.TpcoreError`), printed here as one line with exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

import tpcore

COMMANDS = ("info", "reproduce", "trees", "looped", "sorting", "learn", "program", "sweep",
            "nlp")
"""Modules of ``tpcore.commands`` that add subcommands, in the order ``--help`` lists them."""


NLP_LEARN_TASKS = ("conll", "classify", "ner-demo", "classify-demo")
"""``tpcore learn TASK`` for these is ``tpcore nlp TASK`` (they read files, not generators)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tpcore",
        description="Learn, run and understand small transformers that compute programs."
    )
    parser.add_argument("--version", action="version", version=f"tpcore {tpcore.__version__}")
    parser.add_argument("--backend", choices=("numpy", "cupy"), help="array backend (default: "
                        "$TPCORE_BACKEND or numpy)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"tpcore.commands.{name}").register(sub)
    return parser




def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "learn" in argv[:-1] and argv[argv.index("learn") + 1] in NLP_LEARN_TASKS:
        argv[argv.index("learn")] = "nlp"
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if args.backend:
            tpcore.set_backend(args.backend)
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, IsADirectoryError) as exc:
        print(f"tpcore: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tpcore: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

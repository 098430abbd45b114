"""The ``tpcore`` command.

Each feature registers its subcommands from a module in ``tpcore/commands/`` exposing
``register(subparsers)``; a subcommand sets ``func(args) -> int``.

The contract: bad input of any kind prints one line ``tpcore: error: ...`` naming the value and
what was expected, and exits 2, never with a traceback (:func:`error_line` says what each
exception class becomes). Ctrl-C exits 130; a closed output pipe ends quietly with 141.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import warnings
from collections.abc import Sequence
from contextlib import nullcontext
from typing import NoReturn

import tpcore
from tpcore.backend import BACKENDS
from tpcore.commands.output import printable
from tpcore.cpu import THREADS_VARIABLE, limit_threads
from tpcore.errors import INSTALL, TpcoreError, TrainingDiverged, unknown_name

COMMANDS = ("info", "reproduce", "trees", "looped", "sorting", "learn", "rebuild", "pack",
            "program", "sweep", "nlp", "plot")
"""Modules of ``tpcore.commands`` that add subcommands, in the order ``--help`` lists them."""


def _action_name(action: argparse.Action) -> str:
    """How argparse names ``action`` in its messages (``--epochs``, ``COMMAND``)."""
    if action.option_strings:
        return "/".join(action.option_strings)
    return action.metavar if isinstance(action.metavar, str) else action.dest


_ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|exc):`~?([^`]+)`")


def plain_text(text: str) -> str:
    """``text`` with reStructuredText roles and literals as a terminal shows them: ``:func:`~a.b```
    becomes ``b``, ``:mod:`a.b``` becomes ``a.b``, a double-backquoted literal loses its quotes."""
    text = _ROLE.sub(lambda m: m[1].rsplit(".", 1)[-1] if "~" in m[0] else m[1], text)
    return text.replace("``", "`")


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors raise :class:`TpcoreError` ``MESSAGE (see PROG
    --help)`` for :func:`main` to print as one line; an unknown choice (a subcommand, say) gets
    a did-you-mean, and is called a task where the choices are tasks (metavar ``TASK``)."""

    def format_help(self) -> str:
        """The help, with the Sphinx markup of the docstrings it quotes read as plain text."""
        return plain_text(super().format_help())

    def error(self, message: str) -> NoReturn:
        value = re.search(r"invalid choice: '([^']*)'", message)
        for action in self._actions if value else ():
            name = _action_name(action)
            if action.choices and message.startswith(f"argument {name}:"):
                what = "task" if name == "TASK" else "choice"
                message = f"argument {name}: {unknown_name(what, value[1], action.choices)}"
        raise TpcoreError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="tpcore",
        description="Learn, run and understand small transformers that compute programs."
    )
    parser.add_argument("--version", action="version", version=f"tpcore {tpcore.__version__}")
    parser.add_argument("--backend", choices=BACKENDS, help="array backend (default: "
                        "$TPCORE_BACKEND or numpy; numpy-strict: a testing tool that fails on "
                        "host leaks as a GPU run would)")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="BLAS threads of the command, its training and everything else "
                        "(default: $TPCORE_THREADS; without it, up to 2 of the cores this "
                        "process may use when training)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"tpcore.commands.{name}").register(sub)
    return parser


def error_line(exc: BaseException) -> str:
    """The one-line message for ``exc``, whatever its class."""
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if isinstance(exc, (ValueError, TrainingDiverged)):
        return text or type(exc).__name__
    root = (getattr(exc, "name", None) or "tpcore").split(".")[0]
    if isinstance(exc, ModuleNotFoundError) and root != "tpcore":
        return (f"{root} is needed for this command and is not installed: "
                f"{INSTALL.get(root, f'pip install {root}')}")
    if isinstance(exc, MemoryError):
        return f"out of memory: {text}" if text else "out of memory"
    if isinstance(exc, RecursionError):
        return "input nested too deeply to process (Python's recursion limit was reached)"
    if isinstance(exc, OSError):
        what = exc.strerror or text or type(exc).__name__
        names = [repr(str(f)) for f in (exc.filename, exc.filename2) if f is not None]
        return f"{what}: {' -> '.join(names)}" if names else what
    if isinstance(exc, OverflowError):
        return f"a number is too large: {text}"
    return f"internal error {type(exc).__name__}: {text} (please report it with the command line)"


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush into a closed pipe is silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        with warnings.catch_warnings():
            # NumPy's overflow/invalid-value warnings: a run they spoil is reported in one line
            # (TrainingDiverged names the step and the last finite loss)
            warnings.filterwarnings("ignore", r"(overflow|invalid value|divide by zero) "
                                    "encountered", RuntimeWarning)
            if args.backend:
                tpcore.set_backend(args.backend)
            threads = vars(args).pop("threads")  # global: not a command's option
            if threads is not None:
                if threads < 1:
                    raise TpcoreError(f"--threads {threads}: expected an integer >= 1")
                os.environ[THREADS_VARIABLE] = str(threads)
            # a count the user gave holds for the whole command: evaluations outside training
            # too, and the BLAS of libraries loaded later (SciPy's) from the environment
            held = os.environ.get(THREADS_VARIABLE, "").strip()
            if held:
                os.environ.setdefault("OPENBLAS_NUM_THREADS", held)
            with limit_threads() if held else nullcontext():
                code = int(args.func(args) or 0)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except KeyboardInterrupt:
        print("tpcore: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the contract: every failure is one line and exit status 2
        print(f"tpcore: error: {printable(error_line(exc))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

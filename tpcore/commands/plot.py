"""``tpcore plot curves RUN`` and ``tpcore plot NAME RESULTS``: PNG figures (matplotlib, the
``plot`` extra).

``curves``: the training curves of a run directory (its ``metrics.json``, as ``tpcore learn``
and ``tpcore sweep`` write it) or of any JSON file holding ``history`` lists (the results of
``tpcore learn ner-demo``, of ``tpcore reproduce counting``'s runs...), written beside it as
``curves.png`` (or ``NAME_curves.png``). ``NAME`` (a reproduction that draws figures): its
figures drawn again from the results JSON it wrote, without running anything, into the JSON's
folder (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tpcore.analysis.curves import document_curves
from tpcore.commands.options import need_package
from tpcore.commands.output import add_json_option, emit
from tpcore.commands.reproduce import EXPERIMENTS
from tpcore.errors import TpcoreError
from tpcore.io import read_text

FIGURES = {name: module for name, module in EXPERIMENTS.items() if hasattr(module, "figures")}
"""The reproductions whose figures ``tpcore plot NAME`` redraws (those with a ``figures``)."""


def _read(path: Path) -> Any:
    """The JSON document at ``path``; a missing or malformed file raises naming it."""
    if not path.is_file():
        raise TpcoreError(f"{path}: no such file")
    try:
        return json.loads(read_text(path, "result"))
    except (ValueError, RecursionError) as exc:
        raise TpcoreError(f"{path}: not JSON ({str(exc)[:200]})") from None


def _curves(args: argparse.Namespace) -> int:
    need_package("matplotlib", "tpcore plot")
    run = Path(args.run)
    source = run / "metrics.json" if run.is_dir() else run
    if run.is_dir() and not source.is_file():
        raise TpcoreError(f"{run}: no metrics.json in this folder; expected a run directory of "
                          "tpcore learn or a JSON file with a training history")
    out = Path(args.out) if args.out else (
        run / "curves.png" if run.is_dir() else run.with_name(f"{run.stem}_curves.png"))
    document_curves(_read(source), source, out)
    emit(args, {"figures": [str(out)]}, f"wrote {out}")
    return 0


def _results(args: argparse.Namespace) -> int:
    need_package("matplotlib", "tpcore plot")
    path = Path(args.results)
    doc = _read(path)
    if not isinstance(doc, dict):
        raise TpcoreError(f"{path}: expected a JSON object of tpcore reproduce {args.verb}")
    try:
        paths = FIGURES[args.verb].figures(doc, Path(args.out) if args.out else path.parent)
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise TpcoreError(f"{path}: not the results of tpcore reproduce {args.verb} (no usable "
                          f"{exc})") from None
    emit(args, {"figures": [str(p) for p in paths]},
         "\n".join(f"wrote {p}" for p in paths) or "no figures to draw")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="figures (PNG) of a run's training or of a reproduction's "
                       "results", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="verb", metavar="FIGURE", required=True)
    c = verbs.add_parser("curves", help="training curves of a run directory or a JSON file with "
                                        "a training history")
    c.add_argument("run", metavar="RUN", help="run directory (metrics.json) or JSON file")
    c.add_argument("--out", help="PNG file (default: RUN/curves.png, or FILE_curves.png beside a "
                                 "JSON file)")
    add_json_option(c)
    c.set_defaults(func=_curves)
    for name in FIGURES:
        v = verbs.add_parser(name, help=f"redraw the figures of tpcore reproduce {name} from its "
                                        "results JSON")
        v.add_argument("results", metavar="RESULTS", help="the JSON file it wrote")
        v.add_argument("--out", help="folder for the figures (default: the JSON's folder)")
        add_json_option(v)
        v.set_defaults(func=_results)

"""``tpcore rebuild RUN --out DIR``: train a recorded learn run again from its record
(configuration and seed: its ``metrics.json``, or where its folder is not kept, its entry in the
``runs.json.gz`` of a folder above it) into a fresh folder, to get back the weights and program
that results do not keep, and compare the new run with the record.

Prints whether every recorded result came back exactly (steps, selection, training history,
train / validation / test metrics, program length and fidelity), the machines both runs were
trained on, and each value that differs. Exit status 0 when the rebuilt run repeats the record
exactly, 1 when some value differs (a record made on another machine or by another tpcore may
come back within seed noise instead), 2 on bad input.
"""

from __future__ import annotations

import argparse

from tpcore.commands.output import add_json_option, emit
from tpcore.pipelines.rebuild import rebuild, report


def run(args: argparse.Namespace) -> int:
    result = rebuild(args.run, args.out, quiet=args.quiet or args.json)
    emit(args, result, lambda: report(result))
    return 0 if result["identical"] else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rebuild", help="train a recorded run again and compare it with its "
                                       "record", description=__doc__)
    p.add_argument("run", metavar="RUN", help="a learn run's folder (holding its metrics.json, or "
                                             "recorded in a runs.json.gz above it)")
    p.add_argument("--out", required=True,
                   help="the folder to train into (new, or holding this run's rebuild)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_json_option(p)
    p.set_defaults(func=run)

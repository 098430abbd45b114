"""``tpcore pack FOLDER``: gather the records (``metrics.json``) of every learn run under a
folder into ``FOLDER/runs.json.gz``, one file in place of a folder per run.

The run folders are left as they are; a results folder keeps ``runs.json.gz`` and the tables, and
``tpcore rebuild FOLDER/RUN`` trains any packed run again from its record. Packing again adds
the runs trained since and keeps the records whose folders are gone.
"""

from __future__ import annotations

import argparse

from tpcore.commands.output import add_json_option, emit
from tpcore.pipelines.records import pack


def run(args: argparse.Namespace) -> int:
    result = pack(args.folder)
    emit(args, result, lambda: f"packed {result['runs']} run records into {result['path']} "
                               f"({result['bytes']:,} bytes; {result['on_disk']} from run "
                               "folders on disk)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pack", help="gather the run records under a folder into one runs.json.gz",
                       description=__doc__)
    p.add_argument("folder", metavar="FOLDER", help="a folder of learn runs (a sweep's --out)")
    add_json_option(p)
    p.set_defaults(func=run)

"""``tpcore reproduce fleq``: error study of the FLEQ function blocks and applications."""

from __future__ import annotations

import argparse

from tpcore.commands.options import nonnegative_int
from tpcore.experiments.fleq import reproduce


def _reproduce(args: argparse.Namespace) -> int:
    print(reproduce(args.budget, args.out, args.seed))
    return 0


def register_reproduce(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("fleq", help="FLEQ error study: blocks and applications vs lambda, "
                         "matmul c and C, sigmoid count m (float64 and float32)")
    p.add_argument("--budget", choices=("small", "full"), default="small",
                   help="small: small instances (minutes); full: larger instances")
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of the random matrices and data")
    p.add_argument("--out", default="results/fleq", help="output folder")
    p.set_defaults(func=_reproduce)

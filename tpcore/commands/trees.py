"""``tpcore trees sample | bp``: the tree grammar of the hierarchical-filtering paper and exact
BP on it (:mod:`tpcore.trees`; its reproductions are ``tpcore reproduce bp-table |
grammar-learning | hierarchy``)."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from tpcore import io, trees
from tpcore.commands.options import has_module, nonnegative_float, nonnegative_int, positive_int
from tpcore.commands.output import add_json_option, emit
from tpcore.errors import TpcoreError


def _grammar(args: argparse.Namespace) -> trees.Grammar:
    return trees.grammar(args.q, args.sigma, args.grammar_seed, paper=not args.modern)


def _add_grammar_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--q", type=positive_int, default=4, help="vocabulary size (default 4)")
    p.add_argument("--sigma", type=nonnegative_float, default=1.0,
                   help="log-normal spread (default 1)")
    p.add_argument("--grammar-seed", type=nonnegative_int, default=0,
                   help="grammar seed (default 0: drawn as the paper's code does, the paper's "
                        "grammar)")
    p.add_argument("--modern", action="store_true",
                   help="draw the grammar from numpy's default_rng instead of the paper's "
                        "procedure (its RandomState stream)")


def _sample(args: argparse.Namespace) -> int:
    g = _grammar(args)
    t = trees.sample(args.n, args.l, args.k, grammar=g, seed=args.seed,
                     levels=args.out is not None)
    if args.out:
        arrays = dict(root=t.root, leaves=t.leaves, M=g.M, p0=g.p0)
        arrays.update({f"level{m}": x for m, x in enumerate(t.levels)})
        io.write_npz(args.out, arrays)
        emit(args, {"out": args.out, "n": args.n, "l": args.l, "k": args.k},
             f"wrote {args.n} sequences (l={args.l}, k={args.k}) to {args.out}")
        return 0
    rows = [{"root": int(r), "leaves": x.tolist()} for r, x in zip(t.root, t.leaves)]
    emit(args, {"l": args.l, "k": args.k, "sequences": rows},
         lambda: "\n".join(f"{r['root']}\t{' '.join(map(str, r['leaves']))}" for r in rows))
    return 0


def _bp(args: argparse.Namespace) -> int:
    if not has_module("numba"):
        print("tpcore: note: numba is not installed, so BP runs on the NumPy reference "
              "(pip install numba for the kernel)", file=sys.stderr)
    g = _grammar(args)
    symbols, mask = trees.parse_leaves(args.leaves, g.q)
    n = symbols.shape[1]
    if args.l is not None and n != 2**args.l:
        raise TpcoreError(f"got {n} leaves; --l {args.l} expects 2**l = {2**args.l} (leave --l "
                          "out to read the depth from the leaves)")
    res = trees.bp(args.leaves, args.k, grammar=g)
    if not np.isfinite(res.log_z):
        raise TpcoreError(f"the sequence's likelihood under this grammar (--sigma {args.sigma}) "
                          f"is {res.log_z} in float64, so its marginals mean nothing; choose a "
                          "smaller --sigma")
    masked = np.flatnonzero(mask[0])
    result = {"log_z": res.log_z, "root": res.root,
              "leaves": {int(i): res.leaves[i] for i in masked}}
    if args.cavities:
        result["cavities"] = res.cavity

    def text() -> str:
        with np.printoptions(precision=4, suppress=True):
            lines = [f"log Z = {result['log_z']:.6f}", f"root marginal: {res.root}"]
            lines += [f"leaf {i} marginal: {res.leaves[i]}" for i in masked]
            if args.cavities:
                lines += [f"leaf {i} given the others: {res.cavity[i]}" for i in range(n)]
        return "\n".join(lines)

    emit(args, result, text)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trees", help="hierarchical tree grammar: sample sequences, run exact BP")
    verbs = p.add_subparsers(dest="trees_verb", metavar="VERB")
    s = verbs.add_parser("sample", help="sample k-filtered sequences (root TAB leaves, or .npz)")
    _add_grammar_args(s)
    s.add_argument("--l", type=positive_int, default=4, help="tree depth, 2**l leaves (default 4)")
    s.add_argument("--k", type=nonnegative_int, default=0, help="filtering level 0..l (default 0)")
    s.add_argument("--n", type=positive_int, default=10, help="number of sequences (default 10)")
    s.add_argument("--seed", type=nonnegative_int, default=0, help="sampling seed (default 0)")
    s.add_argument("--out", help="write root, leaves, every level and the grammar to this .npz")
    add_json_option(s)
    s.set_defaults(func=_sample)
    b = verbs.add_parser("bp", help="exact BP_k marginals of one sequence ('?' = masked leaf)")
    _add_grammar_args(b)
    b.add_argument("leaves", help="the 2**l leaves, e.g. '0 1 ? 3' ('?' masks a leaf)")
    b.add_argument("--l", type=positive_int,
                   help="tree depth, checked against the leaves (default: read from them)")
    b.add_argument("--k", type=nonnegative_int, default=0,
                   help="BP_k: the filtering level assumed (0)")
    b.add_argument("--cavities", action="store_true",
                   help="also print every leaf's prediction from all other leaves")
    add_json_option(b)
    b.set_defaults(func=_bp)
    p.set_defaults(func=lambda a: p.print_help() or 2)

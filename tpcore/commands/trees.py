"""``tpcore trees sample | bp`` and ``tpcore reproduce bp-table | hierarchy``: the tree grammar
of the hierarchical-filtering paper, exact BP on it, and its reproductions."""

from __future__ import annotations

import argparse

from tpcore.commands.options import nonnegative_float, nonnegative_int, positive_int, positive_ints


def _grammar(args: argparse.Namespace):
    from tpcore.tasks.trees import random_grammar

    return random_grammar(args.q, args.sigma, args.grammar_seed, legacy=not args.modern)


def _add_grammar_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--q", type=positive_int, default=4, help="vocabulary size (default 4)")
    p.add_argument("--l", type=positive_int, default=4, help="tree depth, 2**l leaves (default 4)")
    p.add_argument("--sigma", type=nonnegative_float, default=1.0,
                   help="log-normal spread (default 1)")
    p.add_argument("--grammar-seed", type=nonnegative_int, default=0,
                   help="grammar seed (default 0: with the legacy stream, the paper's grammar)")
    p.add_argument("--modern", action="store_true",
                   help="draw the grammar from numpy's default_rng instead of the paper's "
                        "legacy RandomState procedure")


def _sample(args: argparse.Namespace) -> int:
    from tpcore.io import write_npz
    from tpcore.tasks.trees import sample_trees

    g = _grammar(args)
    t = sample_trees(g, args.n, args.l, args.k, seed=args.seed, keep_levels=args.out is not None)
    if args.out:
        arrays = dict(root=t.root, leaves=t.leaves, M=g.M, p0=g.p0)
        arrays.update({f"level{m}": x for m, x in enumerate(t.levels)})
        write_npz(args.out, arrays)
        print(f"wrote {args.n} sequences (l={args.l}, k={args.k}) to {args.out}")
        return 0
    for r, x in zip(t.root, t.leaves):
        print(f"{int(r)}\t{' '.join(str(int(v)) for v in x)}")
    return 0


def _parse_leaves(text: str, q: int) -> list[int | None]:
    out: list[int | None] = []
    for tok in text.replace(",", " ").split():
        if tok in ("?", "_", "m"):
            out.append(None)
        elif tok.isdigit() and int(tok) < q:
            out.append(int(tok))
        else:
            raise ValueError(f"leaf {tok!r} is invalid; expected a symbol 0..{q - 1} or '?' "
                             "for a masked leaf")
    return out


def _bp(args: argparse.Namespace) -> int:
    import sys

    import numpy as np

    from tpcore.bp import belief_propagation, evidence_from_leaves
    from tpcore.commands.options import has_module

    kernel = has_module("numba")
    if not kernel:
        print("tpcore: note: numba is not installed, so BP runs on the NumPy reference "
              "(pip install numba for the kernel)", file=sys.stderr)
    g = _grammar(args)
    seq = _parse_leaves(args.leaves, g.q)
    if len(seq) != 2**args.l:
        raise ValueError(f"got {len(seq)} leaves; expected 2**l = {2**args.l} (set --l)")
    mask = np.array([[v is None for v in seq]])
    leaves = np.array([[0 if v is None else v for v in seq]])
    res = belief_propagation(g.M, g.p0, evidence_from_leaves(leaves, g.q, mask), args.k,
                             use_kernel=kernel)
    np.set_printoptions(precision=4, suppress=True)
    print(f"log Z = {res.log_z[0]:.6f}")
    print(f"root marginal: {res.root[0]}")
    for i in np.flatnonzero(mask[0]):
        print(f"leaf {i} marginal: {res.leaves[0, i]}")
    if args.cavities:
        for i in range(leaves.shape[1]):
            print(f"leaf {i} given the others: {res.cavity[0, i]}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trees", help="hierarchical tree grammar: sample sequences, run exact BP")
    verbs = p.add_subparsers(dest="trees_verb", metavar="VERB")
    s = verbs.add_parser("sample", help="sample k-filtered sequences (root TAB leaves, or .npz)")
    _add_grammar_args(s)
    s.add_argument("--k", type=nonnegative_int, default=0, help="filtering level 0..l (default 0)")
    s.add_argument("--n", type=positive_int, default=10, help="number of sequences (default 10)")
    s.add_argument("--seed", type=nonnegative_int, default=0, help="sampling seed (default 0)")
    s.add_argument("--out", help="write root, leaves, every level and the grammar to this .npz")
    s.set_defaults(func=_sample)
    b = verbs.add_parser("bp", help="exact BP_k marginals of one sequence ('?' = masked leaf)")
    _add_grammar_args(b)
    b.add_argument("leaves", help="the 2**l leaves, e.g. '0 1 ? 3' ('?' masks a leaf)")
    b.add_argument("--k", type=nonnegative_int, default=0,
                   help="BP_k: the filtering level assumed (0)")
    b.add_argument("--cavities", action="store_true",
                   help="also print every leaf's prediction from all other leaves")
    b.set_defaults(func=_bp)
    p.set_defaults(func=lambda a: p.print_help() or 2)


def _reproduce_bp_table(args: argparse.Namespace) -> int:
    from tpcore.experiments.hierarchy import bp_table

    out = bp_table(args.out, samples=args.samples, seed=args.seed)
    print(f"wrote {args.out}/bp_table.json and bp_table.md ({out['seconds']:.1f} s)")
    return 0


def _reproduce_grammar_learning(args: argparse.Namespace) -> int:
    from tpcore.experiments.hierarchy import grammar_learning

    grammar_learning(args.out, sizes=args.sizes, em_steps=args.em_steps, adam_steps=args.adam_steps,
                     seed=args.seed)
    print(f"wrote {args.out}/grammar_learning.json and grammar_learning.md")
    return 0


def _reproduce_hierarchy(args: argparse.Namespace) -> int:
    from tpcore.experiments.hierarchy import hierarchy

    parts = tuple(args.parts.split(","))
    bad = set(parts) - {"root", "root-long", "mlm", "probe", "finetune"}
    if bad:
        raise ValueError(f"--parts {args.parts!r}: unknown {sorted(bad)}; expected a "
                         "comma-separated subset of root,root-long,mlm,probe,finetune")
    hierarchy(args.out, budget=args.budget, parts=parts, mlm_steps=args.mlm_steps,
              long_k=args.long_k, long_samples=args.long_samples, seed=args.seed)
    print(f"wrote {args.out}/hierarchy_{args.budget}.json and .md")
    return 0


def register_reproduce(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("bp-table", help="exact BP_k' accuracy on k-filtered data "
                         "(root and single-mask MLM), the paper's grammar")
    p.add_argument("--samples", type=positive_int, default=200_000,
                   help="sequences per k (2e5)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="data seed (default 0)")
    p.add_argument("--out", default="results/hierarchy", help="output folder")
    p.set_defaults(func=_reproduce_bp_table)
    g = verbs.add_parser("grammar-learning", help="learn the grammar from leaves: Adam on "
                         "log Z vs inside-outside, against the number of samples")
    g.add_argument("--sizes", type=positive_ints, default="100,300,1000,3000",
                   help="training-set sizes P, comma-separated")
    g.add_argument("--em-steps", type=positive_int, default=100,
                   help="inside-outside iterations")
    g.add_argument("--adam-steps", type=positive_int, default=200, help="Adam steps")
    g.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of the data and the init")
    g.add_argument("--out", default="results/hierarchy", help="output folder")
    g.set_defaults(func=_reproduce_grammar_learning)
    h = verbs.add_parser("hierarchy", help="transformers (root classification for every "
                         "k_train, MLM) compared with exact BP during training")
    h.add_argument("--budget", default="small", choices=("tiny", "small", "paper"),
                   help="scale (default small: l=3, d=64, FFN 256; paper: l=4, d=128, FFN 2048)")
    h.add_argument("--parts", default="root,mlm",
                   help="comma-separated: root, root-long (k_train=--long-k, 4x steps), mlm, "
                        "probe, "
                        "finetune (default root,mlm; probe and finetune use the encoder saved "
                        "by mlm)")
    h.add_argument("--mlm-steps", type=positive_int,
                   help="MLM steps (default 2x the root steps)")
    h.add_argument("--long-k", type=nonnegative_int, default=0,
                   help="k_train of the root-long run (0)")
    h.add_argument("--long-samples", type=positive_int,
                   help="training trees of the root-long run (default: the budget's P)")
    h.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of data, init and batches")
    h.add_argument("--out", default="results/hierarchy", help="output folder")
    h.set_defaults(func=_reproduce_hierarchy)

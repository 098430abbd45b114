"""``tpcore reproduce bp-table``: accuracy of exact BP_k' on data filtered at k, for all k, k' in
0..l, on the paper's grammar (the dashed lines of the hierarchical-filtering paper).

Host-side orchestration; the compute runs through :mod:`tpcore.bp`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.bp import belief_propagation, evidence_from_leaves
from tpcore.experiments.budget import Budget, preset
from tpcore.experiments.options import Option, Reproduction
from tpcore.experiments.tree_grammar import PAPER, paper_grammar
from tpcore.io import write_json, write_text
from tpcore.rundir import check_out_dir
from tpcore.seeds import derive_seed
from tpcore.tasks.trees import Grammar, sample_trees

BUDGETS = {"small": Budget("small", {"samples": 20_000}),
           "paper": Budget("paper", {"samples": 200_000})}
"""Sequences drawn per data k: ``paper`` is the table of the docs (about 30 s)."""


def budget(name: str) -> Budget:
    """The preset ``name`` of :data:`BUDGETS`."""
    return preset(name, BUDGETS)


def bp_accuracies(grammar: Grammar, leaves: np.ndarray, root: np.ndarray,
                  k_bp: int) -> dict[str, float]:
    """Root and single-mask MLM accuracy of BP_k_bp on ``leaves: (n, N)`` with roots ``(n,)``.

    The MLM prediction for position i from all other leaves is BP's leaf cavity, so one sweep
    with every leaf observed gives the single-mask prediction at every position; the MLM accuracy
    is averaged over all positions (= a uniformly random mask position, with N times the
    evaluations). Ties and zero-likelihood sequences (possible under mismatch) take argmax 0.
    """
    res = belief_propagation(grammar.M, grammar.p0, evidence_from_leaves(leaves, grammar.q),
                             k_bp)
    return dict(
        root_acc=float((res.root.argmax(axis=1) == root).mean()),
        mlm_acc=float((res.cavity.argmax(axis=2) == leaves).mean()),
        mean_log_z=float(res.log_z[np.isfinite(res.log_z)].mean()),
        zero_likelihood=float(np.mean(~np.isfinite(res.log_z))),
    )


CLI = Reproduction(
    "exact BP_k' accuracy on k-filtered data (root and single-mask MLM), the paper's grammar",
    "results/hierarchy", "paper", "sequences per k: paper 200000, small 20000",
    (Option("--samples", "sequences per k instead of the budget's", "count"),))
"""``tpcore reproduce bp-table``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int, samples: int | None = None) -> dict[str, Any]:
    """The table at ``budget`` (``samples`` replaces its sequences per k), the data of each k
    drawn with ``derive_seed(seed, "bp-table", "data", k)``. Writes ``bp_table.json`` and
    ``bp_table.md`` into ``out`` and returns the JSON content. Nothing is reused: the table
    takes seconds."""
    samples = samples or budget["samples"]
    out = check_out_dir(out)
    g = paper_grammar()
    l = PAPER["l"]
    t0 = time.perf_counter()
    rows = []
    for k in range(l + 1):
        data = sample_trees(g, samples, l, k, seed=derive_seed(seed, "bp-table", "data", k))
        for kp in range(l + 1):
            rows.append(dict(k_data=k, k_bp=kp, **bp_accuracies(g, data.leaves, data.root, kp)))
    result = dict(setting=PAPER, samples=samples, seed=seed, rows=rows,
                  seconds=time.perf_counter() - t0,
                  command=f"tpcore reproduce bp-table --samples {samples} --seed {seed}")
    write_json(out / "bp_table.json", result)
    write_text(out / "bp_table.md", markdown(result))
    return result


def markdown(result: dict[str, Any]) -> str:
    """The root and MLM tables, the matched (Bayes-optimal) diagonal in bold."""
    l = result["setting"]["l"]
    acc = {(r["k_data"], r["k_bp"]): r for r in result["rows"]}
    head = "| data k \\ BP_k' | " + " | ".join(f"BP_{kp}" for kp in range(l + 1)) + " |\n"
    sep = "|---|" + "---|" * (l + 1) + "\n"
    parts = [f"Exact BP accuracy, l = {l}, q = {result['setting']['q']}, sigma = "
             f"{result['setting']['sigma']}, the paper's seed-0 grammar, {result['samples']} "
             f"samples per data k (seed {result['seed']}). Diagonal = matched (Bayes-optimal).\n"
             f"Command: `{result['command']}`\n"]
    for key, title in (("root_acc", "Root classification accuracy"),
                       ("mlm_acc", "Single-mask MLM accuracy (averaged over mask positions)")):
        lines = [f"\n**{title}**\n\n", head, sep]
        for k in range(l + 1):
            cells = []
            for kp in range(l + 1):
                cell = f"{acc[k, kp][key]:.4f}"
                cells.append(f"**{cell}**" if k == kp else cell)
            lines.append(f"| k = {k} | " + " | ".join(cells) + " |\n")
        parts.append("".join(lines))
    zero = [(k, kp, r["zero_likelihood"]) for (k, kp), r in acc.items() if r["zero_likelihood"]]
    if zero:
        parts.append("\nSequences with zero likelihood under a mismatched BP_k' (prediction = "
                     "symbol 0): " + ", ".join(f"data k={k}, BP_{kp}: {z:.4f}"
                                               for k, kp, z in zero) + "\n")
    return "".join(parts)


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce bp-table`` prints."""
    return f"wrote {out}/bp_table.json and bp_table.md ({result['seconds']:.1f} s)"

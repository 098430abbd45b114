"""Reproductions for "How transformers learn structured data: insights from hierarchical
filtering": the exact-BP reference table and the transformer experiments matched against it.

Host-side orchestration (NumPy directly for bookkeeping; the compute runs through ``tpcore.bp``
and the models).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from tpcore.io import write_json, write_text

PAPER = dict(l=4, q=4, sigma=1.0, grammar_seed=0, legacy=True)
"""The paper's setting: depth 4, 4 symbols, sigma 1, the seed-0 grammar of its code."""


def paper_grammar():
    """The paper's transition tensor (``random_grammar(4, 1.0, seed=0, legacy=True)``)."""
    from tpcore.tasks.trees import random_grammar

    return random_grammar(PAPER["q"], PAPER["sigma"], PAPER["grammar_seed"], legacy=True)


def bp_accuracies(grammar, leaves: np.ndarray, root: np.ndarray, k_bp: int) -> dict:
    """Root and single-mask MLM accuracy of BP_k_bp on ``leaves: (n, N)`` with roots ``(n,)``.

    The MLM prediction for position i from all other leaves is BP's leaf cavity, so one sweep
    with every leaf observed gives the single-mask prediction at every position; the MLM accuracy
    is averaged over all positions (= a uniformly random mask position, with N times the
    evaluations). Ties and zero-likelihood sequences (possible under mismatch) take argmax 0.
    """
    from tpcore.bp import belief_propagation, evidence_from_leaves

    res = belief_propagation(grammar.M, grammar.p0, evidence_from_leaves(leaves, grammar.q),
                             k_bp)
    return dict(
        root_acc=float((res.root.argmax(axis=1) == root).mean()),
        mlm_acc=float((res.cavity.argmax(axis=2) == leaves).mean()),
        mean_log_z=float(res.log_z[np.isfinite(res.log_z)].mean()),
        zero_likelihood=float(np.mean(~np.isfinite(res.log_z))),
    )


def bp_table(out_dir: str | Path = "results/hierarchy", samples: int = 200_000,
             seed: int = 0) -> dict:
    """Accuracy of BP_k' on data filtered at k, for all k, k' in 0..l (the paper's grammar).

    ``samples`` sequences per k (the budget), drawn with seed ``seed + k``. Writes
    ``bp_table.json`` and ``bp_table.md`` into ``out_dir`` and returns the JSON content.
    """
    from tpcore.tasks.trees import sample_trees

    g = paper_grammar()
    l = PAPER["l"]
    t0 = time.perf_counter()
    rows = []
    for k in range(l + 1):
        data = sample_trees(g, samples, l, k, seed=seed + k)
        for kp in range(l + 1):
            rows.append(dict(k_data=k, k_bp=kp, **bp_accuracies(g, data.leaves, data.root, kp)))
    out = dict(setting=PAPER, samples=samples, seed=seed, rows=rows,
               seconds=time.perf_counter() - t0,
               command=f"tpcore reproduce bp-table --samples {samples} --seed {seed}")
    out_dir = Path(out_dir)
    write_json(out_dir / "bp_table.json", out)
    write_text(out_dir / "bp_table.md", _bp_table_markdown(out))
    return out


def _bp_table_markdown(out: dict) -> str:
    l = out["setting"]["l"]
    acc = {(r["k_data"], r["k_bp"]): r for r in out["rows"]}
    head = "| data k \\ BP_k' | " + " | ".join(f"BP_{kp}" for kp in range(l + 1)) + " |\n"
    sep = "|---|" + "---|" * (l + 1) + "\n"
    parts = [f"Exact BP accuracy, l = {l}, q = {out['setting']['q']}, sigma = "
             f"{out['setting']['sigma']}, the paper's seed-0 grammar, {out['samples']} samples "
             f"per data k (seed {out['seed']} + k). Diagonal = matched (Bayes-optimal).\n"
             f"Command: `{out['command']}`\n"]
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

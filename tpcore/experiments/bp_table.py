"""``tpcore reproduce bp-table``: accuracy of exact BP_k' on data filtered at k, for all k, k' in
0..l, on the paper's grammar (the dashed lines of the hierarchical-filtering paper), and the
paper's Appendix E checked at the same scale: BP written as l single-head attention blocks
(:mod:`tpcore.bp_attention`) gives BP's leaf cavities.

Host-side orchestration; the compute runs through :mod:`tpcore.bp`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.bp import belief_propagation, evidence_from_leaves
from tpcore.bp_attention import forward_only_marginals
from tpcore.experiments.budget import Budget, preset
from tpcore.experiments.options import Option, Reproduction
from tpcore.experiments.tree_grammar import PAPER, paper_grammar
from tpcore.io import write_json, write_text
from tpcore.rundir import check_out_dir
from tpcore.seeds import derive_seed
from tpcore.tasks.trees import Grammar, sample_trees, uniform_sequences

BUDGETS = {"small": Budget("small", {"samples": 20_000}),
           "paper": Budget("paper", {"samples": 200_000})}
"""Sequences drawn per data k: ``paper`` is the table of the docs (about a minute and a half)."""

ATTENTION_SEQUENCES = 20_000
"""Most sequences per data set in the Appendix E check (its tables are ``(n, 2**l, q, q)``)."""
ATTENTION_BETAS = (None, 2.0, 5.0, 10.0, 20.0, 30.0)
"""Attention of the Appendix E blocks: the uniform limit (``None``) and softmax scales."""
TIE = 1e-12
"""Two BP probabilities closer than this are a tie."""
MASKED_SHARE = 0.25
"""Share of leaves hidden in the masked variant of the Appendix E check."""


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


def attention_errors(grammar: Grammar, leaves: np.ndarray, mask: np.ndarray,
                     betas: tuple[float | None, ...] = ATTENTION_BETAS) -> list[dict[str, Any]]:
    """BP as ``l`` attention blocks against exact BP_0 on ``leaves: (n, N)`` with the leaves
    where ``mask: (n, N)`` hidden: for each attention scale ``beta`` the largest
    ``|mu_attention - mu_BP|`` over every leaf and symbol, and the share of leaves whose
    attention argmax is one of BP's most likely symbols (exact ties, which the grammar's
    symmetries make common, count as agreement)."""
    evidence = evidence_from_leaves(leaves, grammar.q, mask)
    ref = belief_propagation(grammar.M, grammar.p0, evidence, 0).cavity
    rows = []
    for beta in betas:
        mu = forward_only_marginals(grammar.M, grammar.p0, evidence, beta)
        picked = np.take_along_axis(ref, mu.argmax(-1)[..., None], -1)[..., 0]
        rows.append(dict(beta=beta, max_abs_error=float(np.abs(mu - ref).max()),
                         argmax_agreement=float((picked >= ref.max(-1) - TIE).mean())))
    return rows


def attention_check(grammar: Grammar, l: int, samples: int, seed: int) -> list[dict[str, Any]]:
    """:func:`attention_errors` on in-sample (k = 0) trees and on uniformly random sequences,
    every leaf seen and :data:`MASKED_SHARE` of them hidden; ``samples`` sequences each, drawn
    with ``derive_seed(seed, "bp-table", "attention", ...)``."""
    def draw(what: str) -> int:
        return derive_seed(seed, "bp-table", "attention", what)

    sets = {"in-sample (k = 0)": sample_trees(grammar, samples, l, 0, seed=draw("trees")).leaves,
            "uniform": uniform_sequences(samples, l, grammar.q, seed=draw("uniform"))}
    hide = np.random.default_rng(draw("mask"))
    rows = []
    for data, leaves in sets.items():
        masks = {"none": np.zeros(leaves.shape, bool),
                 f"{MASKED_SHARE:.0%}": hide.random(leaves.shape) < MASKED_SHARE}
        for hidden, mask in masks.items():
            rows += [dict(data=data, hidden=hidden, **r)
                     for r in attention_errors(grammar, leaves, mask)]
    return rows


CLI = Reproduction(
    "exact BP_k' accuracy on k-filtered data (root and single-mask MLM), the paper's grammar",
    "results/hierarchy", "paper", "sequences per k: paper 200000, small 20000",
    (Option("--samples", "sequences per k instead of the budget's", "count"),))
"""``tpcore reproduce bp-table``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int, samples: int | None = None) -> dict[str, Any]:
    """The table at ``budget`` (``samples`` replaces its sequences per k), the data of each k
    drawn with ``derive_seed(seed, "bp-table", "data", k)``, and the Appendix E check
    (:func:`attention_check`) on at most :data:`ATTENTION_SEQUENCES` sequences per data set.
    Writes ``bp_table.json`` and ``bp_table.md`` into ``out`` and returns the JSON content.
    Nothing is reused: the whole takes a minute or two."""
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
    n_attention = min(samples, ATTENTION_SEQUENCES)
    result = dict(setting=PAPER, samples=samples, seed=seed, rows=rows,
                  attention_samples=n_attention,
                  attention=attention_check(g, l, n_attention, seed),
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
    parts.append(attention_markdown(result))
    return "".join(parts)


def attention_markdown(result: dict[str, Any]) -> str:
    """The Appendix E table: one row per data set, hidden share and attention scale."""
    l = result["setting"]["l"]
    lines = [f"\n**BP as {l} single-head attention blocks (Appendix E) against exact BP_0**\n\n"
             f"Leaf predictions `P(x_i | other leaves)` of the forward-only recursion "
             f"(`tpcore.bp_attention`), {result['attention_samples']} sequences per data set; "
             "beta = uniform is the exact limit of the softmax attention.\n\n",
             "| data | leaves hidden | beta | largest abs. error | argmax agreement |\n",
             "|---|---|---|---|---|\n"]
    for r in result["attention"]:
        beta = "uniform" if r["beta"] is None else f"{r['beta']:g}"
        lines.append(f"| {r['data']} | {r['hidden']} | {beta} | {r['max_abs_error']:.1e} | "
                     f"{r['argmax_agreement']:.4f} |\n")
    return "".join(lines)


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce bp-table`` prints."""
    return f"wrote {out}/bp_table.json and bp_table.md ({result['seconds']:.1f} s)"

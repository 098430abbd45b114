"""``tpcore reproduce grammar-learning``: learn the paper's grammar from k = 0 leaves alone,
gradient ascent (Adam) on log Z against inside-outside (EM), as the training set grows.

Both methods maximise the likelihood of the leaves under the full tree (BP_0's log Z,
:mod:`tpcore.bp`) over the transition logits ``theta: (q, q, q)`` (``M[a] = softmax(theta[a])``
over the q^2 children pairs) and both run through :func:`tpcore.train.fit`:

- Adam: the step leaves ``-d mean(log Z)/d theta`` of a minibatch in ``theta.grad``;
- EM: the step (E) leaves the expected rule counts ``C`` of all samples in ``theta.grad`` and
  :class:`RuleCountUpdate` (M) sets ``theta = log C``, so ``M = C / sum_{b,c} C``.

Host-side orchestration; BP runs on the active backend's arrays.
"""

from __future__ import annotations

import itertools
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.backend import asarray, to_host, xp_of
from tpcore.bp import (
    belief_propagation,
    evidence_from_leaves,
    expected_rule_counts,
    log_likelihood_grad,
    transition_from_logits,
)
from tpcore.experiments.budget import Budget, preset
from tpcore.experiments.options import Option, Reproduction
from tpcore.experiments.tree_grammar import PAPER, paper_grammar
from tpcore.io import write_json, write_text
from tpcore.nn.module import Module, Parameter
from tpcore.nn.optim import Adam, Optimizer
from tpcore.rundir import cached, check_out_dir
from tpcore.seeds import derive_seed
from tpcore.tasks.trees import sample_trees
from tpcore.train import Batch, StepContext, TrainConfig, fit, shuffled_batches

BUDGETS = {
    "tiny": Budget("tiny", dict(sizes=(50, 200), em_steps=10, adam_steps=10, adam_lr=0.1,
                                adam_batch=100, test=500)),
    "small": Budget("small", dict(sizes=(100, 300, 1000, 3000), em_steps=100, adam_steps=200,
                                  adam_lr=0.1, adam_batch=1000, test=5000)),
}
"""Training-set sizes P, steps of each method, Adam's rate and minibatch, test sequences:
``small`` is the table of the docs (5 minutes on two cores)."""
TRACK_EVERY = 5
"""Steps between evaluations of the test log-likelihood (the convergence curve)."""


def budget(name: str) -> Budget:
    """The preset ``name`` of :data:`BUDGETS`."""
    return preset(name, BUDGETS)


class GrammarLogits(Module):
    """A grammar with learnable transitions: logits ``theta: (q, q, q)`` and a fixed root
    prior ``p0: (q,)``."""

    def __init__(self, theta: Any, p0: Any):
        self.theta = Parameter(theta)
        self.p0 = p0

    def transitions(self) -> Any:
        """``M = softmax(theta[a])`` over the q^2 pairs of each parent: (q, q, q)."""
        return transition_from_logits(self.theta.data)


def adam_step(model: GrammarLogits, batch: Batch, ctx: StepContext) -> Any:
    """Minus the mean log Z of ``batch["evidence"]: (B, N, q)``; its gradient with respect to
    ``theta`` goes into ``theta.grad``."""
    log_z, grad = log_likelihood_grad(model.theta.data, model.p0, batch["evidence"], 0)
    model.theta.accumulate(-grad)
    return -log_z


def em_step(model: GrammarLogits, batch: Batch, ctx: StepContext) -> Any:
    """The E-step: the expected rule counts ``C[a, b, c]`` of ``batch["evidence"]`` go into
    ``theta.grad`` (for :class:`RuleCountUpdate`); returns minus the mean log Z."""
    counts, sum_log_z = expected_rule_counts(model.transitions(), model.p0, batch["evidence"])
    model.theta.accumulate(counts)
    return -sum_log_z / batch["evidence"].shape[0]


class RuleCountUpdate(Optimizer):
    """The M-step as an optimiser: ``theta = log C`` from the counts in ``theta.grad``, so the
    transitions become ``C / sum_{b,c} C`` per parent (pairs never counted get weight 0)."""

    def __init__(self, params: list[Parameter]):
        super().__init__(params, lr=1.0)

    def _update(self, i: int, p: Parameter) -> None:
        with np.errstate(divide="ignore"):  # log 0 = -inf: a pair never counted
            p.data = xp_of(p.grad).log(p.grad)


def match_permutation(M: np.ndarray, M_true: np.ndarray) -> tuple[tuple[int, ...], float]:
    """The relabelling ``pi`` of symbols minimising the mean total variation per parent between
    ``M[pi][:, pi][:, :, pi]`` and ``M_true``; returns ``(pi, tv)``."""
    best = (tuple(range(len(M))), np.inf)
    for pi in itertools.permutations(range(len(M))):
        p = list(pi)
        tv = 0.5 * np.abs(M[np.ix_(p, p, p)] - M_true).sum(axis=(1, 2)).mean()
        if tv < best[1]:
            best = (pi, float(tv))
    return best


def learn(evidence: np.ndarray, p0: np.ndarray, theta0: np.ndarray, method: str, steps: int,
          lr: float, batch: int, seed: int, test_evidence: np.ndarray
          ) -> tuple[np.ndarray, list[tuple[int, float]], float]:
    """Fit the transitions to ``evidence: (P, N, q)`` from ``theta0`` by ``method``
    (``"adam"`` on minibatches of ``batch``, or ``"em"`` on all samples) for ``steps`` steps;
    returns the learned ``M: (q, q, q)``, the curve ``(step, mean test log Z)`` every
    :data:`TRACK_EVERY` steps and at the end, and the seconds taken."""
    model = GrammarLogits(asarray(np.array(theta0, np.float64)), asarray(p0, np.float64))
    test = asarray(test_evidence)

    def evaluate(m: GrammarLogits) -> dict[str, float]:
        res = belief_propagation(m.transitions(), m.p0, test, 0)
        return {"test_log_z": float(res.log_z.mean())}

    if method == "adam":
        optimizer: Optimizer = Adam(model.parameters(), lr=lr)
        batches = shuffled_batches({"evidence": evidence}, batch, seed=seed)
        step = adam_step
    else:
        optimizer, batches, step = (RuleCountUpdate(model.parameters()),
                                    itertools.repeat({"evidence": asarray(evidence)}), em_step)
    result = fit(model, optimizer, batches, step,
                 TrainConfig(steps=steps, eval_every=TRACK_EVERY, seed=seed, quiet=True,
                             desc=f"grammar {method}"), evaluate)
    curve = [(int(h["step"]), h["test_log_z"]) for h in result.history]
    return np.asarray(to_host(model.transitions())), curve, result.seconds


CLI = Reproduction(
    "learn the grammar from leaves: Adam on log Z vs inside-outside, against the number of "
    "samples", "results/hierarchy", "small",
    "small: P = 100..3000, 100 EM and 200 Adam steps; tiny: a pipeline check",
    (Option("--sizes", "training-set sizes P, comma-separated (default 100,300,1000,3000)",
            "counts"),
     Option("--em-steps", "inside-outside iterations (100)", "count"),
     Option("--adam-steps", "Adam steps (200)", "count")))
"""``tpcore reproduce grammar-learning``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int, sizes: tuple[int, ...] | None = None,
        em_steps: int | None = None, adam_steps: int | None = None) -> dict[str, Any]:
    """Learn the paper's grammar for every training-set size P of ``budget`` (or ``sizes``),
    both methods from the same random logits ``N(0, 1)``. Reported per run: total variation to
    the true M after matching symbols by permutation, test log-likelihood gap to the true
    grammar (nats per sequence), the MLM and root accuracy BP gets on test data with the
    learned grammar (root after the permutation), the steps to come within 0.01 nats of the
    run's final test log-likelihood, and the wall time.

    Each run is saved in ``out/grammar_learning/<method>-P<P>.json`` with its configuration
    and reused when it matches (so a rerun resumes); ``grammar_learning.json`` / ``.md`` are
    written from all of them."""
    cfg = dict(budget.sizes)
    cfg.update({k: v for k, v in (("sizes", sizes), ("em_steps", em_steps),
                                  ("adam_steps", adam_steps)) if v is not None})
    out = check_out_dir(out)
    check_out_dir(out / "grammar_learning")
    g = paper_grammar()
    l, q = PAPER["l"], PAPER["q"]
    te = sample_trees(g, cfg["test"], l, 0, seed=derive_seed(seed, "grammar-learning", "test"))
    e_te = evidence_from_leaves(te.leaves, q)
    ref = belief_propagation(g.M, g.p0, e_te, 0)
    theta0 = np.random.default_rng(derive_seed(seed, "grammar-learning", "init")
                                   ).standard_normal((q, q, q))

    def one_run(P: int, method: str, steps: int) -> dict[str, Any]:
        tr = sample_trees(g, P, l, 0, seed=derive_seed(seed, "grammar-learning", "train", P))
        M, curve, seconds = learn(evidence_from_leaves(tr.leaves, q), g.p0, theta0, method,
                                  steps, cfg["adam_lr"], cfg["adam_batch"],
                                  derive_seed(seed, "grammar-learning", "minibatches"), e_te)
        pi, tv = match_permutation(M, g.M)
        res = belief_propagation(M, g.p0, e_te, 0)
        final = curve[-1][1]
        return dict(
            P=P, method=method, steps=steps, seconds=seconds, permutation=list(pi), tv=tv,
            ll_gap=float(res.log_z.mean() - ref.log_z.mean()),
            mlm_acc=float((res.cavity.argmax(axis=2) == te.leaves).mean()),
            root_acc=float((np.asarray(pi)[res.root.argmax(axis=1)] == te.root).mean()),
            steps_to_converge=next(s for s, ll in curve if ll >= final - 0.01),
            seconds_per_step=seconds / steps)

    rows = []
    for P in cfg["sizes"]:
        for method in ("em", "adam"):
            steps = cfg[f"{method}_steps"]
            config = dict(P=P, method=method, steps=steps, test=cfg["test"], seed=seed,
                          **({"lr": cfg["adam_lr"], "batch": cfg["adam_batch"]}
                             if method == "adam" else {}))
            row = cached(out / "grammar_learning" / f"{method}-P{P}.json", config,
                         partial(one_run, P, method, steps))
            rows.append({k: v for k, v in row.items() if k != "record"})
    options = "".join(f" --{k.replace('_', '-')} {v}" for k, v in (
        ("sizes", sizes and ",".join(map(str, sizes))), ("em_steps", em_steps),
        ("adam_steps", adam_steps)) if v)
    result = dict(setting=PAPER, budget=budget.name, sizes=list(cfg["sizes"]),
                  test=cfg["test"], seed=seed, adam_lr=cfg["adam_lr"],
                  adam_batch=cfg["adam_batch"], rows=rows,
                  true_grammar=dict(mlm_acc=float((ref.cavity.argmax(axis=2)
                                                   == te.leaves).mean()),
                                    root_acc=float((ref.root.argmax(axis=1) == te.root).mean())),
                  command=f"tpcore reproduce grammar-learning --budget {budget.name}{options} "
                          f"--seed {seed}")
    write_json(out / "grammar_learning.json", result)
    write_text(out / "grammar_learning.md", markdown(result))
    return result


def markdown(result: dict[str, Any]) -> str:
    """One row per (P, method)."""
    lines = [f"Grammar learning from leaves (l = {result['setting']['l']}, q = "
             f"{result['setting']['q']}, the paper's grammar, k = 0 data); test set "
             f"{result['test']} sequences. True grammar: MLM accuracy "
             f"{result['true_grammar']['mlm_acc']:.4f}, root accuracy "
             f"{result['true_grammar']['root_acc']:.4f}. Adam: lr {result['adam_lr']}, "
             f"minibatch {result['adam_batch']}. Timings on a shared 2-core machine (noisy).\n",
             f"Command: `{result['command']}`\n\n",
             "| P | method | TV to true M | test log-lik gap (nats/seq) | MLM acc | root acc | "
             "steps to converge | steps run | s/step |\n",
             "|---|---|---|---|---|---|---|---|---|\n"]
    for r in result["rows"]:
        lines.append(f"| {r['P']} | {r['method']} | {r['tv']:.4f} | {r['ll_gap']:.4f} | "
                     f"{r['mlm_acc']:.4f} | {r['root_acc']:.4f} | {r['steps_to_converge']} | "
                     f"{r['steps']} | {r['seconds_per_step']:.3f} |\n")
    return "".join(lines)


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce grammar-learning`` prints."""
    return f"wrote {out}/grammar_learning.json and grammar_learning.md"

"""Reproductions for "How transformers learn structured data: insights from hierarchical
filtering": the exact-BP reference table and the transformer experiments matched against it.

Host-side orchestration (NumPy directly for bookkeeping; the compute runs through ``tpcore.bp``
and the models).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpcore.io import write_json, write_text
from tpcore.rundir import check_out_dir

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

    check_out_dir(out_dir)

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


def match_permutation(M: np.ndarray, M_true: np.ndarray) -> tuple[tuple[int, ...], float]:
    """The relabelling ``pi`` of symbols minimising the mean total variation per parent between
    ``M[pi][:, pi][:, :, pi]`` and ``M_true``; returns ``(pi, tv)``."""
    import itertools

    best = (tuple(range(len(M))), np.inf)
    for pi in itertools.permutations(range(len(M))):
        p = list(pi)
        tv = 0.5 * np.abs(M[np.ix_(p, p, p)] - M_true).sum(axis=(1, 2)).mean()
        if tv < best[1]:
            best = (pi, float(tv))
    return best


def grammar_learning(out_dir: str | Path = "results/hierarchy",
                     sizes: tuple[int, ...] = (100, 300, 1000, 3000), em_steps: int = 100,
                     adam_steps: int = 200, adam_lr: float = 0.1, adam_batch: int = 1000,
                     test: int = 5000, seed: int = 0) -> dict:
    """Learn the paper's grammar from k = 0 leaves alone, Adam on log Z vs inside-outside (EM).

    For each training-set size P, both methods start from the same random logits
    (``N(0, 1)``, seed ``seed``). Reported per run: total variation to the true M after matching
    symbols by permutation, test log-likelihood gap to the true grammar (nats per sequence), the
    MLM and root accuracy BP gets on test data with the learned grammar (root after the
    permutation), the steps to come within 0.01 nats of the run's final test log-likelihood,
    and the wall time. Writes ``grammar_learning.json`` / ``.md``.
    """
    from tpcore.bp import belief_propagation, evidence_from_leaves, learn_grammar
    from tpcore.tasks.trees import sample_trees

    check_out_dir(out_dir)

    g = paper_grammar()
    l, q = PAPER["l"], PAPER["q"]
    te = sample_trees(g, test, l, 0, seed=seed + 1000)
    e_te = evidence_from_leaves(te.leaves, q)
    ref = belief_propagation(g.M, g.p0, e_te, 0)
    theta0 = np.random.default_rng(seed).standard_normal((q, q, q))
    rows = []
    for P in sizes:
        tr = sample_trees(g, P, l, 0, seed=seed + P)
        e_tr = evidence_from_leaves(tr.leaves, q)
        for method, steps in (("em", em_steps), ("adam", adam_steps)):
            curve: list[tuple[int, float]] = []

            def track(step: int, M: np.ndarray, curve: list = curve) -> None:
                if step % 5 == 4:
                    curve.append((step + 1, float(belief_propagation(M, g.p0, e_te, 0)
                                                  .log_z.mean())))

            t0 = time.perf_counter()
            M = learn_grammar(e_tr, g.p0, theta0, method, steps=steps, lr=adam_lr,
                              batch=adam_batch, seed=seed, callback=track)
            seconds = time.perf_counter() - t0
            pi, tv = match_permutation(M, g.M)
            res = belief_propagation(M, g.p0, e_te, 0)
            final = curve[-1][1]
            converged = next(s for s, ll in curve if ll >= final - 0.01)
            rows.append(dict(
                P=P, method=method, steps=steps, seconds=seconds, permutation=list(pi), tv=tv,
                ll_gap=float(res.log_z.mean() - ref.log_z.mean()),
                mlm_acc=float((res.cavity.argmax(axis=2) == te.leaves).mean()),
                root_acc=float((np.asarray(pi)[res.root.argmax(axis=1)] == te.root).mean()),
                steps_to_converge=converged,
                seconds_per_step=seconds / steps))
    out = dict(setting=PAPER, sizes=list(sizes), test=test, seed=seed, adam_lr=adam_lr,
               adam_batch=adam_batch, rows=rows,
               true_grammar=dict(mlm_acc=float((ref.cavity.argmax(axis=2) == te.leaves).mean()),
                                 root_acc=float((ref.root.argmax(axis=1) == te.root).mean())),
               command=f"tpcore reproduce grammar-learning --seed {seed}")
    out_dir = Path(out_dir)
    write_json(out_dir / "grammar_learning.json", out)
    lines = [f"Grammar learning from leaves (l = {l}, q = {q}, the paper's grammar, k = 0 data); "
             f"test set {test} sequences. True grammar: MLM accuracy "
             f"{out['true_grammar']['mlm_acc']:.4f}, root accuracy "
             f"{out['true_grammar']['root_acc']:.4f}. Adam: lr {adam_lr}, minibatch "
             f"{adam_batch}. Timings on a shared 2-core machine (noisy).\n",
             f"Command: `{out['command']}`\n\n",
             "| P | method | TV to true M | test log-lik gap (nats/seq) | MLM acc | root acc | "
             "steps to converge | steps run | s/step |\n",
             "|---|---|---|---|---|---|---|---|---|\n"]
    for r in rows:
        lines.append(f"| {r['P']} | {r['method']} | {r['tv']:.4f} | {r['ll_gap']:.4f} | "
                     f"{r['mlm_acc']:.4f} | {r['root_acc']:.4f} | {r['steps_to_converge']} | "
                     f"{r['steps']} | {r['seconds_per_step']:.3f} |\n")
    write_text(out_dir / "grammar_learning.md", "".join(lines))
    return out


# --------------------------------------------------------------------------------------------
# Transformers matched against BP
# --------------------------------------------------------------------------------------------

@dataclass
class TreeRun:
    """One transformer run. ``task``: ``"root"`` (flatten readout, q classes) or ``"mlm"`` (one
    masked leaf per sequence, redrawn every batch, loss at that position; vocabulary q + 1).
    Encoder, post-LN, one head, sinusoidal positions, ReLU FFN, ``n_layers = l``; Adam with a
    fixed learning rate (``schedule="constant"``, the paper's) or a cosine decay to 0 over
    ``steps``. Checkpoints at ``checkpoints`` log-spaced steps."""

    task: str = "root"
    l: int = 3
    k_train: int = 0
    P: int = 2**15
    d_model: int = 64
    d_mlp: int = 256
    batch: int = 64
    lr: float = 1e-3
    steps: int = 4000
    checkpoints: int = 8
    n_eval: int = 4000
    schedule: str = "constant"
    seed: int = 0


BUDGETS = {
    "tiny": dict(l=2, P=2**10, d_model=16, d_mlp=32, batch=32, lr=3e-3, steps=60, checkpoints=3,
                 n_eval=300),
    "small": dict(l=3, P=2**16, d_model=64, d_mlp=256, batch=64, lr=1e-3, steps=8000,
                  checkpoints=10, n_eval=4000, schedule="cosine"),
    "paper": dict(l=4, P=2**17, d_model=128, d_mlp=2048, batch=32, lr=1e-4, steps=41_000,
                  checkpoints=12, n_eval=10_000),
}
"""Scales of ``tpcore reproduce hierarchy``: ``paper`` is the paper's classification setting
(10 epochs of 2**17 at batch 32); ``small`` fits a shared 2-core CPU in minutes per run."""


def make_model(run: TreeRun, q: int, readout: str | None = None):
    """The standard transformer configured as in the paper (scaled by ``run``); MLM models
    have the extra mask token. ``readout`` overrides the task's (fine-tuning an MLM encoder)."""
    from tpcore.models.transformer import Transformer, TransformerConfig

    mlm = run.task == "mlm"
    return Transformer(TransformerConfig(
        vocab_size=q + 1 if mlm else q, max_len=2**run.l, n_classes=q, d_model=run.d_model,
        n_layers=run.l, n_heads=1, d_mlp=run.d_mlp, layer_norm="post", positions="sinusoidal",
        readout=readout or ("token" if mlm else "flatten"), activation="relu",
        dtype="float32", seed=run.seed))


def mask_leaves(leaves: np.ndarray, pos: np.ndarray, q: int) -> dict:
    """MLM batch: ``leaves: (B, N)`` with leaf ``pos[b]`` of row b replaced by the mask token
    ``q``; targets are the leaves, the loss mask is true at the masked position only."""
    B = len(leaves)
    tokens = leaves.astype(np.int64)
    tokens[np.arange(B), pos] = q
    mask = np.zeros(leaves.shape, bool)
    mask[np.arange(B), pos] = True
    return dict(tokens=tokens, targets=leaves.astype(np.int64), mask=mask)


def _mlm_batches(leaves: np.ndarray, q: int, batch: int, seed: int):
    from tpcore.backend import asarray
    from tpcore.train import shuffled_batches

    gen = np.random.default_rng(seed + 1)
    for b in shuffled_batches({"leaves": leaves}, batch, seed=seed):
        x = np.asarray(b["leaves"].get() if hasattr(b["leaves"], "get") else b["leaves"])
        yield {k: asarray(v) for k, v in mask_leaves(x, gen.integers(0, x.shape[1], len(x)),
                                                      q).items()}


def model_probs(model, run: TreeRun, leaves: np.ndarray, pos: np.ndarray | None,
                q: int, batch: int = 2000) -> np.ndarray:
    """Model probabilities ``(n, q)``: of the root, or of leaf ``pos[n]`` masked (MLM)."""
    from tpcore.backend import asarray, to_host

    out = []
    for i in range(0, len(leaves), batch):
        x = leaves[i:i + batch]
        if run.task == "mlm":
            p = pos[i:i + batch]
            logits = to_host(model.forward(asarray(mask_leaves(x, p, q)["tokens"])))
            logits = logits[np.arange(len(x)), p]
        else:
            logits = to_host(model.forward(asarray(x.astype(np.int64))))
        z = logits.astype(np.float64)
        z = np.exp(z - z.max(axis=1, keepdims=True))
        out.append(z / z.sum(axis=1, keepdims=True))
    return np.concatenate(out)


def compare_probs(p_bp: np.ndarray, p_model: np.ndarray) -> dict:
    """``KL(BP || model)`` (0 log 0 = 0), argmax agreement and mean per-row Spearman rank
    correlation (average ranks for ties; rows where either side is constant are skipped)."""
    from scipy.stats import rankdata

    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(p_bp > 0, p_bp * (np.log(p_bp) - np.log(p_model)), 0.0).sum(axis=1)
        ra, rb = rankdata(p_bp, axis=1), rankdata(p_model, axis=1)
        ra, rb = ra - ra.mean(axis=1, keepdims=True), rb - rb.mean(axis=1, keepdims=True)
        rho = (ra * rb).sum(axis=1) / np.sqrt((ra**2).sum(axis=1) * (rb**2).sum(axis=1))
    return dict(kl=float(kl.mean()), agree=float((p_bp.argmax(1) == p_model.argmax(1)).mean()),
                spearman=float(np.nanmean(rho)) if np.isfinite(rho).any() else float("nan"))


def eval_sets(grammar, run: TreeRun) -> dict:
    """Test inputs (k_test = 0..l and ``uniform``) with truths, mask positions and the BP_k
    marginals of every k for each: ``{name: dict(leaves, truth, pos, bp={k: (n, q)})}``."""
    from tpcore.bp import belief_propagation, evidence_from_leaves
    from tpcore.tasks.trees import sample_trees, uniform_sequences

    l, q, n = run.l, grammar.q, run.n_eval
    sets = {}
    pos = np.random.default_rng(30_000).integers(0, 2**l, n)
    for name in [*range(l + 1), "uniform"]:
        if name == "uniform":
            leaves, root = uniform_sequences(n, l, q, seed=20_000), None
        else:
            t = sample_trees(grammar, n, l, name, seed=10_000 + name)
            leaves, root = t.leaves, t.root
        truth = root if run.task == "root" else (None if root is None else leaves[np.arange(n),
                                                                                   pos])
        e = evidence_from_leaves(leaves, q)
        bp = {}
        for k in range(l + 1):
            res = belief_propagation(grammar.M, grammar.p0, e, k)
            bp[k] = res.root if run.task == "root" else res.cavity[np.arange(n), pos]
        sets[str(name)] = dict(leaves=leaves, truth=truth, pos=pos, bp=bp)
    return sets


def checkpoint_metrics(model, run: TreeRun, sets: dict, q: int) -> dict:
    """Accuracy on every test set, and KL / agreement / Spearman against every BP_k."""
    out = {}
    for name, s in sets.items():
        p = model_probs(model, run, s["leaves"], s["pos"], q)
        m = {f"bp{k}": compare_probs(pb, p) for k, pb in s["bp"].items()}
        if s["truth"] is not None:
            m["acc"] = float((p.argmax(1) == s["truth"]).mean())
        out[name] = m
    return out


def attention_summary(model, run: TreeRun, leaves: np.ndarray, q: int) -> dict:
    """Average attention map per layer over ``leaves`` (for MLM runs with one random leaf
    masked, as in training; root classifiers see the unmasked leaves) and
    the block-mass score ``score[layer][h-1]`` = mean over rows i of the attention mass inside
    i's aligned block of 2**h leaves (uniform attention gives 2**h / N)."""
    pos = np.random.default_rng(40_000).integers(0, 2**run.l, len(leaves))
    model_probs(model, run, leaves, pos, q, batch=len(leaves))
    from tpcore.backend import to_host

    maps = [to_host(a)[:, 0].mean(axis=0) for a in model.cache["attn"]]
    i = np.arange(2**run.l)
    score = [[float(np.where((i[None, :] >> h) == (i[:, None] >> h), A, 0).sum(axis=1).mean())
              for h in range(1, run.l)] for A in maps]
    return dict(maps=[m.round(4).tolist() for m in maps], block_mass=score)


def train_against_bp(run: TreeRun, grammar=None, log=print, save_to: str | Path | None = None
                     ) -> dict:
    """Train one transformer and compare it with exact BP at log-spaced checkpoints; the
    final model is saved to ``save_to`` (``.npz`` + ``.json``) when given."""
    from tpcore.nn.optim import Adam, constant, cosine
    from tpcore.tasks.trees import sample_trees
    from tpcore.train import TrainConfig, fit, shuffled_batches, supervised_step

    if run.task not in ("root", "mlm"):
        raise ValueError(f"task {run.task!r} unknown; expected 'root' or 'mlm'")
    g = paper_grammar() if grammar is None else grammar
    q = g.q
    train = sample_trees(g, run.P, run.l, run.k_train, seed=100 + run.k_train + 7 * run.seed)
    if run.task == "root":
        batches = shuffled_batches(dict(tokens=train.leaves.astype(np.int64),
                                        targets=train.root.astype(np.int64)), run.batch,
                                   seed=run.seed)
    else:
        batches = _mlm_batches(train.leaves, q, run.batch, run.seed)
    sets = eval_sets(g, run)
    model = make_model(run, q)
    opt = Adam(model.parameters(), lr=run.lr)
    schedule = cosine(run.lr, run.steps) if run.schedule == "cosine" else constant(run.lr)
    marks = np.unique(np.geomspace(max(1, run.steps // 100), run.steps, run.checkpoints)
                      .round().astype(int))
    history, done, seconds = [], 0, 0.0
    for mark in marks:
        res = fit(model, opt, batches, supervised_step,
                  TrainConfig(steps=int(mark - done), seed=run.seed + done, quiet=True,
                              lr_schedule=_offset(schedule, done)))
        done, seconds = int(mark), seconds + res.seconds
        metrics = checkpoint_metrics(model, run, sets, q)
        history.append(dict(step=done, epoch=done * run.batch / run.P, train_seconds=seconds,
                            loss=res.last_loss, **metrics))
        k = str(run.k_train)
        log(f"[{run.task} k_train={run.k_train}] step {done} ({seconds:.0f}s) loss "
            f"{res.last_loss:.4f} acc(k_test=k_train) {metrics[k]['acc']:.4f} acc(k_test=0) "
            f"{metrics['0']['acc']:.4f} argmin_k KL {_closest_bp(metrics[k])}")
    if save_to is not None:
        from tpcore.nn.module import save

        save(model, save_to, {"run": run.__dict__})
    return dict(run=run.__dict__, history=history, train_seconds=seconds,
                seconds_per_step=seconds / run.steps, n_parameters=model.n_parameters(),
                attention=attention_summary(model, run, sets[str(run.k_train)]["leaves"][:2000],
                                            q))


def _offset(schedule, start: int):
    """``schedule`` seen from step ``start`` on (``fit`` counts steps from 0 in each call)."""
    return lambda step: schedule(start + step)


def _closest_bp(m: dict) -> int:
    return int(np.argmin([m[f"bp{k}"]["kl"] for k in range(len([x for x in m if
                                                                  x.startswith("bp")]))]))


def hierarchy(out_dir: str | Path = "results/hierarchy", budget: str = "small",
              parts: tuple[str, ...] = ("root", "mlm"), mlm_steps: int | None = None,
              finetune_sizes: tuple[int, ...] = (2**8, 2**10, 2**12), long_k: int = 0,
              long_samples: int | None = None, seed: int = 0, log=print) -> dict:
    """The paper's transformer experiments at the scale of ``budget``, compared with exact BP.

    Parts: ``root`` (root classification for every k_train in 0..l: Figs. 1c, 3, 4),
    ``root-long`` (k_train = ``long_k`` for 4x the steps, on ``long_samples`` training trees
    instead of the budget's P when given),
    ``mlm`` (k_train = 0 MLM: Figs. 1d, 5, 6; the model is saved under ``runs/hierarchy``),
    ``probe`` (ancestor probes of the saved MLM encoder's frozen layers: Figs. 7, 14 left) and
    ``finetune`` (root classification from the MLM encoder, frozen / unfrozen, vs scratch,
    over ``finetune_sizes``: Fig. 1f). Results merge into ``hierarchy_<budget>.json`` (written
    after every run, so partial results survive) and ``hierarchy_<budget>.md``: a run replaces
    the one of the same settings, probes and fine-tuning record the encoder they read.

    Nothing is reused unless its recorded configuration is the requested one: a
    ``hierarchy_<budget>.json`` made with other budget settings, or a saved MLM encoder of other
    settings (another ``mlm_steps``, say), is refused before any training.
    """
    import json

    from tpcore.rundir import check_config

    if budget not in BUDGETS:
        raise ValueError(f"budget {budget!r} unknown; expected one of {sorted(BUDGETS)}")
    cfg = BUDGETS[budget]
    g = paper_grammar()
    out_dir = check_out_dir(out_dir)
    path = out_dir / f"hierarchy_{budget}.json"
    out = json.loads(path.read_text()) if path.is_file() else \
        dict(budget=budget, config=cfg, runs=[], commands=[])
    check_config(out["config"], cfg, str(path), "give other settings their own --out")
    out["commands"].append(f"tpcore reproduce hierarchy --budget {budget} --parts "
                           f"{','.join(parts)} --seed {seed}"
                           + (f" --mlm-steps {mlm_steps}" if mlm_steps else "")
                           + (f" --long-k {long_k}" if long_k else "")
                           + (f" --long-samples {long_samples}" if long_samples else ""))
    mlm_run = TreeRun(task="mlm", k_train=0, seed=seed,
                      **dict(cfg, steps=mlm_steps or 2 * cfg["steps"]))
    encoder = Path("runs/hierarchy") / f"{budget}_mlm_seed{seed}"
    if {"root", "mlm"} & set(parts):
        check_out_dir(encoder.parent)
    if "mlm" not in parts and ("probe" in parts or "finetune" in parts):
        meta = encoder.with_suffix(".json")
        if not meta.is_file():
            raise ValueError(f"no MLM encoder at {encoder}.npz; run --parts mlm first")
        check_config(json.loads(meta.read_text()).get("run"), mlm_run.__dict__,
                     f"the MLM encoder {encoder}.npz", "run --parts mlm with these settings "
                     "first")

    def store(key: str | None = None, value=None, run: dict | None = None) -> None:
        if run is not None:
            out["runs"] = [r for r in out["runs"] if r["run"] != run["run"]] + [run]
        if key is not None:
            out[key] = value
        write_json(path, out)
        write_text(out_dir / f"hierarchy_{budget}.md", hierarchy_markdown(out, g))

    if "root" in parts:
        for k in range(cfg["l"] + 1):
            store(run=train_against_bp(TreeRun(task="root", k_train=k, seed=seed, **cfg), g,
                                       log=log, save_to=encoder.parent /
                                       f"{budget}_root_k{k}_seed{seed}"))
    if "root-long" in parts:
        store(run=train_against_bp(TreeRun(task="root", k_train=long_k, seed=seed,
                                           **dict(cfg, steps=4 * cfg["steps"],
                                                  P=long_samples or cfg["P"])), g, log=log))
    if "mlm" in parts:
        store(run=train_against_bp(mlm_run, g, log=log, save_to=encoder))
    if "probe" in parts:
        from tpcore.models import load

        model = load(encoder)
        sizes = dict(n_train=min(2**13, cfg["P"]), n_test=min(2000, cfg["n_eval"]), seed=seed)
        store("probes", dict(
            encoder=mlm_run.__dict__,
            all_positions=probe_ancestors(model, mlm_run, g, **sizes),
            ends_only=probe_ancestors(model, mlm_run, g, positions="ends", **sizes)))
        log(f"probes: {out['probes']}")
    if "finetune" in parts:
        rows = []
        for P in finetune_sizes:
            for mode in ("scratch", "frozen", "unfrozen"):
                acc = finetune_root(mlm_run, g, None if mode == "scratch" else encoder, mode, P,
                                    steps=cfg["steps"] // 8, seed=seed)
                rows.append(dict(P=P, mode=mode, acc=acc))
                log(f"finetune P={P} {mode}: {acc:.4f}")
                store("finetune", dict(steps=cfg["steps"] // 8, encoder=mlm_run.__dict__,
                                       rows=rows))
    return out


def hierarchy_markdown(out: dict, grammar) -> str:
    """Tables: final accuracies against the BP table, checkpoint curves, attention scores."""
    from tpcore.tasks.trees import sample_trees

    parts = [f"Transformers vs exact BP, budget `{out['budget']}`: {out['config']}.\n"
             "Commands: " + "; ".join(f"`{c}`" for c in out["commands"]) + "\n"]
    for r in out["runs"]:
        run, hist = r["run"], r["history"]
        l, kt, task = run["l"], run["k_train"], run["task"]
        last = hist[-1]
        bp_acc = {}
        for k in range(l + 1):  # BP_k_train accuracy on each k_test set (the dashed lines)
            bp_acc[k] = _bp_set_accuracy(grammar, run, k, kt, sample_trees)
        parts.append(f"\n### {task}, k_train = {kt} ({r['n_parameters']} parameters, "
                     f"{run['steps']} steps, {run['P']} training trees, "
                     f"{r['train_seconds']:.0f} s training, "
                     f"{1000 * r['seconds_per_step']:.1f} ms/step)\n\n")
        parts.append("| k_test | model acc | BP_k_train acc | BP_k_test acc (optimal) | "
                     "KL(BP_k_train‖model) |\n|---|---|---|---|---|\n")
        for k in range(l + 1):
            m = last[str(k)]
            parts.append(f"| {k} | {m['acc']:.4f} | {bp_acc[k][0]:.4f} | {bp_acc[k][1]:.4f} | "
                         f"{m[f'bp{kt}']['kl']:.4f} |\n")
        parts.append("\nCheckpoints (in-sample k_test = k_train; `uniform` = random inputs): "
                     "KL(BP_k ‖ model) for k = 0..l, closest BP_k, agreement and Spearman with "
                     "BP_k_train.\n\n| step | epoch | acc | " +
                     " | ".join(f"KL BP_{k}" for k in range(l + 1)) +
                     " | closest | agree | Spearman | uniform: KL BP_k_train | uniform: agree |"
                     "\n|" + "---|" * (l + 9) + "\n")
        for h in hist:
            m, u = h[str(kt)], h["uniform"]
            parts.append(f"| {h['step']} | {h['epoch']:.2f} | {m['acc']:.4f} | " +
                         " | ".join(f"{m[f'bp{k}']['kl']:.3f}" for k in range(l + 1)) +
                         f" | BP_{_closest_bp(m)} | {m[f'bp{kt}']['agree']:.3f} | "
                         f"{m[f'bp{kt}']['spearman']:.3f} | {u[f'bp{kt}']['kl']:.3f} | "
                         f"{u[f'bp{kt}']['agree']:.3f} |\n")
        parts.append("\nAccuracy on every k_test over training:\n\n| step | " +
                     " | ".join(f"k_test={k}" for k in range(l + 1)) + " |\n|" +
                     "---|" * (l + 2) + "\n")
        for h in hist:
            parts.append(f"| {h['step']} | " + " | ".join(f"{h[str(k)]['acc']:.4f}"
                                                          for k in range(l + 1)) + " |\n")
        bm = r["attention"]["block_mass"]
        parts.append("\nAttention block mass per layer (mass inside the aligned block of 2^h "
                     "leaves; uniform = 2^h/N):\n\n| layer | " +
                     " | ".join(f"h={h}" for h in range(1, l)) + " |\n|" + "---|" * l + "\n")
        for i, row in enumerate(bm):
            parts.append(f"| {i + 1} | " + " | ".join(f"{x:.3f}" for x in row) + " |\n")
    l = out["config"]["l"]
    for key, title in (("all_positions", "trained on all positions"),
                       ("ends_only", "trained on the first and last position only")):
        if "probes" not in out:
            break
        parts.append(f"\n### Ancestor probes of the frozen MLM encoder ({title}; tested on all "
                     "positions)\n\nRows: stream after n blocks (0 = embeddings). Columns: "
                     "tree level of the ancestor (0 = root, l-1 = parent).\n\n| layer | " +
                     " | ".join(f"level {m}" for m in range(l)) + " |\n|" + "---|" * (l + 1)
                     + "\n")
        for i, row in enumerate(out["probes"][key]):
            parts.append(f"| {i} | " + " | ".join(f"{x:.3f}" for x in row) + " |\n")
    if "finetune" in out:
        ft = out["finetune"]
        parts.append(f"\n### Root classification from the MLM encoder vs scratch ({ft['steps']}"
                     " steps each; k = 0 test accuracy)\n\n| P | scratch | frozen | unfrozen |"
                     "\n|---|---|---|---|\n")
        acc = {(r["P"], r["mode"]): r["acc"] for r in ft["rows"]}
        for P in sorted({r["P"] for r in ft["rows"]}):
            parts.append(f"| {P} | " + " | ".join(f"{acc[P, m]:.4f}" if (P, m) in acc else "-"
                                                  for m in ("scratch", "frozen", "unfrozen"))
                         + " |\n")
    return "".join(parts)


def _bp_set_accuracy(grammar, run: dict, k_test: int, k_train: int, sample_trees) -> tuple:
    """(BP_k_train accuracy, BP_k_test accuracy) on the run's k_test evaluation set."""
    from tpcore.bp import belief_propagation, evidence_from_leaves

    n, l = run["n_eval"], run["l"]
    t = sample_trees(grammar, n, l, k_test, seed=10_000 + k_test)
    e = evidence_from_leaves(t.leaves, grammar.q)
    pos = np.random.default_rng(30_000).integers(0, 2**l, n)
    accs = []
    for k in (k_train, k_test):
        res = belief_propagation(grammar.M, grammar.p0, e, k)
        if run["task"] == "root":
            accs.append(float((res.root.argmax(1) == t.root).mean()))
        else:
            pred = res.cavity[np.arange(n), pos].argmax(1)
            accs.append(float((pred == t.leaves[np.arange(n), pos]).mean()))
    return tuple(accs)


# --------------------------------------------------------------------------------------------
# Mechanism: probes of frozen layers, pretraining then fine-tuning
# --------------------------------------------------------------------------------------------

def _probe_class():
    """A per-token 2-layer ReLU probe ``d -> hidden -> q`` (a Module, built lazily)."""
    from tpcore.nn import functional as F
    from tpcore.nn.layers import Linear
    from tpcore.nn.module import Module

    class AncestorProbe(Module):
        def __init__(self, d: int, hidden: int, q: int, rng, dtype):
            self.fc1 = Linear(d, hidden, rng, dtype)
            self.fc2 = Linear(hidden, q, rng, dtype)

        def forward(self, h, pad=None):
            z, self._relu = F.relu_forward(self.fc1.forward(h))
            return self.fc2.forward(z)

        def backward(self, dlogits):
            self.fc1.backward(F.relu_backward(self.fc2.backward(dlogits), self._relu))

    return AncestorProbe


def probe_ancestors(model, run: TreeRun, grammar, n_train: int = 2**13, n_test: int = 2000,
                    epochs: int = 10, hidden: int = 64, lr: float = 1e-3, batch: int = 128,
                    positions: str = "all", seed: int = 0) -> list[list[float]]:
    """Probe accuracy ``acc[layer][level]``: a per-token probe (weights shared across
    positions) on the frozen stream after ``layer`` blocks (0 = embeddings) predicts each
    token's ancestor at tree level ``level`` (0 = root .. l-1 = parent), on k = 0 data with
    unmasked inputs. ``positions="ends"`` trains on the first and last token only (tests on all).
    """
    from tpcore.backend import asarray, to_host
    from tpcore.backend import rng as make_rng
    from tpcore.nn.optim import Adam
    from tpcore.tasks.trees import sample_trees
    from tpcore.train import TrainConfig, fit, shuffled_batches, supervised_step

    l, q = run.l, grammar.q
    N = 2**l
    data = {}
    for name, n, s in (("train", n_train, 50_000 + seed), ("test", n_test, 60_000 + seed)):
        t = sample_trees(grammar, n, l, 0, seed=s, keep_levels=True)
        model.forward(asarray(t.leaves.astype(np.int64)))
        resid = [to_host(h) for h in model.cache["resid"]]
        labels = [t.levels[m][:, np.arange(N) >> (l - m)] for m in range(l)]
        data[name] = (resid, labels)
    Probe = _probe_class()
    acc = []
    for layer in range(l + 1):
        row = []
        for level in range(l):
            h_tr, y_tr = data["train"][0][layer], data["train"][1][level].astype(np.int64)
            keep = np.zeros(N, bool)
            keep[[0, N - 1] if positions == "ends" else slice(None)] = True
            probe = Probe(run.d_model, hidden, q, make_rng(seed), h_tr.dtype)
            batches = shuffled_batches(dict(tokens=h_tr, targets=y_tr,
                                            mask=np.broadcast_to(keep, y_tr.shape)), batch,
                                       seed=seed)
            fit(probe, Adam(probe.parameters(), lr=lr), batches, supervised_step,
                TrainConfig(steps=epochs * n_train // batch, seed=seed, quiet=True))
            h_te, y_te = data["test"][0][layer], data["test"][1][level]
            pred = to_host(probe.forward(asarray(h_te))).argmax(-1)
            row.append(float((pred == y_te).mean()))
        acc.append(row)
    return acc


def finetune_root(run: TreeRun, grammar, encoder_path: str | Path | None, mode: str,
                  P: int, steps: int, seed: int = 0) -> float:
    """Root classification (flatten readout) trained on P k = 0 samples, from scratch
    (``encoder_path=None``) or from a saved MLM encoder, ``mode`` ``"frozen"`` (only the
    readout trains) or ``"unfrozen"``; returns the accuracy on the k = 0 test set."""
    import dataclasses

    from tpcore.models import load
    from tpcore.nn.optim import Adam
    from tpcore.tasks.trees import sample_trees
    from tpcore.train import TrainConfig, fit, shuffled_batches, supervised_step

    root_run = dataclasses.replace(run, task="root", P=P, steps=steps)
    model = make_model(dataclasses.replace(root_run, task="mlm"), grammar.q, readout="flatten")
    if encoder_path is not None:
        state = load(encoder_path).state_dict()
        own = model.state_dict()
        model.load_state_dict({k: (v if not k.startswith("unembed") else own[k])
                               for k, v in state.items()})
    params = model.unembed.parameters() if mode == "frozen" else model.parameters()
    t = sample_trees(grammar, P, run.l, 0, seed=70_000 + P + seed)
    batches = shuffled_batches(dict(tokens=t.leaves.astype(np.int64),
                                    targets=t.root.astype(np.int64)), min(run.batch, P), seed)
    fit(model, Adam(params, lr=run.lr), batches, supervised_step,
        TrainConfig(steps=steps, seed=seed, quiet=True))
    te = sample_trees(grammar, run.n_eval, run.l, 0, seed=10_000)
    p = model_probs(model, root_run, te.leaves, None, grammar.q)
    return float((p.argmax(1) == te.root).mean())

"""Transformers trained on the tree grammar and compared with exact BP at checkpoints: the runs
of ``tpcore reproduce hierarchy`` (root classification and masked-leaf prediction).

A run can stop after a wall-clock budget and go on later (:func:`train_against_bp`'s ``hours``):
it stops at the first step (or checkpoint) after it and keeps its paused state
(:class:`tpcore.train.TrainState`: the parameters, Adam's moments, the steps done, the training
seconds and the checkpoint history so far) in the hidden folder ``.<name>.partial`` beside its
``save_to`` (:func:`tpcore.pipelines.learn_runs.paused_dir`), written as a unit with the run's
settings recorded (:class:`tpcore.rundir.RunDir`). The same run called again resumes from
there: its minibatches and masked positions continue where they stopped, the steps between two
checkpoints are seeded by the checkpoint they start from and counted from it, so the finished
run is the same, bit for bit, as one that never paused.

Host-side orchestration (NumPy directly for bookkeeping); the models run on the active backend
and train through :func:`tpcore.train.fit`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.backend import asarray, backend_name, to_host
from tpcore.bp import belief_propagation, evidence_from_leaves
from tpcore.errors import TpcoreError
from tpcore.experiments.tree_grammar import paper_grammar
from tpcore.io import read_text
from tpcore.models.transformer import Transformer, TransformerConfig
from tpcore.nn.module import save
from tpcore.nn.optim import Adam, Schedule, constant, cosine
from tpcore.pipelines.learn_runs import paused_dir
from tpcore.rundir import RECORD, RunDir, check_config, recorded_config
from tpcore.seeds import derive_seed
from tpcore.tasks.trees import Grammar, sample_trees, uniform_sequences
from tpcore.train import (
    Batch,
    StepContext,
    TrainConfig,
    TrainState,
    fit,
    shuffled_batches,
    supervised_step,
)
from tpcore.train_state import load_state, save_state

PAUSED_REMEDY = "remove that folder to train the run afresh"
"""What a refused paused state tells the user to do."""


@dataclass
class TreeRun:
    """One transformer run. ``task``: ``"root"`` (flatten readout, q classes) or ``"mlm"`` (one
    masked leaf per sequence, redrawn every batch, loss at that position; vocabulary q + 1).
    Encoder, post-LN, one head, sinusoidal positions, ReLU FFN, ``n_layers`` blocks (None
    becomes l, the paper's n_L = l); Adam with a fixed learning rate (``schedule="constant"``,
    the paper's) or a cosine decay to 0 over ``steps``. Checkpoints at ``checkpoints``
    log-spaced steps. ``dropout``: the probability with which training zeroes each entry of
    every sub-layer's output (:class:`~tpcore.models.transformer.TransformerConfig`'s dropout;
    the paper's code keeps PyTorch's default 0.1, which also drops attention weights, the FFN's
    hidden units and the embeddings); evaluation never drops.

    The run's ``__dict__`` is the settings its records, saved models and paused states carry."""

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
    n_layers: int | None = None
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.n_layers is None:
            self.n_layers = self.l
        if not 0 <= self.dropout < 1:
            raise TpcoreError(f"dropout {self.dropout!r}: expected a probability in [0, 1)")


def test_seed(seed: int, name: int | str) -> int:
    """The seed of the test set ``name`` (a k_test, ``"uniform"`` or ``"mask positions"``),
    shared by every run of ``seed`` and by the fine-tuning test."""
    return derive_seed(seed, "hierarchy", "test", name)


def make_model(run: TreeRun, q: int, readout: str | None = None) -> Transformer:
    """The standard transformer configured as in the paper (scaled by ``run``); MLM models
    have the extra mask token. ``readout`` overrides the task's (fine-tuning an MLM encoder)."""
    mlm = run.task == "mlm"
    return Transformer(TransformerConfig(
        vocab_size=q + 1 if mlm else q, max_len=2**run.l, n_classes=q, d_model=run.d_model,
        n_layers=run.n_layers, n_heads=1, d_mlp=run.d_mlp, layer_norm="post",
        positions="sinusoidal",
        readout=readout or ("token" if mlm else "flatten"), activation="relu",
        dropout=run.dropout, dtype="float32", seed=run.seed))


def mask_leaves(leaves: np.ndarray, pos: np.ndarray, q: int) -> dict[str, np.ndarray]:
    """MLM batch: ``leaves: (B, N)`` with leaf ``pos[b]`` of row b replaced by the mask token
    ``q``; targets are the leaves, the loss mask is true at the masked position only."""
    B = len(leaves)
    tokens = leaves.astype(np.int64)
    tokens[np.arange(B), pos] = q
    mask = np.zeros(leaves.shape, bool)
    mask[np.arange(B), pos] = True
    return dict(tokens=tokens, targets=leaves.astype(np.int64), mask=mask)


def mlm_batches(leaves: np.ndarray, q: int, batch: int, seed: int,
                start: int = 0) -> Iterator[Batch]:
    """Endless shuffled MLM batches of ``leaves: (P, N)``, one uniformly drawn leaf masked per
    sequence; ``start``: begin with batch ``start`` of that sequence, as a resumed run does (the
    masked positions of the batches before it are drawn, not used)."""
    gen = np.random.default_rng(derive_seed(seed, "hierarchy", "masked leaves"))
    for _ in range(start):
        gen.integers(0, leaves.shape[1], min(batch, len(leaves)))
    for b in shuffled_batches({"leaves": leaves}, batch, device=False, start=start,
                              seed=derive_seed(seed, "hierarchy", "batches")):
        x = b["leaves"]
        yield {k: asarray(v) for k, v in mask_leaves(x, gen.integers(0, x.shape[1], len(x)),
                                                      q).items()}


def model_probs(model: Transformer, run: TreeRun, leaves: np.ndarray, pos: np.ndarray | None,
                q: int, batch: int = 256) -> np.ndarray:
    """Model probabilities ``(n, q)``: of the root, or of leaf ``pos[n]`` masked (MLM), in
    batches of ``batch`` sequences (small enough that a layer's activations stay in cache: at
    the paper's width, FFN 2048, batches of 2,000 took twice as long)."""
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


def compare_probs(p_bp: np.ndarray, p_model: np.ndarray) -> dict[str, float]:
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


def eval_sets(grammar: Grammar, run: TreeRun) -> dict[str, dict[str, Any]]:
    """Test inputs (k_test = 0..l and ``uniform``) with truths, mask positions and the BP_k
    marginals of every k for each: ``{name: dict(leaves, truth, pos, bp={k: (n, q)})}``."""
    l, q, n = run.l, grammar.q, run.n_eval
    sets = {}
    pos = np.random.default_rng(test_seed(run.seed, "mask positions")).integers(0, 2**l, n)
    for name in [*range(l + 1), "uniform"]:
        if name == "uniform":
            leaves, root = uniform_sequences(n, l, q, seed=test_seed(run.seed, name)), None
        else:
            t = sample_trees(grammar, n, l, name, seed=test_seed(run.seed, name))
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


def bp_set_accuracies(sets: dict[str, dict[str, Any]], k_train: int) -> dict[str, list[float]]:
    """Per k_test, the accuracy of BP_k_train (the model's target: the paper's dashed lines)
    and of BP_k_test (optimal) on that test set: ``{str(k_test): [acc, acc]}``."""
    return {name: [float((s["bp"][k].argmax(1) == s["truth"]).mean())
                   for k in (k_train, int(name))]
            for name, s in sets.items() if s["truth"] is not None}


def checkpoint_metrics(model: Transformer, run: TreeRun, sets: dict[str, dict[str, Any]],
                       q: int) -> dict[str, dict[str, Any]]:
    """Accuracy on every test set, and KL / agreement / Spearman against every BP_k."""
    out = {}
    for name, s in sets.items():
        p = model_probs(model, run, s["leaves"], s["pos"], q)
        m: dict[str, Any] = {f"bp{k}": compare_probs(pb, p) for k, pb in s["bp"].items()}
        if s["truth"] is not None:
            m["acc"] = float((p.argmax(1) == s["truth"]).mean())
        out[name] = m
    return out


def attention_summary(model: Transformer, run: TreeRun, leaves: np.ndarray,
                      q: int) -> dict[str, list]:
    """Average attention map per layer over ``leaves`` (for MLM runs with one random leaf
    masked, as in training; root classifiers see the unmasked leaves) and
    the block-mass score ``score[layer][h-1]`` = mean over rows i of the attention mass inside
    i's aligned block of 2**h leaves (uniform attention gives 2**h / N). The maps are rounded
    to 4 decimals in float64, so that they are written as short decimals."""
    gen = np.random.default_rng(derive_seed(run.seed, "hierarchy", "attention positions"))
    model_probs(model, run, leaves, gen.integers(0, 2**run.l, len(leaves)), q,
                batch=len(leaves))
    maps = [to_host(a)[:, 0].mean(axis=0) for a in model.cache["attn"]]
    i = np.arange(2**run.l)
    score = [[float(np.where((i[None, :] >> h) == (i[:, None] >> h), A, 0).sum(axis=1).mean())
              for h in range(1, run.l)] for A in maps]
    return dict(maps=[m.astype(np.float64).round(4).tolist() for m in maps], block_mass=score)


def closest_bp(m: dict[str, Any]) -> int:
    """The k whose BP_k is closest to the model (least KL) in checkpoint metrics ``m``."""
    return int(np.argmin([m[f"bp{k}"]["kl"] for k in range(sum(x.startswith("bp")
                                                                    for x in m))]))


def _dropout_step(model: Transformer, batch: Batch, ctx: StepContext) -> Any:
    """The cross-entropy step with the step's generator for dropout (none drawn at 0)."""
    return supervised_step(model, batch, ctx, rng=ctx.rng)


def _from_step(schedule: Schedule, start: int) -> Schedule:
    """``schedule`` seen from step ``start`` on (``fit`` counts steps from 0 in each call)."""
    return lambda step: schedule(start + step)


def paused_settings(run: TreeRun, grammar: Grammar) -> dict[str, Any]:
    """What a paused state of ``run`` records and must match to be resumed: the run's settings,
    the grammar (SHA-256 of ``M`` and ``p0`` as float64) and the backend (its arithmetic, and
    the step noise of :func:`tpcore.counter_rng.step_rng`, differ between backends)."""
    digest = hashlib.sha256(np.asarray(grammar.M, np.float64).tobytes()
                            + np.asarray(grammar.p0, np.float64).tobytes()).hexdigest()
    return dict(run=dict(run.__dict__), grammar=digest[:16], backend=backend_name())


def paused_state(where: Path, settings: dict[str, Any]) -> TrainState | None:
    """The paused state kept in the folder ``where`` (None: no folder); one recorded with other
    ``settings`` is refused in one line naming its record and the settings that differ."""
    if not where.exists():
        return None
    rec = where / RECORD
    what = f"the paused run {rec}"
    recorded = (recorded_config(json.loads(read_text(rec, "paused-run record")), what,
                                PAUSED_REMEDY) if rec.is_file() else None)
    check_config(recorded, settings, what, PAUSED_REMEDY)
    return load_state(where)


def _pause(run: TreeRun, where: Path, settings: dict[str, Any], model: Transformer, opt: Adam,
           history: list[dict[str, Any]], last_loss: float, seconds: float,
           step: int) -> dict[str, Any]:
    """Keep the paused state of ``run`` at ``step`` in ``where`` (written as a unit with its
    ``settings``) and return the paused record."""
    with RunDir(where, settings, overwrite=True).build() as tmp:
        save_state(TrainState(step=step, params=model.state_dict(), optimizer=opt.state_dict(),
                              backend=backend_name(), history=history, last_loss=last_loss,
                              seconds=seconds), tmp)
    return dict(run=run.__dict__, paused=dict(step=step, steps=run.steps, state=str(where)))


def train_against_bp(run: TreeRun, grammar: Grammar | None = None,
                     log: Callable[[str], None] = print,
                     save_to: str | Path | None = None,
                     hours: float | None = None) -> dict[str, Any]:
    """Train one transformer and compare it with exact BP at log-spaced checkpoints; the
    final model is saved to ``save_to`` (``.npz`` + ``.json``) when given. Returns the run's
    record: its settings, the checkpoint history, BP's accuracies on its test sets
    (:func:`bp_set_accuracies`), timings and the attention summary.

    ``hours`` (needs ``save_to``): stop at the first step (or checkpoint, whose metrics are
    taken first) that ends after ``hours`` of wall-clock time in this call (0: after one step,
    or at the first checkpoint if that comes first) and keep the paused state
    in :func:`~tpcore.pipelines.learn_runs.paused_dir` of ``save_to`` (see the module
    docstring); the record is then ``dict(run=..., paused=dict(step=steps done, steps=the run's,
    state=that folder))``. A paused state of this run there (:func:`paused_settings`) is resumed
    from, whatever ``hours``, and removed when the run finishes; one of other settings is
    refused before any training."""
    began = time.monotonic()
    if run.task not in ("root", "mlm"):
        raise TpcoreError(f"task {run.task!r} unknown; expected 'root' or 'mlm'")
    if hours is not None and (save_to is None or not hours >= 0):
        raise TpcoreError(f"hours {hours!r} with save_to {save_to!r}: expected a number >= 0 "
                          "and a save_to beside which to keep the paused state")
    g = paper_grammar() if grammar is None else grammar
    q = g.q
    where = None if save_to is None else paused_dir(save_to)
    settings = paused_settings(run, g)
    state = None if where is None else paused_state(where, settings)
    done = 0 if state is None else state.step
    train = sample_trees(g, run.P, run.l, run.k_train,
                         seed=derive_seed(run.seed, "hierarchy", "train", run.k_train))

    def batches_from(step: int) -> Iterator[Batch]:
        """The run's minibatches from its step ``step`` on."""
        if run.task == "mlm":
            return mlm_batches(train.leaves, q, run.batch, run.seed, start=step)
        return shuffled_batches(dict(tokens=train.leaves.astype(np.int64),
                                     targets=train.root.astype(np.int64)), run.batch,
                                seed=derive_seed(run.seed, "hierarchy", "batches"), start=step)

    sets = eval_sets(g, run)
    model = make_model(run, q)
    opt = Adam(model.parameters(), lr=run.lr)
    schedule = cosine(run.lr, run.steps) if run.schedule == "cosine" else constant(run.lr)
    marks = np.unique(np.geomspace(max(1, run.steps // 100), run.steps, run.checkpoints)
                      .round().astype(int))
    history, seconds, resume = [], 0.0, None
    start = int(max(m for m in (0, *marks) if m <= done))  # the checkpoint the steps go on from
    if state is not None:
        if not 0 < done < run.steps:
            raise TpcoreError(f"{where}: paused at step {done}, outside this run's 1.."
                              f"{run.steps - 1}; {PAUSED_REMEDY}")
        history, seconds = list(state.history), state.seconds
        resume = TrainState(step=done - start, params=state.params, optimizer=state.optimizer,
                            backend=state.backend, last_loss=state.last_loss)
        log(f"[{run.task} k_train={run.k_train}] resuming at step {done} from {where}")
    for mark in marks[marks > done]:
        left = None if hours is None else max(0.0, 3600 * hours - (time.monotonic() - began))
        res = fit(model, opt, lambda k, s=start: batches_from(s + k), _dropout_step,
                  TrainConfig(steps=int(mark - start), quiet=True,
                              seed=derive_seed(run.seed, "hierarchy", "steps from", start),
                              lr_schedule=_from_step(schedule, start),
                              pause_after_seconds=left), resume=resume)
        seconds, resume = seconds + res.seconds, None
        if res.paused is not None:
            done = start + res.paused.step
            return _pause(run, where, settings, model, opt, history, res.last_loss, seconds,
                          done)
        done = start = int(mark)
        metrics = checkpoint_metrics(model, run, sets, q)
        history.append(dict(step=done, epoch=done * run.batch / run.P, train_seconds=seconds,
                            loss=res.last_loss, **metrics))
        k = str(run.k_train)
        log(f"[{run.task} k_train={run.k_train}] step {done} ({seconds:.0f}s) loss "
            f"{res.last_loss:.4f} acc(k_test=k_train) {metrics[k]['acc']:.4f} acc(k_test=0) "
            f"{metrics['0']['acc']:.4f} argmin_k KL {closest_bp(metrics[k])}")
        if (hours is not None and where is not None and done < run.steps
                and time.monotonic() - began >= 3600 * hours):
            return _pause(run, where, settings, model, opt, history, res.last_loss, seconds,
                          done)
    record = dict(run=run.__dict__, history=history, bp_acc=bp_set_accuracies(sets, run.k_train),
                  train_seconds=seconds, seconds_per_step=seconds / run.steps,
                  n_parameters=model.n_parameters(),
                  attention=attention_summary(model, run, sets[str(run.k_train)]["leaves"][:2000],
                                              q))
    if save_to is not None:
        save(model, save_to, {"run": run.__dict__})
    if where is not None and where.exists():
        shutil.rmtree(where)
    return record

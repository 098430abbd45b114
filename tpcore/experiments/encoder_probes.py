"""What a tree-trained transformer holds: probes of its frozen layers for every ancestor level
(of the MLM encoder, and of the last layer of each k_train's root classifier), and root
classification fine-tuned from the MLM encoder (the ``probe``, ``probe-k`` and ``finetune``
parts of ``tpcore reproduce hierarchy``).

Host-side orchestration; the models run on the active backend and train through
:func:`tpcore.train.fit`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.backend import asarray, to_host
from tpcore.backend import rng as make_rng
from tpcore.experiments.against_bp import TreeRun, make_model, model_probs, test_seed
from tpcore.models import load
from tpcore.nn import functional as F
from tpcore.nn.layers import Linear
from tpcore.nn.module import Module
from tpcore.nn.optim import Adam
from tpcore.seeds import derive_seed
from tpcore.tasks.trees import Grammar, sample_trees
from tpcore.train import TrainConfig, fit, shuffled_batches, supervised_step


class AncestorProbe(Module):
    """A per-token 2-layer ReLU probe ``d -> hidden -> q``: ``h: (B, N, d)`` -> logits
    ``(B, N, q)``, weights shared across positions."""

    def __init__(self, d: int, hidden: int, q: int, rng: Any, dtype: Any):
        self.fc1 = Linear(d, hidden, rng, dtype)
        self.fc2 = Linear(hidden, q, rng, dtype)

    def forward(self, h: Any, pad: Any = None) -> Any:
        z, self._relu = F.relu_forward(self.fc1.forward(h))
        return self.fc2.forward(z)

    def backward(self, dlogits: Any) -> None:
        self.fc1.backward(F.relu_backward(self.fc2.backward(dlogits), self._relu))


def probe_ancestors(model: Module, run: TreeRun, grammar: Grammar, n_train: int = 2**13,
                    n_test: int = 2000, epochs: int = 10, hidden: int = 64, lr: float = 1e-3,
                    batch: int = 128, positions: str = "all", seed: int = 0,
                    layers: Sequence[int] | None = None) -> list[list[float]]:
    """Probe accuracy ``acc[i][level]``: a per-token probe (weights shared across positions)
    on the frozen stream after ``layers[i]`` blocks (0 = embeddings; default every stream,
    0..the model's blocks) predicts each token's ancestor at tree level ``level`` (0 = root ..
    l-1 = parent), on k = 0 data with unmasked inputs. ``positions="ends"`` trains on the first
    and last token only (tests on all). The model may be an MLM encoder or a root classifier.
    """
    l, q = run.l, grammar.q
    N = 2**l
    data = {}
    for name, n in (("train", n_train), ("test", n_test)):
        t = sample_trees(grammar, n, l, 0, seed=derive_seed(seed, "probes", name),
                         keep_levels=True)
        model.forward(asarray(t.leaves.astype(np.int64)))
        resid = [to_host(h) for h in model.cache["resid"]]
        labels = [t.levels[m][:, np.arange(N) >> (l - m)] for m in range(l)]
        data[name] = (resid, labels)
    fit_seed = derive_seed(seed, "probes", "fit")
    acc = []
    for layer in range(len(data["train"][0])) if layers is None else layers:
        row = []
        for level in range(l):
            h_tr, y_tr = data["train"][0][layer], data["train"][1][level].astype(np.int64)
            keep = np.zeros(N, bool)
            keep[[0, N - 1] if positions == "ends" else slice(None)] = True
            probe = AncestorProbe(run.d_model, hidden, q, make_rng(fit_seed), h_tr.dtype)
            batches = shuffled_batches(dict(tokens=h_tr, targets=y_tr,
                                            mask=np.broadcast_to(keep, y_tr.shape)), batch,
                                       seed=fit_seed)
            fit(probe, Adam(probe.parameters(), lr=lr), batches, supervised_step,
                TrainConfig(steps=epochs * n_train // batch, seed=fit_seed, quiet=True))
            h_te, y_te = data["test"][0][layer], data["test"][1][level]
            pred = to_host(probe.forward(asarray(h_te))).argmax(-1)
            row.append(float((pred == y_te).mean()))
        acc.append(row)
    return acc


def finetune_root(run: TreeRun, grammar: Grammar, encoder_path: str | Path | None, mode: str,
                  P: int, steps: int, seed: int = 0) -> float:
    """Root classification (flatten readout) trained on P k = 0 samples, from scratch
    (``encoder_path=None``) or from a saved MLM encoder, ``mode`` ``"frozen"`` (only the
    readout trains) or ``"unfrozen"``; returns the accuracy on the k = 0 test set of the
    transformer runs."""
    root_run = dataclasses.replace(run, task="root", P=P, steps=steps)
    model = make_model(dataclasses.replace(root_run, task="mlm"), grammar.q, readout="flatten")
    if encoder_path is not None:
        state = load(encoder_path).state_dict()
        own = model.state_dict()
        model.load_state_dict({k: (v if not k.startswith("unembed") else own[k])
                               for k, v in state.items()})
    params = model.unembed.parameters() if mode == "frozen" else model.parameters()
    t = sample_trees(grammar, P, run.l, 0, seed=derive_seed(seed, "finetune", "train", P))
    fit_seed = derive_seed(seed, "finetune", "fit")
    batches = shuffled_batches(dict(tokens=t.leaves.astype(np.int64),
                                    targets=t.root.astype(np.int64)), min(run.batch, P),
                               fit_seed)
    fit(model, Adam(params, lr=run.lr), batches, supervised_step,
        TrainConfig(steps=steps, seed=fit_seed, quiet=True))
    te = sample_trees(grammar, run.n_eval, run.l, 0, seed=test_seed(seed, 0))
    p = model_probs(model, root_run, te.leaves, None, grammar.q)
    return float((p.argmax(1) == te.root).mean())

"""Training-step speed of the Transformer Program model (forward + backward + Adam, float32),
side by side with the authors' PyTorch implementation.

The paper's RASP configuration: k = 8 (vocabulary 8, length 8), batch 512, 4 categorical + 4
numerical heads and 2 categorical + 2 numerical MLPs per layer, d_mlp 64, Gumbel-softmax
samples, Adam; 2 and 3 layers. Target: tpcore's step at least 4x faster than the authors'.

The anchor is the authors' code ("Learning Transformer Programs", princeton-nlp/
TransformerPrograms, ``src/models/programs.py``), which this repository does not ship: set
``TPCORE_AUTHORS_CODE`` to a checkout of it (the folder holding ``src/``; it needs ``torch`` and
``einops``) and the comparison runs that code (its model and its training step's loss, with
``run.py``'s settings); without it those rows are skipped. Each comparison calls the two steps
alternately on the same number of threads (``bench/sidebyside.py``); the ratios tpcore /
authors are in each row's ``extra_info``.

Run: ``TPCORE_AUTHORS_CODE=PATH pytest bench/bench_program_model.py --benchmark-enable``
"""

import os
import sys
from typing import Any

import numpy as np
import pytest
from sidebyside import compare, threads, training_step

from tpcore.cpu import blas_threads
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.nn.optim import Adam
from tpcore.pipelines.learn import program_step

AUTHORS_VARIABLE = "TPCORE_AUTHORS_CODE"


def train_step(model: Any, batch: dict, lr: float, tau: float = 1.0):
    """A zero-argument training step (forward, backward, Adam) on a fixed batch at Gumbel
    temperature ``tau``, with one BLAS thread; its optimiser is ``step.optimizer``. Shared with
    ``bench_counting.py`` and ``bench_training.py``."""
    blas_threads(1)
    return training_step(model, Adam(model.parameters(), lr=lr), program_step, batch, tau)


def rasp_batch(b=512, n=8, v=8):
    gen = np.random.default_rng(0)
    return {"tokens": gen.integers(1, v, (b, n)), "targets": gen.integers(1, v, (b, n)),
            "mask": np.ones((b, n), bool), "pad": np.zeros((b, n), bool)}


def make_step(n_layers: int, b: int = 512, n: int = 8):
    cfg = ProgramConfig(vocab_size=8, max_len=n, n_classes=8, n_layers=n_layers, n_cat_heads=4,
                        n_num_heads=4, n_cat_mlps=2, n_num_mlps=2, d_mlp=64)
    return train_step(ProgramModel(cfg), rasp_batch(b, n), lr=0.05)


def authors_step(n_layers: int, b: int = 512, n: int = 8, temp: float = 1.0,
                 tokens: np.ndarray | None = None, targets: np.ndarray | None = None,
                 device: str = "cpu"):
    """The authors' model at the same configuration and their training step (per-token loss,
    Adam at lr 0.05, Gumbel-softmax samples at temperature ``temp``) on ``tokens`` and
    ``targets`` (their convention: target 0 carries no loss; default: random ones), on
    ``device`` (on CUDA the step waits for the device before returning)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("einops")
    root = os.environ.get(AUTHORS_VARIABLE)
    if not root or not os.path.isfile(os.path.join(root, "src", "models", "programs.py")):
        pytest.skip(f"{AUTHORS_VARIABLE} does not name a checkout of the authors' code")
    if root not in sys.path:
        sys.path.insert(0, root)
    from src.models.programs import TransformerProgramModel, gumbel_soft

    torch.manual_seed(0)
    model = TransformerProgramModel(
        d_vocab=8, d_vocab_out=8, n_vars_cat=1, n_vars_num=1, d_var=max(8, n), n_heads_cat=4,
        n_heads_num=4, d_mlp=64, n_cat_mlps=2, n_num_mlps=2, mlp_vars_in=2, n_layers=n_layers,
        n_ctx=n, sample_fn=gumbel_soft, attention_type="cat", rel_pos_bias="fixed",
        one_hot_embed=True, count_only=True, selector_width=0).to(device)
    model.set_temp(temp)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.05)
    data = rasp_batch(b, n)
    x = torch.as_tensor(data["tokens"] if tokens is None else tokens, device=device)
    y = torch.as_tensor(data["targets"] if targets is None else targets, device=device)
    wait = torch.cuda.synchronize if device != "cpu" else (lambda: None)

    def step():
        opt.zero_grad()
        m = (x != 0).float()
        mask = (m.unsqueeze(-1) @ m.unsqueeze(-2)).bool()
        log_probs = model(x, mask=mask).log_softmax(-1)
        losses = -log_probs.gather(2, y.unsqueeze(-1)).squeeze(-1).masked_fill(y == 0, 0.0)
        loss = (losses.sum(-1) / (y != 0).sum(-1)).mean()
        loss.backward()
        opt.step()
        wait()

    return step


@pytest.mark.parametrize("n_layers", [2, 3])
def test_program_train_step(benchmark, n_layers):
    step = make_step(n_layers)
    with threads(1):
        step()
        loss = benchmark(step)
    assert np.isfinite(float(loss))


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("n_layers", [2, 3])
def test_program_step_vs_authors(benchmark, n_layers, n_threads):
    """tpcore and the authors' code alternately; target: ratio <= 0.25."""
    compare(benchmark, {"tpcore": make_step(n_layers), "authors": authors_step(n_layers)},
            n_threads, rounds=5)

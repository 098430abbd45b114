"""Training-step speed of the Transformer Program model (forward + backward + Adam, float32).

The paper's RASP configuration: k = 8 (vocabulary 8, length 8), batch 512, 4 categorical + 4
numerical heads and 2 categorical + 2 numerical MLPs per layer, d_mlp 64, 2 and 3 layers.
The authors' PyTorch implementation takes about 70 ms (2 layers) and 125 ms (3 layers) per step
on these machines; targets: <= 25 ms and <= 40 ms. OpenBLAS runs single-threaded as in
training (:func:`tpcore.train.limit_threads`). The cores are shared with other jobs, so
absolute timings are noisy.

Run: ``pytest bench/bench_program_model.py --benchmark-enable``
"""

from typing import Any

import numpy as np
import pytest

from tpcore.backend import blas_threads
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.nn.optim import Adam
from tpcore.pipelines.learn import program_step
from tpcore.train import StepContext


def train_step(model: Any, batch: dict, lr: float):
    """A zero-argument training step (forward, backward, Adam) on a fixed batch, with one BLAS
    thread; shared with ``bench_counting.py``."""
    blas_threads(1)
    opt = Adam(model.parameters(), lr=lr)
    ctx = StepContext(0, 1.0, np.random.default_rng(0))

    def step():
        opt.zero_grad()
        loss = program_step(model, batch, ctx)
        opt.step()
        return loss

    return step


def make_step(n_layers: int):
    cfg = ProgramConfig(vocab_size=8, max_len=8, n_classes=8, n_layers=n_layers, n_cat_heads=4,
                        n_num_heads=4, n_cat_mlps=2, n_num_mlps=2, d_mlp=64)
    gen = np.random.default_rng(0)
    batch = {"tokens": gen.integers(0, 8, (512, 8)), "targets": gen.integers(0, 8, (512, 8)),
             "mask": np.ones((512, 8), bool), "pad": np.zeros((512, 8), bool)}
    return train_step(ProgramModel(cfg), batch, lr=0.05)


@pytest.mark.parametrize("n_layers", [2, 3])
def test_program_train_step(benchmark, n_layers):
    step = make_step(n_layers)
    step()
    loss = benchmark(step)
    assert np.isfinite(loss)

"""The shared training loop: selection, early stopping, checkpoints, divergence, schedules."""

import itertools

import numpy as np
import pytest

from tpcore.backend import blas_threads
from tpcore.errors import TpcoreError, TrainingDiverged
from tpcore.models import load
from tpcore.nn.module import Module, Parameter
from tpcore.nn.optim import SGD, constant
from tpcore.train import TrainConfig, fit, shuffled_batches


class Scalar(Module):
    def __init__(self):
        self.w = Parameter(np.zeros(1))


def _step(model, batch, ctx):
    """Loss (w - target)^2 with the target carried by the batch."""
    diff = model.w.data - batch["target"]
    model.w.accumulate(2 * diff)
    return float(diff[0] ** 2)


def _batches(target):
    return itertools.repeat({"target": np.array([target])})


def test_nan_loss_names_step_and_last_finite_loss():
    def step(model, batch, ctx):
        return float("nan") if ctx.step == 3 else 1.5

    with pytest.raises(TrainingDiverged, match="step 3; last finite loss 1.5 at step 2"):
        fit(Scalar(), SGD(Scalar().parameters(), lr=0.1), _batches(0.0), step,
            TrainConfig(steps=10, quiet=True))


def test_selection_restores_best_and_early_stops():
    model = Scalar()
    scores = iter([1.0, 3.0, 2.0, 2.5, 0.0, 9.0])
    seen = []

    def evaluate(m):
        seen.append(float(m.w.data[0]))
        return {"score": next(scores)}

    result = fit(model, SGD(model.parameters(), lr=0.1), _batches(1.0), _step,
                 TrainConfig(steps=60, eval_every=10, select="score", patience=2, quiet=True),
                 evaluate)
    assert result.stopped_early and result.steps == 40
    assert result.best["score"] == 3.0 and model.w.data[0] == seen[1]


def test_selection_prefers_the_latest_of_equal_scores():
    model = Scalar()
    scores = iter([1.0, 1.0, 0.5])
    weights = []

    def evaluate(m):
        weights.append(float(m.w.data[0]))
        return {"score": next(scores)}

    result = fit(model, SGD(model.parameters(), lr=0.1), _batches(1.0), _step,
                 TrainConfig(steps=30, eval_every=10, select="score", patience=2, quiet=True),
                 evaluate)
    assert result.stopped_early and model.w.data[0] == weights[1]


def test_schedules_reach_the_step(tmp_path):
    model = Scalar()
    taus, lrs = [], []

    def step(m, batch, ctx):
        taus.append(ctx.tau)
        return _step(m, batch, ctx)

    opt = SGD(model.parameters(), lr=1.0)

    def evaluate(m):
        lrs.append(opt.lr)
        return {"neg_loss": -float((m.w.data[0] - 1) ** 2)}

    fit(model, opt, _batches(1.0), step,
        TrainConfig(steps=5, tau=(2.0, 0.5), lr_schedule=constant(0.25), select="neg_loss",
                    checkpoint=tmp_path / "best", quiet=True), evaluate)
    assert np.isclose(taus[0], 2.0) and np.isclose(taus[-1], 0.5) and lrs == [0.25]
    assert (tmp_path / "best.npz").exists() and (tmp_path / "best.json").exists()


def test_shuffled_batches_cover_each_epoch():
    data = {"x": np.arange(10)}
    it = shuffled_batches(data, 5, seed=0)
    first = np.concatenate([next(it)["x"] for _ in range(2)])
    assert sorted(first.tolist()) == list(range(10))


def test_checkpoint_loads_back(tmp_path):
    from tpcore.models.transformer import Transformer, TransformerConfig
    from tpcore.train import evaluate_supervised, supervised_step

    x = np.random.default_rng(0).integers(0, 4, (64, 4))
    data = {"tokens": x, "targets": x}
    model = Transformer(TransformerConfig(vocab_size=4, max_len=4, d_model=8, n_heads=2))
    fit(model, SGD(model.parameters(), lr=0.1), shuffled_batches(data, 16), supervised_step,
        TrainConfig(steps=3, select="acc", checkpoint=tmp_path / "m", quiet=True),
        lambda m: evaluate_supervised(m, data))
    assert isinstance(load(tmp_path / "m"), Transformer)


def _blas_count():
    """The current OpenBLAS thread count (None where NumPy has no OpenBLAS)."""
    before = blas_threads(1)
    if before is not None:
        blas_threads(before)
    return before


@pytest.mark.parametrize("env, option, expected", [("", None, 1), ("3", None, 3), ("3", 2, 2)])
def test_training_runs_on_the_thread_setting_and_restores_the_count(monkeypatch, env, option,
                                                                      expected):
    if _blas_count() is None:
        pytest.skip("NumPy has no OpenBLAS here")
    monkeypatch.setenv("TPCORE_THREADS", env)
    before = blas_threads(4)
    seen = []

    def step(model, batch, ctx):
        seen.append(_blas_count())
        return _step(model, batch, ctx)

    try:
        model = Scalar()
        fit(model, SGD(model.parameters(), lr=0.1), _batches(1.0), step,
            TrainConfig(steps=3, quiet=True, threads=option))
        assert seen == [expected] * 3 and _blas_count() == 4
    finally:
        blas_threads(before)


@pytest.mark.parametrize("env", ["0", "two", "-1"])
def test_a_bad_thread_setting_is_refused(monkeypatch, env):
    monkeypatch.setenv("TPCORE_THREADS", env)
    model = Scalar()
    with pytest.raises(TpcoreError, match="TPCORE_THREADS"):
        fit(model, SGD(model.parameters(), lr=0.1), _batches(1.0), _step,
            TrainConfig(steps=1, quiet=True))

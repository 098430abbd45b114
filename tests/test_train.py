"""The shared training loop: selection, early stopping, checkpoints, divergence, schedules."""

import itertools
import json
import os

import numpy as np
import pytest

from tpcore.backend import backend_name, to_host
from tpcore.counter_rng import step_rng
from tpcore.cpu import blas_threads
from tpcore.errors import TpcoreError, TrainingDiverged
from tpcore.models import load
from tpcore.nn.module import Module, Parameter
from tpcore.nn.optim import SGD, Adam, constant
from tpcore.train import (
    TrainConfig,
    evaluate_supervised,
    fit,
    progress,
    shuffled_batches,
    supervised_step,
)
from tpcore.train_state import load_state, save_state


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
    with pytest.raises(TrainingDiverged, match="step 0; no finite loss before it"):
        fit(Scalar(), SGD(Scalar().parameters(), lr=0.1), _batches(0.0),
            lambda m, b, ctx: float("nan"), TrainConfig(steps=10, quiet=True))


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
    first = np.concatenate([to_host(next(it)["x"]) for _ in range(2)])
    assert sorted(first.tolist()) == list(range(10))


@pytest.mark.parametrize("start", [0, 1, 2, 5, 7])
def test_shuffled_batches_start_where_the_sequence_is(start):
    data = {"x": np.arange(11)}
    whole = itertools.islice(shuffled_batches(data, 4, seed=3), start, start + 8)
    assert all(np.array_equal(to_host(a["x"]), to_host(b["x"])) for a, b in
               zip(whole, shuffled_batches(data, 4, seed=3, start=start)))
    assert len(next(shuffled_batches(data, 4, seed=3, start=start))["x"]) == 4


def _dropout_run(pauses, tmp_path, callable_batches=True, graphs=None):
    """Train a tiny dropout Transformer (the noise generator matters) with Adam, a temperature
    schedule and selection on accuracy for 14 steps, pausing at each of ``pauses`` (the state
    saved to disk, then resumed into a fresh model and optimiser); ``graphs``: as
    :attr:`TrainConfig.cuda_graphs`. Returns the final model, the result and the temperatures the
    steps saw (what the step function was called with: in a captured run, twice a session)."""
    from tpcore.models.transformer import Transformer, TransformerConfig

    x = np.random.default_rng(0).integers(0, 5, (40, 6))
    data = {"tokens": x, "targets": np.sort(x, axis=1)}
    taus = []

    def step(m, batch, ctx):
        taus.append(ctx.tau)
        return supervised_step(m, batch, ctx, rng=ctx.rng)

    def batches():
        if callable_batches:
            return lambda start: shuffled_batches(data, 8, seed=1, start=start)
        return shuffled_batches(data, 8, seed=1)

    state = None
    for pause in [*pauses, None]:
        model = Transformer(TransformerConfig(vocab_size=5, max_len=6, d_model=8, n_heads=2,
                                              d_mlp=16, dropout=0.2, seed=4))
        config = TrainConfig(steps=14, tau=(2.0, 0.1), eval_every=3, select="acc", seed=2,
                             quiet=True, pause_at=pause, cuda_graphs=graphs)
        result = fit(model, Adam(model.parameters(), lr=0.05), batches(), step, config,
                     lambda m: evaluate_supervised(m, data), resume=state)
        if pause is not None:
            assert result.steps == pause and result.paused.step == pause
            save_state(result.paused, tmp_path)
            state = load_state(tmp_path)
    assert result.paused is None
    return model, result, taus


@pytest.mark.parametrize("graphs", [False, None], ids=["eager", "captured"])
@pytest.mark.parametrize("pauses", [(6,), (4, 5, 11), (13,)])
def test_a_paused_and_resumed_run_equals_one_that_never_paused(tmp_path, pauses, graphs):
    if graphs is None and backend_name() != "cupy":
        pytest.skip("steps are captured as CUDA graphs on the cupy backend only")
    model, result, taus = _dropout_run((), tmp_path / "none", graphs=graphs)
    (tmp_path / "p").mkdir()
    again, resumed, taus_again = _dropout_run(pauses, tmp_path / "p", graphs=graphs)
    if graphs is False:
        assert taus_again == taus and len(taus) == 14
    else:
        assert result.cuda_graphs == "captured"
    assert resumed.history == result.history and resumed.best == result.best
    assert resumed.steps == 14 and len(result.history) == 5
    for (name, a), b in zip(model.state_dict().items(), again.state_dict().values()):
        assert np.array_equal(a, b), name
    # each session's first step is not timed; the tenths of the whole run add up over sessions
    assert result.tenth_steps == [1, 1, 2, 1, 1, 2, 1, 2, 1, 1]
    assert sum(resumed.tenth_steps) == 14 - 1 - len(pauses)
    assert all(t is None or t > 0 for t in resumed.ms_per_step_by_tenth())


def test_a_run_paused_on_time_resumes_to_the_same_end(tmp_path):
    """``pause_after_seconds=0``: each call trains one step (its evaluation included) and
    pauses; resumed call by call, the run ends as one that never paused."""
    from tpcore.models.transformer import Transformer, TransformerConfig

    model, result, _ = _dropout_run((), tmp_path)
    x = np.random.default_rng(0).integers(0, 5, (40, 6))
    data = {"tokens": x, "targets": np.sort(x, axis=1)}
    state, calls = None, 0
    while True:
        again = Transformer(TransformerConfig(vocab_size=5, max_len=6, d_model=8, n_heads=2,
                                              d_mlp=16, dropout=0.2, seed=4))
        config = TrainConfig(steps=14, tau=(2.0, 0.1), eval_every=3, select="acc", seed=2,
                             quiet=True, pause_after_seconds=0.0, cuda_graphs=False)
        resumed = fit(again, Adam(again.parameters(), lr=0.05),
                      lambda start: shuffled_batches(data, 8, seed=1, start=start),
                      lambda m, b, ctx: supervised_step(m, b, ctx, rng=ctx.rng), config,
                      lambda m: evaluate_supervised(m, data), resume=state)
        calls += 1
        if resumed.paused is None:
            break
        assert resumed.steps == calls
        state = resumed.paused
    assert calls == 14 and resumed.history == result.history
    for (name, a), b in zip(model.state_dict().items(), again.state_dict().values()):
        assert np.array_equal(a, b), name
    with pytest.raises(TpcoreError, match="pause_after_seconds must be >= 0"):
        fit(Scalar(), SGD(Scalar().parameters(), lr=0.1), _batches(1.0), _step,
            TrainConfig(steps=2, quiet=True, pause_after_seconds=-1.0))


def test_an_iterator_of_batches_resumes_past_the_batches_used(tmp_path):
    model, result, _ = _dropout_run((), tmp_path, callable_batches=False)
    again, resumed, _ = _dropout_run((5,), tmp_path, callable_batches=False)
    assert resumed.history == result.history
    assert all(np.array_equal(a, b) for a, b in zip(model.state_dict().values(),
                                                     again.state_dict().values()))


def test_a_paused_state_is_refused_past_the_run_or_unreadable(tmp_path):
    model = Scalar()
    opt = SGD(model.parameters(), lr=0.1)
    paused = fit(model, opt, _batches(1.0), _step,
                 TrainConfig(steps=8, pause_at=5, quiet=True)).paused
    with pytest.raises(TpcoreError, match="at step 5, past this run's 4 steps"):
        fit(model, opt, _batches(1.0), _step, TrainConfig(steps=4, quiet=True), resume=paused)
    with pytest.raises(TpcoreError, match="not a readable paused training state"):
        load_state(tmp_path)
    other = "numpy" if backend_name() != "numpy" else "numpy-strict"
    paused.backend = other
    with pytest.raises(TpcoreError, match=f"trained on the {other} backend"):
        fit(model, opt, _batches(1.0), _step, TrainConfig(steps=8, quiet=True), resume=paused)
    save_state(paused, tmp_path)
    assert load_state(tmp_path).backend == other
    state = json.loads((tmp_path / "state.json").read_text())
    (tmp_path / "state.json").write_text(json.dumps({**state, "backend": "gpu"}))
    with pytest.raises(TpcoreError, match="backend 'gpu': expected one of"):
        load_state(tmp_path)


def test_a_steps_noise_depends_on_the_seed_and_the_step_alone():
    draw = [to_host(step_rng(seed, step).random(3)) for seed, step in
            ((0, 0), (0, 1), (1, 0), (0, 0))]
    assert np.array_equal(draw[0], draw[3])
    assert not np.array_equal(draw[0], draw[1]) and not np.array_equal(draw[0], draw[2])


def test_checkpoint_loads_back(tmp_path):
    from tpcore.models.transformer import Transformer, TransformerConfig

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


CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


@pytest.mark.parametrize("env, option, expected",
                         [("", None, min(2, CORES)), ("3", None, 3), ("3", 2, 2), ("2", 1, 1)])
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


def test_history_keeps_the_training_loss_beside_an_evaluation_loss():
    """An evaluation that reports its own ``loss`` does not hide the step's training loss."""
    model = Scalar()
    result = fit(model, SGD(model.parameters(), lr=0.1), _batches(1.0), _step,
                 TrainConfig(steps=2, eval_every=1, quiet=True), lambda m: {"loss": -1.0})
    first, second = result.history
    assert first == {"step": 1, "train_loss": 1.0, "loss": -1.0}   # (0 - 1)^2 before the update
    assert second["train_loss"] == pytest.approx(0.8 ** 2) and second["loss"] == -1.0


def test_progress_in_a_log_is_a_line_at_each_tenth(capsys):
    """Where stderr is not a terminal (pytest captures it), training reports each tenth of its
    steps on a line of its own; a resumed run starts counting at its paused step; quiet is
    silent."""
    model = Scalar()
    fit(model, SGD(model.parameters(), lr=0.1), _batches(1.0), _step,
        TrainConfig(steps=100, desc="toy"))
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in lines] == [f"toy: step {10 * i} of 100"
                                                      for i in range(1, 11)]
    assert lines[-1].startswith("toy: step 100 of 100 (100 %), ") and "s to go" in lines[-1]
    bar = progress(100, "resumed", quiet=False)
    bar.update(35)
    for _ in range(65):
        bar.update()
    assert [line.split(" of")[0] for line in capsys.readouterr().err.splitlines()] == \
        [f"resumed: step {s}" for s in range(40, 101, 10)]
    fit(model, SGD(model.parameters(), lr=0.1), _batches(1.0), _step,
        TrainConfig(steps=100, quiet=True))
    assert capsys.readouterr().err == ""

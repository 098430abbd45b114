"""Training steps with their per-step values on the device, and captured as CUDA graphs.

On the CPU: :class:`tpcore.graphs.DeviceSteps` (the step a graph records, run eagerly) trains
exactly as the eager loop does, under the strict backend's no-sync rule as well. On a GPU: the
captured run equals the same run without a capture, bit for bit, for the Transformer Program
and the standard transformer; a step that cannot be captured falls back and says why; products
on tpcore's own cuBLAS handle equal CuPy's for every operand layout the models use.
"""

import numpy as np
import pytest

import tpcore.errors
import tpcore.graphs
import tpcore.train
from tpcore.backend import backend_name, get_xp, to_host
from tpcore.counter_rng import CounterRng
from tpcore.dispatch import use_kernels
from tpcore.graphs import DeviceSteps, EagerSteps, GraphSteps, graphs_status, step_runner
from tpcore.models.transformer import Transformer, TransformerConfig
from tpcore.nn.optim import Adam
from tpcore.pipelines.learn import LearnConfig, build_model, fit_run, make_data
from tpcore.train import TrainConfig, fit, shuffled_batches, supervised_step

TINY = dict(task="sort", n_layers=2, n_cat_heads=2, n_num_heads=1, n_cat_mlps=1,
            n_num_mlps=1, epochs=2, batch_size=32, eval_every=1, n_samples=200,
            lr_schedule="cosine", grad_clip=1.0)


def _counter_noise(seed, step, xp=None):
    return CounterRng(seed, step, xp)


def _learn(runner_class, monkeypatch, cfg=None):
    """A tiny learn run whose steps run through ``runner_class``, noise from
    :class:`CounterRng` (which takes device steps) either way; its parameters and result."""
    cfg = cfg or LearnConfig(**TINY)
    monkeypatch.setattr(tpcore.graphs, "step_rng", _counter_noise)

    def runner(model, optimizer, step_fn, seed, lr_at, tau_at, grad_clip, first, end, graphs):
        if runner_class is EagerSteps:
            return EagerSteps(model, optimizer, step_fn, seed, lr_at, tau_at, grad_clip)
        return runner_class(model, optimizer, step_fn, seed, lr_at, tau_at, grad_clip, first,
                            end)

    monkeypatch.setattr(tpcore.train, "step_runner", runner)
    task = make_data(cfg)
    model = build_model(cfg, task)
    result = fit_run(cfg, task, model)
    return {k: to_host(v) for k, v in model.state_dict().items()}, result


@pytest.fixture
def references():
    """The references, not the numba kernels (which take temperatures as numbers)."""
    before = use_kernels()
    use_kernels(False)
    yield
    use_kernels(before)


def test_device_steps_train_exactly_as_eager_steps(monkeypatch, references):
    """Learning rate and temperature read from device tables by a device step counter, Adam's
    step count on the device: the same parameters, metrics and optimiser state, bit for bit
    (a cosine schedule, a falling temperature, gradient clipping)."""
    eager, eager_result = _learn(EagerSteps, monkeypatch)
    device, device_result = _learn(DeviceSteps, monkeypatch)
    assert eager.keys() == device.keys()
    for k in eager:
        np.testing.assert_array_equal(device[k], eager[k], err_msg=k)
    assert device_result.history == eager_result.history
    assert device_result.cuda_graphs == eager_result.cuda_graphs == "eager"


def test_device_steps_pause_and_resume_with_host_numbers(monkeypatch, references):
    """After the loop the optimiser holds numbers again (its state saves as before), and a
    run paused and resumed through device steps ends where the whole run ends."""
    cfg = LearnConfig(**TINY)
    whole, _ = _learn(DeviceSteps, monkeypatch, cfg)
    task = make_data(cfg)
    model = build_model(cfg, task)
    paused = fit_run(cfg, task, model, pause_after=1).paused
    assert isinstance(paused.optimizer["t"], int) and isinstance(paused.optimizer["lr"], float)
    resumed = build_model(cfg, task)
    fit_run(cfg, task, resumed, resume=paused)
    for k, v in resumed.state_dict().items():
        np.testing.assert_array_equal(to_host(v), whole[k], err_msg=k)


def test_device_steps_run_in_order():
    model = Transformer(TransformerConfig(vocab_size=5, max_len=4, d_model=8, n_layers=1,
                                          n_heads=2, d_mlp=8))
    opt = Adam(model.parameters())
    run = DeviceSteps(model, opt, supervised_step, 0, None, None, None, 3, 10)
    with pytest.raises(tpcore.errors.TpcoreError, match="expected step 3, got 4"):
        with run.active():
            run(4, {})


def test_graphs_are_chosen_on_cupy_only():
    model = Transformer(TransformerConfig(vocab_size=5, max_len=4, d_model=8, n_layers=1,
                                          n_heads=2, d_mlp=8))
    run = step_runner(model, Adam(model.parameters()), supervised_step)
    on_gpu = backend_name() == "cupy"
    assert isinstance(run, GraphSteps) == on_gpu
    assert ("captured as CUDA graphs" in graphs_status()) == on_gpu
    assert isinstance(step_runner(model, Adam(model.parameters()), supervised_step,
                                  graphs=False), EagerSteps)


# ---- on a GPU ------------------------------------------------------------------------------

gpu = pytest.mark.skipif(backend_name() != "cupy", reason="CUDA graphs need the cupy backend")


def _transformer_run(graphs: bool, steps: int = 6):
    cfg = TransformerConfig(vocab_size=11, max_len=8, d_model=32, n_layers=2, n_heads=4,
                            d_mlp=64, layer_norm="pre", causal=True)
    model = Transformer(cfg)
    rng = np.random.default_rng(0)
    data = {"tokens": rng.integers(0, 11, (64, 8)), "targets": rng.integers(0, 11, (64, 8))}
    result = fit(model, Adam(model.parameters(), lr=1e-3),
                 lambda start: shuffled_batches(data, 16, 0, start), supervised_step,
                 TrainConfig(steps=steps, quiet=True, cuda_graphs=graphs, grad_clip=1.0,
                             lr_schedule=lambda s: 1e-3 / (1 + s)))
    return {k: to_host(v) for k, v in model.state_dict().items()}, result


@gpu
def test_a_captured_transformer_run_equals_its_eager_device_steps(monkeypatch):
    """Six steps: the first eager, the second captured, four replays; against six eager device
    steps on the same cuBLAS handle path, bit for bit."""
    captured, result = _transformer_run(True)
    assert result.cuda_graphs == "captured"

    monkeypatch.setattr(GraphSteps, "_capture", lambda run, step, batch: run._eager(batch))
    eager, eager_result = _transformer_run(True)
    assert eager_result.cuda_graphs == "eager (no step to capture)"
    for k in captured:
        np.testing.assert_array_equal(captured[k], eager[k], err_msg=k)


@gpu
def test_a_captured_learn_run_equals_its_eager_device_steps(monkeypatch):
    """The Transformer Program (Gumbel noise from the device step, falling temperature,
    cosine learning rate, clipping) captured and not."""
    cfg = LearnConfig(**TINY)
    task = make_data(cfg)
    model = build_model(cfg, task)
    result = fit_run(cfg, task, model)
    assert result.cuda_graphs == "captured"
    captured = {k: to_host(v) for k, v in model.state_dict().items()}
    monkeypatch.setattr(GraphSteps, "_capture", lambda run, step, batch: run._eager(batch))
    model = build_model(cfg, task)
    fit_run(cfg, task, model)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(captured[k], to_host(v), err_msg=k)


@gpu
def test_a_step_that_cannot_be_captured_runs_eagerly_and_says_why():
    """A step function that reads a device value on the host cannot be recorded: the run goes
    on eagerly, and its record names the error."""
    model = Transformer(TransformerConfig(vocab_size=5, max_len=4, d_model=8, n_layers=1,
                                          n_heads=2, d_mlp=8))
    data = {"tokens": np.zeros((8, 4), np.int64), "targets": np.ones((8, 4), np.int64)}

    def step(m, b, ctx):
        loss = supervised_step(m, b, ctx)
        return loss if float(to_host(loss)) >= 0 else loss  # a host read inside the step

    result = fit(model, Adam(model.parameters()), lambda s: shuffled_batches(data, 8, 0, s),
                 step, TrainConfig(steps=4, quiet=True))
    assert result.cuda_graphs.startswith("eager (the capture failed: ")
    assert np.isfinite(result.last_loss)


@gpu
@pytest.mark.parametrize("case", ["2d", "transposed", "batched", "broadcast", "vector",
                                  "sliced", "float64", "strided_batch"])
def test_products_on_the_own_handle_equal_cupy(case):
    from tpcore.kernels.cublas import Blas

    cp = get_xp()
    rng = np.random.default_rng(1)

    def r(*shape, dtype=np.float32):
        return cp.asarray(rng.standard_normal(shape).astype(dtype))

    a, b = {
        "2d": lambda: (r(7, 5), r(5, 3)),
        "transposed": lambda: (r(5, 7).T, r(3, 5).swapaxes(-1, -2)),
        "batched": lambda: (r(2, 3, 6, 4), r(2, 3, 4, 5).swapaxes(-1, -2).swapaxes(-1, -2)),
        "broadcast": lambda: (r(4, 6, 5), r(5, 2)),
        "vector": lambda: (r(9), r(9, 4)),
        "sliced": lambda: (r(6, 10)[:, 2:7], r(5, 8)[:, ::2]),
        "float64": lambda: (r(3, 4, 6, dtype=np.float64), r(3, 6, 2, dtype=np.float64)),
        "strided_batch": lambda: (r(2, 3, 4, 5).swapaxes(0, 1), r(2, 3, 5, 6).swapaxes(0, 1)),
    }[case]()
    got = Blas(cp.cuda.get_current_stream()).matmul(a, b)
    want = a @ b
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(to_host(got), to_host(want), rtol=1e-5, atol=1e-5)


@gpu
@pytest.mark.parametrize("k", [5, 40])
def test_row_kernels_read_a_temperature_on_the_device(k):
    """A captured step's temperature is a 0-d device array, read by the softmax kernels through
    a pointer: the same samples and gradients as the temperature given as a number."""
    from tpcore.nn.functional import softmax_backward
    from tpcore.nn.relax import gumbel_softmax_forward

    cp = get_xp()
    rng = np.random.default_rng(2)
    logits, noise, dy = (cp.asarray(rng.standard_normal((6, 3, k)).astype(np.float32))
                         for _ in range(3))
    tau = 0.37
    y, cache = gumbel_softmax_forward(logits, noise, tau)
    y_dev, cache_dev = gumbel_softmax_forward(logits, noise, cp.full((), tau, np.float32))
    np.testing.assert_array_equal(to_host(y_dev), to_host(y))
    np.testing.assert_array_equal(to_host(softmax_backward(dy, cache_dev)),
                                  to_host(softmax_backward(dy, cache)))

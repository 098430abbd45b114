"""Throughput of the standard transformer's attention and of a whole training step, side by side
with the same model in PyTorch, and where the limit is (flops and bytes of the step against this
CPU's measured peaks).

The training-step configuration: d_model 64, 2 layers, 4 heads, N 16, batch 256, float32, pre-LN,
causal, d_mlp 256, Adam. When PyTorch is installed the same model runs in PyTorch in the same
process, the two steps called alternately on 1 and on 2 threads (``bench/sidebyside.py``); the
ratios tpcore / PyTorch are in each row's ``extra_info``.

Run: ``pytest bench/bench_transformer.py --benchmark-enable --benchmark-json OUT.json``
"""

import time

import numpy as np
import pytest
from sidebyside import compare, threads, training_step, wait

from tpcore.backend import asarray, get_xp
from tpcore.models.transformer import Transformer, TransformerConfig
from tpcore.nn.attention import attention_backward, attention_forward, attention_mask
from tpcore.nn.optim import Adam
from tpcore.train import supervised_step

B, N, D, H, L, MLP, V = 256, 16, 64, 4, 2, 256, 16


def _sync(x):
    """``x``, after the device has finished (a no-op on NumPy), so timings include the work."""
    wait()
    return x


@pytest.fixture(scope="module")
def qkv():
    rng = np.random.default_rng(0)
    return [asarray(rng.standard_normal((B, H, N, D // H)).astype(np.float32)) for _ in range(3)]


def test_attention_forward(benchmark, qkv):
    mask = attention_mask(N, causal=True, xp=get_xp())
    benchmark(lambda: _sync(attention_forward(*qkv, mask)[0]))


def test_attention_backward(benchmark, qkv):
    mask = attention_mask(N, causal=True, xp=get_xp())
    out, cache = attention_forward(*qkv, mask)
    g = get_xp().ones_like(out)
    benchmark(lambda: _sync(attention_backward(g, cache)[0]))


def batch(b=B, n=N):
    rng = np.random.default_rng(0)
    x = rng.integers(0, V, (b, n))
    return {"tokens": x, "targets": np.roll(x, 1, axis=1)}


def tpcore_step(b=B, n=N, layers=L, d=D, h=H, d_mlp=MLP, graphs=None):
    """A zero-argument training step (forward, backward, Adam) of the bench's model (other sizes
    by the arguments), on the active backend (on CuPy captured as a CUDA graph unless ``graphs``
    is False); it waits for the device before returning."""
    cfg = TransformerConfig(vocab_size=V, max_len=n, d_model=d, n_layers=layers, n_heads=h,
                            d_mlp=d_mlp, layer_norm="pre", causal=True)
    model = Transformer(cfg)
    return training_step(model, Adam(model.parameters(), lr=1e-3), supervised_step, batch(b, n),
                         graphs=graphs)


def torch_step(b=B, n=N, layers=L, d=D, h=H, d_mlp=MLP, device="cpu"):
    """The same model and step in PyTorch (``nn.TransformerEncoder``, pre-LN, GELU; eager, its
    default Adam) on ``device``; on CUDA it waits for the device before returning."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d, h, d_mlp, dropout=0.0, activation="gelu",
                                             batch_first=True, norm_first=True)
    model = torch.nn.ModuleDict({
        "tok": torch.nn.Embedding(V, d), "pos": torch.nn.Embedding(n, d),
        "enc": torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False),
        "ln": torch.nn.LayerNorm(d), "out": torch.nn.Linear(d, V)}).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = {k: torch.as_tensor(v, device=device) for k, v in batch(b, n).items()}
    causal = torch.nn.Transformer.generate_square_subsequent_mask(n, device=device)
    positions = torch.arange(n, device=device)
    wait = torch.cuda.synchronize if device != "cpu" else (lambda: None)

    def step():
        opt.zero_grad()
        x = model["tok"](data["tokens"]) + model["pos"](positions)
        logits = model["out"](model["ln"](model["enc"](x, mask=causal, is_causal=True)))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), data["targets"].ravel())
        loss.backward()
        opt.step()
        wait()

    return step


@pytest.mark.parametrize("n_threads", [1, 2])
def test_training_step_tpcore(benchmark, n_threads):
    step = tpcore_step()
    with threads(n_threads):
        step()
        benchmark(step)
    benchmark.extra_info["tokens_per_s"] = B * N / benchmark.stats.stats.mean


@pytest.mark.parametrize("n_threads", [1, 2])
def test_training_step_vs_torch(benchmark, n_threads):
    """tpcore and PyTorch alternately; targets: ratio <= 0.8 on 1 thread, <= 1.0 on 2."""
    compare(benchmark, {"tpcore": tpcore_step(), "torch": torch_step()}, n_threads)


def step_cost(b=B, n=N, d=D, h=H, layers=L, d_mlp=MLP, v=V, itemsize=4):
    """Flops and bytes of one training step, counted from its matrix products and fused passes.

    Flops: ``2 m k n`` per product; the backward of a product is two products of the same size,
    so the step is three times the forward's products (elementwise work is under 2 % and left
    out). Bytes: every product reads its two operands and writes its result once, every
    elementwise pass (layer norm, GELU, softmax, residual adds, Adam) reads and writes its
    arrays once; caches are written in the forward and read back in the backward. This is the
    traffic of the fused implementation, a lower bound for the NumPy reference.
    """
    t = b * n
    products = []  # (count, m, k, n) of the forward's products
    for _ in range(layers):
        products += [(1, t, d, 3 * d), (b * h, n, d // h, n), (b * h, n, n, d // h),
                     (1, t, d, d), (1, t, d, d_mlp), (1, t, d_mlp, d)]
    products.append((1, t, d, v))
    flops = 3 * sum(2 * c * m * k * nn for c, m, k, nn in products)
    gemm_bytes = 3 * sum(c * (m * k + k * nn + m * nn) for c, m, k, nn in products)
    per_layer = (2 * 3 * t * d          # two layer norms: x in, y and xhat out
                 + 2 * b * h * n * n    # scores in, pattern out
                 + 3 * t * d_mlp        # GELU: in, out, derivative
                 + 2 * 2 * t * d)       # two residual adds
    elementwise = 2 * layers * per_layer  # forward, and the backward's passes of the same size
    params = layers * (4 * d * d + 2 * d * d_mlp) + (v + n) * d + d * v
    adam = 5 * params                     # w, g, m, v read; w, m, v written (g read once)
    return flops, itemsize * (gemm_bytes + elementwise + adam)


def _peak_gflops(size=1024, repeat=5):
    """Best single-process float32 matrix-product rate (GFLOP/s) on this CPU."""
    a = np.random.default_rng(0).standard_normal((size, size)).astype(np.float32)
    best = min(_timed(lambda: a @ a) for _ in range(repeat))
    return 2 * size**3 / best / 1e9


def _bandwidth_gbs(mb=256, repeat=5):
    """Best copy rate (GB/s, read + write) of an array far larger than the caches."""
    a = np.ones(mb * 2**20 // 4, dtype=np.float32)
    out = np.empty_like(a)
    best = min(_timed(lambda: np.copyto(out, a)) for _ in range(repeat))
    return 2 * a.nbytes / best / 1e9


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@pytest.mark.parametrize("n_threads", [1, 2])
def test_step_against_peak(benchmark, n_threads):
    """The step's flops and bytes per second as fractions of the measured peaks (a large
    float32 product; a large copy) on the same threads."""
    if get_xp() is not np:
        pytest.skip("counts the CPU's peaks")
    step = tpcore_step()
    with threads(n_threads):
        step()
        benchmark(step)
        peak, bandwidth = _peak_gflops(), _bandwidth_gbs()
    flops, nbytes = step_cost()
    seconds = benchmark.stats.stats.median
    benchmark.extra_info |= {
        "gflop_per_step": round(flops / 1e9, 3), "mbytes_per_step": round(nbytes / 1e6, 1),
        "gflops": round(flops / seconds / 1e9, 1), "peak_gflops": round(peak, 1),
        "fraction_of_peak_flops": round(flops / seconds / 1e9 / peak, 3),
        "gbs": round(nbytes / seconds / 1e9, 1), "copy_gbs": round(bandwidth, 1),
        "fraction_of_copy_bandwidth": round(nbytes / seconds / 1e9 / bandwidth, 3),
        "threads": n_threads}

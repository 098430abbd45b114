"""Throughput of the standard transformer's attention and of a whole training step.

The training-step configuration is the foundation issue's: d_model 64, 2 layers, 4 heads,
N 16, batch 256, float32, pre-LN, causal, d_mlp 256, Adam. When PyTorch is installed the same
model runs in PyTorch in the same session so the two can be compared side by side
(``pytest bench/bench_transformer.py --benchmark-enable``).
"""

import numpy as np
import pytest

from tpcore.backend import asarray, get_xp
from tpcore.models.transformer import Transformer, TransformerConfig
from tpcore.nn.attention import attention_backward, attention_forward, attention_mask
from tpcore.nn.optim import Adam
from tpcore.train import StepContext, supervised_step

B, N, D, H, L, MLP = 256, 16, 64, 4, 2, 256


def _sync(x):
    """Wait for the device (a no-op on NumPy) so timings include the work."""
    xp = get_xp()
    if xp is not np:
        xp.cuda.Stream.null.synchronize()
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


def _batch():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 16, (B, N))
    return {"tokens": asarray(x), "targets": asarray(np.roll(x, 1, axis=1))}


def test_training_step_tpcore(benchmark):
    cfg = TransformerConfig(vocab_size=16, max_len=N, d_model=D, n_layers=L, n_heads=H,
                            d_mlp=MLP, layer_norm="pre", causal=True)
    model = Transformer(cfg)
    opt = Adam(model.parameters(), lr=1e-3)
    batch, ctx = _batch(), StepContext(0, None, None)

    def step():
        opt.zero_grad()
        supervised_step(model, batch, ctx)
        opt.step()
        _sync(model.tok_emb.data)

    benchmark(step)
    benchmark.extra_info["tokens_per_s"] = B * N / benchmark.stats.stats.mean


def test_training_step_torch(benchmark):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(D, H, MLP, dropout=0.0, activation="gelu",
                                             batch_first=True, norm_first=True)
    model = torch.nn.ModuleDict({
        "tok": torch.nn.Embedding(16, D), "pos": torch.nn.Embedding(N, D),
        "enc": torch.nn.TransformerEncoder(layer, L, enable_nested_tensor=False),
        "ln": torch.nn.LayerNorm(D), "out": torch.nn.Linear(D, 16)})
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batch = {k: torch.as_tensor(np.asarray(v)) for k, v in _batch().items()}
    causal = torch.nn.Transformer.generate_square_subsequent_mask(N)
    positions = torch.arange(N)

    def step():
        opt.zero_grad()
        x = model["tok"](batch["tokens"]) + model["pos"](positions)
        logits = model["out"](model["ln"](model["enc"](x, mask=causal, is_causal=True)))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 16), batch["targets"].ravel())
        loss.backward()
        opt.step()

    benchmark(step)
    benchmark.extra_info["tokens_per_s"] = B * N / benchmark.stats.stats.mean

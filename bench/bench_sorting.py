"""Throughput of the sorting experiment's pieces: the training step at batch 1024, side by side
with the same model in plain PyTorch (target: tpcore / PyTorch <= 0.8 on one thread), the
hard-list generator (target >= 1e6 lists/s; compared side by side with a per-list loop of the
post's pseudocode), the embedding gradient (scatter-add vs the one-hot matmul the transformer
now uses for small vocabularies) and the failure search's evaluation (target 1e6 lists in
<= 60 s).

Run: ``pytest bench/bench_sorting.py --benchmark-enable``. Each bench stores its rate in
``extra_info``, the comparisons their ratios (``bench/sidebyside.py``). The 2 cores are shared
with other jobs, so absolute timings are noisy; compare rows of one run.
"""

import numpy as np
import pytest
from sidebyside import compare

from tpcore.backend import asarray, get_xp, scatter_add
from tpcore.experiments.sorting import evaluate_lists, model_config
from tpcore.models.transformer import Transformer
from tpcore.nn import functional as F
from tpcore.nn.optim import Adam
from tpcore.tasks.sorting import TASKS, encode, generate, hard_lists
from tpcore.train import StepContext, supervised_step

BATCH = 1024


def loop_hard_lists(n: int, n_values: int, length: int, rng: np.random.Generator) -> list:
    """The post's pseudocode, one list at a time (the reference the vectorised one replaces)."""
    out = []
    for _ in range(n):
        if rng.random() < 2 / 3:
            while True:
                p = rng.random()
                s = [v for v in range(n_values) if rng.random() < p]
                if s:
                    break
        else:
            x, y = rng.integers(0, n_values, 2)
            s = list(range(min(x, y), max(x, y) + 1))
        out.append([s[rng.integers(len(s))] for _ in range(length)])
    return out


def _batch(task):
    return encode(task, *generate(task, "hard", BATCH, np.random.default_rng(0)))


def tpcore_step(name):
    """A zero-argument training step of the experiment's model (loss clipped at 0.02, Adam with
    weight decay 1e-4)."""
    task = TASKS[name]
    model = Transformer(model_config(task))
    opt = Adam(model.parameters(), 1e-3, weight_decay=1e-4)
    batch = {k: asarray(v) for k, v in _batch(task).items()}
    ctx = StepContext(0, None, None)

    def step():
        opt.zero_grad()
        loss = supervised_step(model, batch, ctx, clip=0.02)
        opt.step()
        return loss

    return step


def torch_step(name):
    """The same model and step in plain PyTorch: token and position embeddings, one
    ``nn.MultiheadAttention`` head (causal, or masking the padding keys) added to the stream,
    a linear readout, per-token cross-entropy over the target positions with every loss below
    0.02 held at 0.02 (no gradient), Adam with (coupled) weight decay 1e-4."""
    torch = pytest.importorskip("torch")
    task = TASKS[name]
    cfg = model_config(task)
    torch.manual_seed(0)
    d = cfg.d_model
    model = torch.nn.ModuleDict({
        "tok": torch.nn.Embedding(cfg.vocab_size, d), "pos": torch.nn.Embedding(cfg.max_len, d),
        "attn": torch.nn.MultiheadAttention(d, 1, batch_first=True),
        "out": torch.nn.Linear(d, cfg.n_classes)})
    opt = torch.optim.Adam(model.parameters(), 1e-3, weight_decay=1e-4)
    batch = {k: torch.as_tensor(v) for k, v in _batch(task).items()}
    n = batch["tokens"].shape[1]
    causal = torch.nn.Transformer.generate_square_subsequent_mask(n) if task.causal else None
    pad = batch.get("pad")
    positions = torch.arange(n)
    weight = batch["mask"].float() / batch["mask"].sum()

    def step():
        opt.zero_grad()
        x = model["tok"](batch["tokens"]) + model["pos"](positions)
        x = x + model["attn"](x, x, x, attn_mask=causal, key_padding_mask=pad,
                              need_weights=False)[0]
        logits = model["out"](x)
        losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch["targets"],
                                                   reduction="none")
        loss = (weight * torch.where(losses > 0.02, losses, 0.02)).sum()
        loss.backward()
        opt.step()
        return float(loss)

    return step


@pytest.mark.parametrize("name", ["causal", "bidirectional"])
def test_train_step(benchmark, name):
    step = tpcore_step(name)
    step()
    benchmark(step)
    benchmark.extra_info["ms_per_step"] = 1000 * benchmark.stats.stats.mean


@pytest.mark.parametrize("name", ["causal", "bidirectional"])
def test_train_step_vs_torch(benchmark, name):
    """tpcore and plain PyTorch alternately on one thread; target: ratio <= 0.8."""
    compare(benchmark, {"tpcore": tpcore_step(name), "torch": torch_step(name)}, 1)


@pytest.mark.parametrize("impl", ["vectorised", "loop"])
def test_hard_generator(benchmark, impl):
    task = TASKS["causal"]
    rng = np.random.default_rng(0)
    n = 1_000_000 if impl == "vectorised" else 10_000
    if impl == "vectorised":
        benchmark.pedantic(hard_lists, args=(task, n, rng), rounds=3, iterations=1)
    else:
        benchmark.pedantic(loop_hard_lists, args=(n, 10, 10, rng), rounds=1, iterations=1)
    benchmark.extra_info["lists_per_s"] = n / benchmark.stats.stats.mean


@pytest.mark.parametrize("impl", ["scatter_add", "one_hot_matmul"])
def test_embedding_gradient(benchmark, impl):
    """The two forms of the embedding gradient on the causal task's shapes: the one-hot product
    that ``embedding_backward`` uses for small tables, and the scatter-add for large ones."""
    rng = np.random.default_rng(0)
    ids = asarray(rng.integers(0, 12, (BATCH, 22)))
    dy = asarray(rng.standard_normal((BATCH, 22, 56)).astype(np.float32))
    if impl == "scatter_add":
        table = get_xp().zeros((12, 56), dtype=np.float32)
        benchmark(lambda: scatter_add(table * 0, ids.reshape(-1), dy.reshape(-1, 56)))
    else:
        benchmark(F.embedding_backward, dy, (ids, (12, 56)))


@pytest.mark.parametrize("name", ["causal", "bidirectional"])
def test_failure_search_rate(benchmark, name):
    task = TASKS[name]
    model = Transformer(model_config(task))
    n = 65536
    lists, lengths = generate(task, "hard", n, np.random.default_rng(0))
    benchmark.pedantic(evaluate_lists, args=(model, task, lists, lengths), rounds=2,
                       iterations=1)
    benchmark.extra_info["seconds_per_million"] = 1e6 / n * benchmark.stats.stats.mean

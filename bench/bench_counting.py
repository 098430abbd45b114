"""Training-step cost of the counting modules over the base Transformer Program.

One training step (forward + backward + Adam, float32, batch 512, single-threaded OpenBLAS as in
training) of the reproduction's architecture (3 layers, 2 categorical + 2 numerical heads, 1 + 1
MLPs, d_mlp 64) in the regime |V| = N = 16 (tokens of width 17 with BOS), for each variant: none,
prefix (PrefixSumCounts), experts (the expert network), both. Each test benchmarks the variant's
step and records, in ``extra_info``, the ratios of its median and minimum step times to the base
model's, measured interleaved (15 pairs: base, variant, base, variant, ...) in the same process
so that the shared cores' load affects both alike. Target: ratio <= 1.20. Absolute timings
are noisy (the 2 cores are shared with other jobs); the ratios are the figures to read.

Run: ``pytest bench/bench_counting.py --benchmark-enable``
"""

import time

import numpy as np
import pytest
from bench_program_model import train_step

from tpcore.models.counting import VARIANTS, CountingConfig, CountingProgramModel, variant_flags

V, T, B = 19, 17, 512  # 16 symbols + <pad>, <s>; 16 content positions + <s>


def make_step(variant: str, tau: float = 1.0):
    cfg = CountingConfig(vocab_size=V, max_len=T, n_classes=16, n_layers=3, n_cat_heads=2,
                         n_num_heads=2, n_cat_mlps=1, n_num_mlps=1, d_mlp=64,
                         **variant_flags(variant))
    gen = np.random.default_rng(0)
    tokens = gen.integers(2, V, (B, T))
    tokens[:, 0] = 1
    batch = {"tokens": tokens, "targets": gen.integers(0, 16, (B, T)),
             "mask": np.ones((B, T), bool), "pad": np.zeros((B, T), bool)}
    return train_step(CountingProgramModel(cfg), batch, lr=0.02, tau=tau)


def interleaved_ratios(base, other, rounds: int = 15) -> tuple[float, float]:
    """(median, minimum) step time of ``other`` over that of ``base``, timed alternately."""
    tb, to = [], []
    for _ in range(rounds):
        for f, out in ((base, tb), (other, to)):
            t0 = time.perf_counter()
            f()
            out.append(time.perf_counter() - t0)
    return float(np.median(to) / np.median(tb)), float(min(to) / min(tb))


@pytest.mark.parametrize("variant", VARIANTS)
def test_counting_train_step(benchmark, variant):
    step = make_step(variant)
    step()
    if variant != "none":
        base = make_step("none")
        base()
        med, low = interleaved_ratios(base, step)
        benchmark.extra_info["ratio_vs_none_median"] = round(med, 3)
        benchmark.extra_info["ratio_vs_none_min"] = round(low, 3)
        print(f"\n{variant}: step time / base step time = {med:.3f} (medians), "
              f"{low:.3f} (minima)")
    loss = benchmark(step)
    assert np.isfinite(loss)

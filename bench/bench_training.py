"""Training speed where users train: steps late in a real run beside steps at its start, whole
runs, and what subnormal floats cost on the machine at hand.

A Transformer Program's step at the start of training (random parameters, Gumbel temperature
3) and at its end (a trained model, temperature 0.01) do the same arithmetic on different
numbers; late in a run softmax tails, samples, gradients and Adam's moments underflow into
subnormals, which many x86 cores process far slower. tpcore trains float32 models with them
flushed to zero (:mod:`tpcore.cpu`); these benches time what that buys, on real data:

- ``test_program_step_regimes``: the main job's model (``tpcore learn sort``: 3 layers, 4 + 4
  heads, 2 + 2 MLPs) on a batch of its training split: the committed trained model
  (``results/learn_sort``) at temperature 0.01 with subnormals flushed ("tpcore"), beside the
  same late step with subnormals kept ("kept") and the first step of a run, random parameters
  at temperature 3 ("early"), alternately on one thread. Targets: late / early <= 1.1.
- ``test_program_late_step_read_kernels``, ``test_program_late_step_live_mlp_rows``: that late
  step against the same step with BLAS reads of the one-hot gates, and with every MLP's backward
  over all its rows (the kernels that exploit what is settled late in a run).
- ``test_program_late_step_vs_authors``: that late step beside the authors' model at the same
  temperature on the same batch (their training step: per-token loss, Adam at lr 0.05), one
  and two threads. Target: ratio <= 0.25 on one thread. Needs ``TPCORE_AUTHORS_CODE``
  (``bench_program_model.py``).
- ``test_counting_step_regimes``: the counting reproduction's target cell (double hist at
  |V| = N = 16, PrefixSumCounts and the experts) at its schedule's start (temperature 3) and end
  (0.1), flushed and kept, random parameters (no trained model is committed).
- ``test_subnormal_census``: what a late step meets with subnormals kept and flushed: the share
  of subnormal values among the gradients and Adam's moments after 20 late steps, and whether any
  operation on the training thread read a subnormal operand or rounded a result into one (the
  register's sticky denormal and underflow flags).
- ``test_main_job``: ``tpcore learn sort`` whole (5,500 steps), once with subnormals flushed and
  once kept: seconds, CPU seconds per step, the step time of each tenth of the run and the last
  tenth over the second (the first holds the kernels' loading), test accuracy and program
  length. Minutes per round: select with ``-k main_job``.
- ``test_hierarchy_run``: a hierarchy transformer (root classification, l = 3, d = 64, the
  ``small`` budget's model) trained 3,000 steps against BP, flushed and kept: milliseconds per
  step over each stretch between its checkpoints.

Run: ``TPCORE_AUTHORS_CODE=PATH pytest bench/bench_training.py --benchmark-enable``; the CPU is
recorded in each row (``cpu``), since the cost of subnormals differs between processors.
"""

import time
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from bench_counting import make_step as counting_step
from bench_program_model import authors_step, train_step
from sidebyside import compare, kept

import tpcore
from tpcore.cpu import SUBNORMALS_VARIABLE, cpu_name, flush_unsupported
from tpcore.pipelines.learn import build_model, make_data, task_config

ROOT = Path(__file__).resolve().parents[1]
TRAINED = ROOT / "results" / "learn_sort"
B = 512


@pytest.fixture(scope="module")
def sort_data():
    cfg = task_config("sort")
    return cfg, make_data(cfg)


def sort_batch(data) -> dict:
    split = data.splits["train"]
    return {k: v[:B] for k, v in split.items()}


def late_step(data):
    """The trained main-job model's step at the end of the schedule."""
    return train_step(tpcore.load(TRAINED).model, sort_batch(data), lr=0.05, tau=0.01)


def test_program_step_regimes(benchmark, sort_data):
    cfg, data = sort_data
    early = train_step(build_model(cfg, data), sort_batch(data), lr=0.05, tau=cfg.tau_start)
    info = compare(benchmark, {"tpcore": late_step(data), "early": early,
                               "kept": kept(late_step(data))}, 1)
    benchmark.extra_info["cpu"] = cpu_name()
    print(f"\nlate / early {info['ratio_early']:.3f}, flushed / kept {info['ratio_kept']:.3f} "
          f"({cpu_name()})")


def patched(fn, module, **values):
    """``fn`` run with ``module``'s attributes ``values`` in place of its own."""
    def call():
        with mock.patch.multiple(module, **values):
            return fn()
    return call


def blas_reads(fn):
    """``fn`` with the gated-read kernels (``kernels/program_read.py``) off: BLAS reads."""
    from tpcore.kernels import program_model

    def off(*args):
        return NotImplemented
    return patched(fn, program_model, read_forward=off, gated_read_backward=off)


def dense_mlps(fn):
    """``fn`` with every MLP's backward over all its rows (``kernels/program_mlp.py``)."""
    from tpcore.kernels import program_mlp
    return patched(fn, program_mlp, LIVE_SHARE=-1.0)


def test_program_late_step_read_kernels(benchmark, sort_data):
    """The late step with the one-hot gates' reads as copies against BLAS reads, 1 thread."""
    _, data = sort_data
    info = compare(benchmark, {"tpcore": late_step(data), "blas": blas_reads(late_step(data))}, 1)
    benchmark.extra_info["cpu"] = cpu_name()
    print(f"\ncopied / BLAS reads {info['ratio_blas']:.3f} ({cpu_name()})")


def test_program_late_step_live_mlp_rows(benchmark, sort_data):
    """The late step with the settled MLPs' backward over their live rows against every row,
    1 thread."""
    _, data = sort_data
    info = compare(benchmark, {"tpcore": late_step(data), "dense": dense_mlps(late_step(data))},
                   1)
    benchmark.extra_info["cpu"] = cpu_name()
    print(f"\nlive rows / every row {info['ratio_dense']:.3f} ({cpu_name()})")


@pytest.mark.parametrize("n_threads", [1, 2])
def test_program_late_step_vs_authors(benchmark, sort_data, n_threads):
    _, data = sort_data
    batch = sort_batch(data)
    authors = authors_step(3, temp=0.01, tokens=batch["tokens"],
                           targets=np.where(batch["mask"], batch["targets"] + 1, 0))
    compare(benchmark, {"tpcore": late_step(data), "authors": authors}, n_threads, rounds=5)
    benchmark.extra_info["cpu"] = cpu_name()


def test_counting_step_regimes(benchmark):
    info = compare(benchmark, {"tpcore": counting_step("both", 0.1),
                               "early": counting_step("both", 3.0),
                               "kept": kept(counting_step("both", 0.1))}, 1)
    benchmark.extra_info["cpu"] = cpu_name()
    print(f"\ncounting: late / early {info['ratio_early']:.3f}, flushed / kept "
          f"{info['ratio_kept']:.3f}")


def census(data, flush: bool, steps: int = 20) -> dict:
    """Late steps of the trained model on one thread with subnormals flushed or kept; the share
    of subnormals among gradients and Adam's moments, and the register's flags afterwards."""
    from tpcore.kernels.fpmode import DAZ, FTZ, get_mxcsr, set_mxcsr

    step = late_step(data)
    before = get_mxcsr()
    set_mxcsr((before | FTZ | DAZ if flush else before & ~(FTZ | DAZ)) & ~0x3F)  # flags cleared
    try:
        for _ in range(steps):
            step()
        flags = get_mxcsr()
    finally:
        set_mxcsr(before)
    opt = step.optimizer
    arrays = [p.grad for p in opt.params] + opt.m + opt.v
    tiny = np.finfo(np.float32).tiny
    sub = sum(int(((a != 0) & (np.abs(a) < tiny)).sum()) for a in arrays)
    return {"subnormal_share": sub / sum(a.size for a in arrays), "subnormal_values": sub,
            "read_a_subnormal": bool(flags & 1 << 1), "underflowed": bool(flags & 1 << 4)}


def test_subnormal_census(benchmark, sort_data):
    if flush_unsupported():
        pytest.skip(flush_unsupported())
    _, data = sort_data
    kept_ = benchmark.pedantic(lambda: census(data, False), rounds=1, iterations=1)
    flushed = census(data, True)
    benchmark.extra_info.update(cpu=cpu_name(), kept=kept_, flushed=flushed)
    print(f"\nkept {kept_}\nflushed {flushed}")


@pytest.mark.parametrize("subnormals", ["flush", "keep"])
def test_main_job(benchmark, tmp_path, monkeypatch, subnormals):
    monkeypatch.setenv(SUBNORMALS_VARIABLE, subnormals)
    runs = iter(range(10))

    def whole_run():
        cpu = time.process_time()
        run = tpcore.learn("sort", out=tmp_path / f"run{next(runs)}")
        return run, time.process_time() - cpu

    run, cpu_seconds = benchmark.pedantic(whole_run, rounds=1, iterations=1)
    m = run.metrics
    tenths = m["ms_per_step_by_tenth"]
    benchmark.extra_info.update(
        cpu=cpu_name(), subnormals=subnormals, steps=m["steps"],
        train_seconds=round(m["train_seconds"], 1), ms_per_step=round(m["ms_per_step"], 2),
        cpu_ms_per_step=round(1000 * cpu_seconds / m["steps"], 2),
        ms_per_step_by_tenth=[round(t, 2) for t in tenths],
        late_over_early=round(tenths[-1] / tenths[1], 3),
        test_acc=m["test"]["acc"], program_lines=m["program"]["lines"])
    print(f"\n{subnormals}: {benchmark.extra_info}")


@pytest.mark.parametrize("subnormals", ["flush", "keep"])
def test_hierarchy_run(benchmark, monkeypatch, subnormals):
    from tpcore.experiments.against_bp import TreeRun, train_against_bp

    monkeypatch.setenv(SUBNORMALS_VARIABLE, subnormals)
    run = TreeRun(task="root", l=3, P=2**14, d_model=64, d_mlp=256, batch=64, lr=1e-3,
                  steps=3000, checkpoints=6, n_eval=1000)
    record = benchmark.pedantic(lambda: train_against_bp(run, log=lambda s: None), rounds=1,
                                iterations=1)
    marks = [(0, 0.0)] + [(h["step"], h["train_seconds"]) for h in record["history"]]
    stretches = [round(1000 * (t1 - t0) / (s1 - s0), 2)
                 for (s0, t0), (s1, t1) in zip(marks, marks[1:])]
    benchmark.extra_info.update(cpu=cpu_name(), subnormals=subnormals,
                                ms_per_step=round(1000 * record["seconds_per_step"], 2),
                                ms_per_step_by_stretch=stretches, steps=[s for s, _ in marks[1:]])
    print(f"\nhierarchy {subnormals}: {benchmark.extra_info}")


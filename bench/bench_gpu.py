"""The GPU side by side: tpcore on CuPy against PyTorch eager on CUDA (the standard transformer)
and the authors' model on CUDA (Transformer Programs), in one process on one GPU, and the main
job, ``tpcore learn sort``, whole on the GPU.

Run on a GPU machine with ``TPCORE_BACKEND=cupy`` (``bench/gpu_check.sh`` does, with the suite);
every test skips elsewhere. Each side-by-side row's ``extra_info`` holds both sides' median and
minimum milliseconds per step and their ratios (``bench/sidebyside.py``: interleaved calls;
every step waits for the device before it returns), the GPU's name and how tpcore's steps ran
(``steps_ran``: captured as a CUDA graph, or eagerly and why); the main job's row its
milliseconds per step, accuracy, program length and ``steps_ran``.

Sizes: the transformer at the CPU bench's size (d_model 64, 2 layers, 4 heads, N 16, batch 256,
d_mlp 256), the same at batch 4096, d 256 / 4 layers / 8 heads / N 64 / batch 512, and d 512 /
6 layers / 8 heads / N 128 / batch 256 (d_mlp 4 d); the Transformer Program of
``bench_program_model.py`` with 2 and 3 layers at batch 512 and with 3 layers at batch 8192.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from bench_program_model import authors_step, make_step
from bench_transformer import torch_step, tpcore_step
from sidebyside import compare

from tpcore.backend import backend_name


def _gpu_name() -> str:
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()


@pytest.fixture(scope="module", autouse=True)
def _on_a_gpu():
    if backend_name() != "cupy":
        pytest.skip("GPU benches run with TPCORE_BACKEND=cupy")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")


TRANSFORMERS = {  # name: (batch, N, layers, d_model, heads)
    "d64-L2-N16-B256": (256, 16, 2, 64, 4),
    "d64-L2-N16-B4096": (4096, 16, 2, 64, 4),
    "d256-L4-N64-B512": (512, 64, 4, 256, 8),
    "d512-L6-N128-B256": (256, 128, 6, 512, 8),
}


@pytest.mark.parametrize("size", list(TRANSFORMERS))
def test_transformer_step_vs_torch_cuda(benchmark, size):
    """Targets: ratio <= 1.0 at every size, <= 0.5 at the CPU bench's size."""
    b, n, layers, d, h = TRANSFORMERS[size]
    args = dict(b=b, n=n, layers=layers, d=d, h=h, d_mlp=4 * d)
    step = tpcore_step(**args)
    compare(benchmark, {"tpcore": step, "torch": torch_step(**args, device="cuda")}, rounds=5)
    benchmark.extra_info |= {"gpu": _gpu_name(), "steps_ran": step.describe()}


PROGRAMS = {"L2-B512": (2, 512), "L3-B512": (3, 512), "L3-B8192": (3, 8192)}


@pytest.mark.parametrize("size", list(PROGRAMS))
def test_program_step_vs_authors_cuda(benchmark, size):
    """Target: ratio <= 0.5 at every size."""
    layers, b = PROGRAMS[size]
    step = make_step(layers, b)
    compare(benchmark, {"tpcore": step, "authors": authors_step(layers, b, device="cuda")},
            rounds=5)
    benchmark.extra_info |= {"gpu": _gpu_name(), "steps_ran": step.describe()}


def test_main_job_on_the_gpu(benchmark, tmp_path):
    """The README's first command, ``tpcore learn sort``, whole, on the GPU: milliseconds per
    step (``train_seconds / steps``, evaluations included, as the README's CPU figure), test
    token accuracy and the program's length. Target: at least 5x faster per step than one CPU
    core (measured on the CPU machine: docs/gpu.md)."""
    out = tmp_path / "sort"
    benchmark.pedantic(subprocess.run, ([sys.executable, "-m", "tpcore", "--backend", "cupy",
                                         "learn", "sort", "--quiet", "--out", str(out)],),
                       {"check": True}, rounds=1, iterations=1)
    metrics = json.loads((out / "metrics.json").read_text())
    benchmark.extra_info |= {
        "tpcore_ms": round(metrics["ms_per_step"], 2), "steps": metrics["steps"],
        "train_seconds": round(metrics["train_seconds"], 1),
        "test_acc": round(metrics["test"]["acc"], 5), "program_lines": metrics["program"]["lines"],
        "steps_ran": metrics["steps_ran"], "gpu": _gpu_name()}

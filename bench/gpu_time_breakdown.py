"""Where a transformer training step's GPU time goes: ``python bench/gpu_time_breakdown.py`` (on
CuPy) records CUDA events around every call of the building blocks (products, layer norm, GELU,
softmax, attention, cross-entropy, embeddings, Adam) during a few steps of the larger
``bench_gpu.py`` transformers, and prints each block's milliseconds per step.

Times are inclusive (a block that calls another counts it too) and are spans of the GPU's
timeline: where the host queues work faster than the GPU runs it, as in these device-bound steps,
a span is the time the GPU spent on that block.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_transformer import tpcore_step  # noqa: E402

from tpcore import backend  # noqa: E402
from tpcore.nn import attention, functional, losses, optim  # noqa: E402

BLOCKS = {
    functional: ("linear_forward", "linear_backward", "layer_norm_forward",
                 "layer_norm_backward", "gelu_forward", "gelu_backward", "softmax",
                 "softmax_backward", "log_softmax_forward", "log_softmax_backward",
                 "embedding_forward", "embedding_backward"),
    attention: ("attention_forward", "attention_backward", "mha_forward", "mha_backward"),
    losses: ("cross_entropy_forward", "cross_entropy_backward"),
    optim: ("adam_update",),
    backend: ("scatter_add",),
}


def instrument(records: list) -> None:
    """Replace every block, in every tpcore module that holds it, by a version that records a
    pair of CUDA events around each call."""
    import cupy as cp

    originals = {}
    for module, names in BLOCKS.items():
        for name in names:
            f = getattr(module, name)

            def timed(*args, _f=f, _name=name, **kwargs):
                start, end = cp.cuda.Event(), cp.cuda.Event()
                start.record()
                out = _f(*args, **kwargs)
                end.record()
                records.append((_name, start, end))
                return out

            originals[id(f)] = timed
    for name, module in list(sys.modules.items()):
        if name.startswith("tpcore") and module is not None:
            for attr, value in list(vars(module).items()):
                if id(value) in originals:
                    setattr(module, attr, originals[id(value)])


def main() -> None:
    import cupy as cp

    sizes = {"d64-L2-N16-B4096": dict(b=4096, n=16, layers=2, d=64, h=4, d_mlp=256),
             "d512-L6-N128-B256": dict(b=256, n=128, layers=6, d=512, h=8, d_mlp=2048)}
    records: list = []
    steps = {name: tpcore_step(**args) for name, args in sizes.items()}
    instrument(records)
    for name, step in steps.items():
        for _ in range(2):
            step()
        records.clear()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(3):
            step()
        end.record()
        end.synchronize()
        total = defaultdict(float)
        for block, a, b in records:
            total[block] += cp.cuda.get_elapsed_time(a, b) / 3
        print(f"## {name}: {cp.cuda.get_elapsed_time(start, end) / 3:.2f} ms per step")
        for block, ms in sorted(total.items(), key=lambda kv: -kv[1]):
            print(f"{block:24s} {ms:9.3f} ms")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

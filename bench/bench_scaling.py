"""Time per training step against batch size, sequence length and depth, tpcore beside its
anchor: the standard transformer (bench_transformer's model: d_model 64, 4 heads, d_mlp 256;
base point batch 256, N 16, 2 layers) against the same model in PyTorch, and the Transformer
Program (bench_program_model's RASP configuration; base point batch 512, N 8, 2 layers)
against the authors' code (when ``TPCORE_AUTHORS_CODE`` names a checkout of it; tpcore alone
otherwise). Each point moves one axis from the base; both run alternately on one thread
(``bench/sidebyside.py``).

Run: ``pytest bench/bench_scaling.py --benchmark-enable --benchmark-json scaling.json``, then
``python bench/report.py scaling.json --out DIR`` writes the table (``scaling.md``) and, with
matplotlib, the figure (``scaling.png``).
"""

import pytest
from bench_program_model import authors_step, make_step
from bench_transformer import torch_step, tpcore_step
from sidebyside import compare

POINTS = {
    "transformer": {"batch": [64, 256, 1024], "length": [8, 16, 32, 64], "layers": [1, 2, 4]},
    "program": {"batch": [128, 512, 2048], "length": [8, 16, 32], "layers": [1, 2, 3, 4]},
}
BASE = {"transformer": {"batch": 256, "length": 16, "layers": 2},
        "program": {"batch": 512, "length": 8, "layers": 2}}


def _steps(model: str, batch: int, length: int, layers: int) -> dict:
    if model == "transformer":
        return {"tpcore": tpcore_step(batch, length, layers),
                "torch": torch_step(batch, length, layers)}
    steps = {"tpcore": make_step(layers, batch, length)}
    try:
        steps["authors"] = authors_step(layers, batch, length)
    except pytest.skip.Exception:
        pass
    return steps


@pytest.mark.parametrize(("model", "axis", "value"), [
    (model, axis, value) for model, axes in POINTS.items() for axis, values in axes.items()
    for value in values])
def test_step_scaling(benchmark, model, axis, value):
    point = BASE[model] | {axis: value}
    compare(benchmark, _steps(model, **point), 1, rounds=3)
    benchmark.extra_info |= {"model": model, "axis": axis, "value": value} | point

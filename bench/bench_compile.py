"""Compile time of the written task programs (:mod:`tpcore.rasp.library`): building the model
(layout, IR and weights; ``check=0``) and the whole :func:`tpcore.rasp.compile` with its
built-in check on 1,000 inputs, per task. Run: ``pytest bench/bench_compile.py
--benchmark-enable``; each bench stores ``extra_info["layers"]``. The machine is shared, so
absolute timings are noisy.
"""

from __future__ import annotations

import pytest

from tpcore import rasp
from tpcore.rasp.library import TASKS


@pytest.mark.parametrize("name", sorted(TASKS))
def test_build(benchmark, name):
    program = TASKS[name].program()
    compiled = benchmark.pedantic(rasp.compile, args=(program,), kwargs={"check": 0},
                                  rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info["layers"] = compiled.model.config.n_layers


@pytest.mark.parametrize("name", sorted(TASKS))
def test_compile_with_its_check(benchmark, name):
    program = TASKS[name].program()
    compiled = benchmark.pedantic(rasp.compile, args=(program,), rounds=3, iterations=1,
                                  warmup_rounds=1)
    assert compiled.check.ok
    benchmark.extra_info["layers"] = compiled.model.config.n_layers

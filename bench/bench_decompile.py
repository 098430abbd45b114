"""Decompiling the Table 1 models: extraction from the saved model (``model.npz`` -> program IR)
plus code generation of the compressed program, per task. Dyck-2's program has the largest
tables (two numerical MLPs over 257 x 4,097 sums); sort and most-freq have the most modules (36).

Run on one core: ``OPENBLAS_NUM_THREADS=1 pytest bench/bench_decompile.py --benchmark-enable
--benchmark-timer time.process_time`` (CPU time of this process, which other jobs on shared
cores do not inflate); each bench stores ``extra_info["lines"]``, the compressed program's
length.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tpcore.pipelines.decompile import load_program
from tpcore.programs.source import writer

RUNS = Path(__file__).resolve().parents[1] / "results" / "table1" / "runs"
SELECTED = {"reverse": "L3_H4+4_M1+1_s0", "hist": "L1_H2+2_M1+1_s0",
            "double_hist": "L3_H2+2_M1+1_s2", "sort": "L3_H4+4_M2+2_s0",
            "most_freq": "L3_H4+4_M2+2_s0", "dyck1": "L3_H4+4_M1+1_s2",
            "dyck2": "L3_H2+2_M2+2_s0"}
"""The Table 1 runs :mod:`tpcore.experiments.program_lengths` measures."""


def _decompile(run: Path) -> str:
    return writer.source(load_program(run))


@pytest.mark.parametrize("task", list(SELECTED))
def test_extract_and_write(benchmark, task):
    run = RUNS / task / SELECTED[task]
    text = benchmark.pedantic(_decompile, args=(run,), rounds=3, iterations=1,
                              warmup_rounds=1)
    benchmark.extra_info["lines"] = len(text.splitlines())

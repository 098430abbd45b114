"""The Figure 12 drawing: one panel per head kind and role, a PNG."""

from __future__ import annotations

import pytest

from tpcore.programs.examples import random_program
from tpcore.programs.reads import read_table


def test_reads_figure_draws_every_kind_and_role(tmp_path):
    pytest.importorskip("matplotlib")
    from tpcore.analysis.reads_figure import reads_figure

    rows = read_table([random_program(s, layers=3) for s in range(3)])
    path = reads_figure(rows, tmp_path / "reads.png", "three random programs")
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000

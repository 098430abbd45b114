"""Which variables heads read, by layer (Figure 12): families, layers, counts over programs."""

from __future__ import annotations

import pytest

from tpcore.errors import TpcoreError
from tpcore.programs import reads
from tpcore.programs.examples import random_program, reverse_program
from tpcore.programs.ir import Head


def test_reverse_heads_read_the_families_the_program_says():
    p = reverse_program()
    rows = reads.head_reads(p)
    assert [(r["head"], r["layer"]) for r in rows] == [("attn_0_0", 1), ("attn_1_0", 2)]
    first, second = rows
    assert [first[role]["family"] for role in reads.ROLES] == ["tokens", "tokens", "positions"]
    # attn_1_0 reads the key positions, the query mlp_0_0_outputs, the value tokens
    assert [second[role]["family"] for role in reads.ROLES] == ["positions", "mlp", "tokens"]
    assert second["query"]["variable"] == "mlp_0_0_outputs"


def test_families_of_every_producer():
    p = random_program(4)
    for m in p.modules:
        want = "attn" if isinstance(m, Head) else "mlp"
        assert reads.family(p, m.output) == want
    assert [reads.family(p, v) for v in ("tokens", "positions", "ones")] == [
        "tokens", "positions", "ones"]


def test_read_table_counts_every_head_of_every_program_once_per_role():
    programs = [random_program(s, layers=3) for s in range(4)]
    rows = reads.read_table(programs)
    heads = sum(isinstance(m, Head) for p in programs for m in p.modules)
    assert sum(r["heads"] for r in rows) == 3 * heads
    for r in rows:
        assert sum(r["counts"].values()) == r["heads"] and set(r["counts"]) == set(
            reads.FAMILIES)
    layer1 = [r for r in rows if r["layer"] == 1]  # only inputs exist before the first layer
    assert all(r["counts"]["attn"] == r["counts"]["mlp"] == 0 for r in layer1)
    numerical = [r for r in rows if r["kind"] == "numerical" and r["role"] == "value"]
    assert all(r["counts"]["tokens"] == r["counts"]["positions"] == 0 for r in numerical)
    assert [(r["kind"], r["layer"], r["role"]) for r in rows] == sorted(
        ((r["kind"], r["layer"], r["role"]) for r in rows),
        key=lambda t: (reads.KINDS.index(t[0]), t[1], reads.ROLES.index(t[2])))


def test_table_text_lists_counts_and_shares():
    text = reads.table_text(reads.read_table([reverse_program(), reverse_program()]))
    lines = text.splitlines()
    assert lines[0].startswith("categorical heads") and "numerical" not in text
    assert lines[1].split() == ["layer", "role", "heads", "tokens", "positions", "mlp"]
    assert lines[2].split() == ["1", "key", "2", "2", "(100%)", "-", "-"]
    assert reads.table_text([]) == "no attention heads"


def test_a_head_without_a_layer_in_its_name_is_refused():
    p = reverse_program()
    p.modules[0].name = "copy_length"
    with pytest.raises(TpcoreError, match="'copy_length': cannot tell its layer"):
        reads.head_reads(p)

"""Which variables the attention heads read, by layer (the paper's Figure 12, Appendix C.2).

Every head reads a key, a query and a value variable. A variable's *family* is what produced it
(:func:`family`): the inputs ``tokens``, ``positions`` and ``ones``; ``attn``, an attention
head's output; ``mlp``, an MLP's output; ``other`` for the rest (prefix counts, expert counts,
learned embedding lookups). A head's layer is read from its name, ``attn_L_H`` or
``num_attn_L_H``, and counted from 1 as the paper does (``L + 1``). :func:`read_table` counts,
over any number of programs, the heads of each kind and layer that read each family in each
role. Host-only code (standard library).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tpcore.errors import TpcoreError
from tpcore.programs.ir import INPUTS, Head, Mlp, Program
from tpcore.programs.values import KINDS

ROLES = ("key", "query", "value")
FAMILIES = ("tokens", "positions", "ones", "attn", "mlp", "other")
HEAD_NAME = re.compile(r"(?:num_)?attn_(\d+)_\d+$")


def family(program: Program, variable: str) -> str:
    """The family of ``variable`` in ``program`` (see the module docstring)."""
    if variable in INPUTS:
        return variable
    producer = program.producer(variable)  # the families are the figure's, not the IR's
    if isinstance(producer, Head):
        return "attn"
    if isinstance(producer, Mlp) and not producer.name.startswith("embed_"):
        return "mlp"
    return "other"


def layer(head: Head) -> int:
    """The head's layer, from 1 (its name ``attn_L_H`` or ``num_attn_L_H`` gives ``L + 1``)."""
    m = HEAD_NAME.match(head.name)
    if m is None:
        raise TpcoreError(f"head {head.name!r}: cannot tell its layer; expected a name "
                          "attn_L_H or num_attn_L_H")
    return int(m.group(1)) + 1


def head_reads(program: Program) -> list[dict[str, Any]]:
    """One row per head: ``{"head", "kind", "layer", "key", "query", "value"}``, each role
    ``{"variable", "family"}``."""
    return [{"head": h.name, "kind": h.kind, "layer": layer(h),
             **{role: {"variable": var, "family": family(program, var)}
                for role, var in zip(ROLES, (h.key, h.query, h.value))}}
            for h in program.modules if isinstance(h, Head)]


def read_table(programs: Sequence[Program]) -> list[dict[str, Any]]:
    """Rows ``{"kind", "layer", "role", "heads", "counts": {family: heads}}``, one per head kind,
    layer and role present in ``programs``, every family listed (0 when none reads it)."""
    counts: dict[tuple[str, int, str], dict[str, int]] = {}
    for p in programs:
        for row in head_reads(p):
            for role in ROLES:
                cell = counts.setdefault((row["kind"], row["layer"], role),
                                         dict.fromkeys(FAMILIES, 0))
                cell[row[role]["family"]] += 1
    return [{"kind": kind, "layer": lay, "role": role, "heads": sum(c.values()), "counts": c}
            for (kind, lay, role), c in sorted(counts.items(), key=lambda kv: (
                KINDS.index(kv[0][0]), kv[0][1], ROLES.index(kv[0][2])))]


def table_text(rows: list[dict[str, Any]]) -> str:
    """The rows of :func:`read_table` as a text table per head kind: heads reading each family
    (those some head of the kind reads) as a count and a share of the layer's heads of that
    kind."""
    out: list[str] = []
    for kind in KINDS:
        mine = [r for r in rows if r["kind"] == kind]
        if not mine:
            continue
        if out:
            out.append("")
        shown = [f for f in FAMILIES if any(r["counts"][f] for r in mine)]
        out.append(f"{kind} heads: variables read by layer (heads, share of the layer's heads)")
        out.append(f"{'layer':>5}  {'role':<5}  {'heads':>5}" + "".join(
            f"  {f:>10}" for f in shown))
        for r in mine:
            cells = "".join(f"  {_share(r['counts'][f], r['heads']):>10}" for f in shown)
            out.append(f"{r['layer']:>5}  {r['role']:<5}  {r['heads']:>5}{cells}")
    return "\n".join(out) if out else "no attention heads"


def _share(n: int, total: int) -> str:
    return "-" if n == 0 else f"{n} ({100 * n / total:.0f}%)"

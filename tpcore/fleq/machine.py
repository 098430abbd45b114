"""FLEQ: the looped transformer computer with function blocks (Giannou et al. 2023, §5.2, App. D).

One loop iteration executes one instruction

    FLEQ(a, b, c, m, flag, p, w_a, w_b, w_c):
        mem[c] = f_m(mem[a], mem[b]);  if mem[flag] <= 0 goto p  else goto next

over cells of up to ``d x d`` reals (a cell of width ``w`` is ``w`` consecutive memory columns,
``d`` rows). ``f_mul(A, B) = A^T B`` has different operand and result widths, so an instruction
carries three widths (the paper's single ``d_w`` cannot describe ``x^T w``); rows below a cell's
height are zero. The flag is read *after* the write (so ``t = t + q; if t <= 0 goto`` fits in one
instruction) and must be an integer cell; the paper never says how mem[flag] is fetched: here one
more read head does it.

Punchcard ``X: (D, n)``: scratchpad columns ``0..s-1``, memory ``s..s+m-1``, instructions after.
Rows (``FleqMachine.rows``): ``one``, ``scr`` (scratchpad bit); ``data`` (d) and ``instr``
(instruction fields ``a b c`` (L bits each), ``m`` (log M bits), ``flag p`` (L bits), ``wa wb wc``
(reals)) together form a *cell*, so instructions can be read and written like memory
(self-modifying pointer increments, Algorithm 9); ``enc`` (global encodings ``p_j``, 0 on the
scratchpad); on the scratchpad: ``pc``, ``cur`` (fetched instruction), ``off`` (offset codes),
``reg`` (A/B/C region bits), ``idx`` (offset inside the region), ``mask`` (``b^(1..3)``), ``ptr``,
``ptrw``, ``z`` (gathered cell), ``znew`` (collected result), ``tmp``, ``fv`` (flag value),
``flag``, ``pc1`` (PC + 1), then the rows of each function block.

Layers of one iteration (``6 + max_i l_i``; Theorem 2 says ``9 + max_i l_i``):

1. fetch: head ``pc . enc`` copies the instruction into ``cur`` of every scratchpad column; FF:
   three gated Lemma 16 adders give column ``i`` of region A/B/C the pointer ``p_{a|b|c + i}``, and
   the masks ``b^(r) = 1[i < w_r]`` (``ReLU(2(w - i) - 0.5) - ReLU(2(w - i) - 1.5)``, flat
   near integers so noise does not pass).
2. gather: head ``ptr . enc`` reads cells into ``z``; FF dispatch: block ``k`` gets ``z`` where
   ``b^(1) + b^(2) + p_k . p_m - log M = 1`` (gated identities); ``ptrw = b^(3) ptr``.
3. the function blocks, all in parallel on their own rows (``max l_i`` layers, ``sum h_i`` heads).
4. collect (FF): ``znew += out_k`` where ``b^(3) + p_k . p_m - log M = 1``; block rows cleared.
5. write (Lemma 3): ``K = Q = enc + ptrw``; a memory column ties with its scratchpad column,
   ``tmp = (cell + znew)/2`` and the FF sets ``cell += 2 tmp - 2 cell`` off the scratchpad.
6. flag read: head ``cur.flag . enc`` reads ``mem[flag][0, 0]`` into ``fv``; FF: ``flag =
   ReLU(1.5 - 2 fv) - ReLU(0.5 - 2 fv)`` (Eq. 3 made tolerant to |noise| < 1/4) and ``pc1``.
7. select (FF): ``pc = 2 ReLU(pc1 - flag) + 2 ReLU(p - 1 + flag) - 1``; transients cleared.

Heads whose values come from memory use a null trick: non-scratchpad queries attend to the
scratchpad, whose cell rows are zero. Weights are built on the host with NumPy; execution runs
over the backend array module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tpcore.backend import get_xp
from tpcore.fleq.adder import gated_adder
from tpcore.fleq.blocks import MASK, pointer_block
from tpcore.fleq.program import FIELDS, field_heights
from tpcore.fleq.toolkit import Toolkit
from tpcore.looped.encodings import address_bits, encode_address
from tpcore.looped.layer import Layer
from tpcore.looped.weights import (
    LayerBuilder,
    RowBlocks,
    clear,
    gated_copy,
    gated_linear,
    linear_map,
    row_vec,
    select,
)


@dataclass
class FleqMachine:
    """Weights and layout of a FLEQ looped transformer for ``n`` columns."""

    tk: Toolkit
    n: int
    m: int
    rows: RowBlocks
    builders: list[LayerBuilder]
    names: list[str]
    lam: float
    blockmap: dict[str, np.ndarray]
    layers: list[Layer] = field(default_factory=list)

    @property
    def d(self) -> int:
        return self.tk.d

    @property
    def s(self) -> int:
        return self.tk.s

    @property
    def width(self) -> int:
        return self.rows.size

    def layer_objects(self, xp: Any = None, dtype: Any = np.float64) -> list[Layer]:
        xp = get_xp() if xp is None else xp
        if not self.layers or self.layers[0].W1.dtype != dtype:
            self.layers = [b.layer(xp, dtype) for b in self.builders]
        return self.layers

    def stats(self) -> dict[str, Any]:
        """Layers, heads and widths, next to Theorem 2's ``9 + max l_i`` and ``sum h_i``."""
        heads = [len(b.heads) for b in self.builders]
        return {"layers": len(self.builders), "theorem2_layers": 9 + max(b.n_layers
                                                                       for b in self.tk.blocks),
                "max_heads_per_layer": max(heads), "heads_total": sum(heads),
                "theorem2_heads": sum(b.n_heads for b in self.tk.blocks),
                "width": self.width, "ff_width": max(b.n_units for b in self.builders),
                "n": self.n, "s": self.s, "d": self.d, "M": len(self.tk.blocks)}


def _head(b: LayerBuilder, rows: RowBlocks, K: np.ndarray, Q: np.ndarray, V: np.ndarray,
          lam: float, null: bool = True) -> None:
    """A pointer head; with ``null`` non-scratchpad queries attend to the scratchpad."""
    D = b.d
    if null:
        K = np.vstack([K, row_vec(D, {rows["scr"][0]: 1.0})])
        Q = np.vstack([Q, row_vec(D, {rows["one"][0]: MASK / lam, rows["scr"][0]: -MASK / lam})])
    b.head(K, Q, V, lam)


def build_machine(tk: Toolkit, n: int, m: int, lam: float = 30.0) -> FleqMachine:
    """Weights of the FLEQ looped transformer for ``n`` columns (``m`` of them memory), gated
    with the toolkit's gating constant."""
    d, s = tk.d, tk.s
    L = address_bits(n)
    M = len(tk.blocks)
    Lm = address_bits(M)
    hs = field_heights(L, Lm)
    H = sum(hs.values())
    rows = RowBlocks()
    for nm, h in (("one", 1), ("scr", 1), ("data", d), ("instr", H), ("enc", L), ("pc", L),
                  ("cur", H), ("off", L), ("reg", 3), ("idx", 1), ("mask", 3), ("ptr", L),
                  ("ptrw", L), ("z", d + H), ("znew", d + H), ("tmp", d + H), ("fv", 1),
                  ("flag", 1), ("pc1", L)):
        rows.add(nm, h)
    blocks = [pointer_block(d, s, L, Lm, b.params["lam"], b.name, tk.gate)
              if b.params.get("cell") == "code" else b for b in tk.blocks]
    tk = Toolkit(d, s, blocks, tk.gate)
    blockmap = {}
    for b in tk.blocks:
        rows.add("blk:" + b.name, b.width - 2)
        blockmap[b.name] = np.concatenate([rows["one"], rows["scr"], rows["blk:" + b.name]])
    D = rows.size
    off = np.cumsum([0] + [hs[f] for f in FIELDS])
    fld = {f: np.arange(off[i], off[i + 1]) for i, f in enumerate(FIELDS)}
    cur = {f: rows["cur"][fld[f]] for f in FIELDS}
    cell = np.concatenate([rows["data"], rows["instr"]])
    one, scr = rows["one"][0], rows["scr"][0]
    reg, mask = rows["reg"], rows["mask"]
    G = tk.gate

    fetch = LayerBuilder(D)
    V = np.zeros((D, D))
    V[rows["cur"], rows["instr"]] = 1.0
    _head(fetch, rows, select(D, rows["enc"]), select(D, rows["pc"]), V, lam)
    for r, f, w in ((0, "a", "wa"), (1, "b", "wb"), (2, "c", "wc")):
        gated_adder(fetch, cur[f], rows["off"], 0, rows["ptr"], row_vec(D, {reg[r]: 1.0}), 0.0,
                    G)
        for shift, sgn in ((-0.5, 1.0), (-1.5, -1.0)):
            w1 = row_vec(D, {cur[w][0]: 2.0, rows["idx"][0]: -2.0, reg[r]: G})
            fetch.units(w1[None], np.array([shift - G]),
                        row_vec(D, {mask[r]: sgn})[:, None])

    gather = LayerBuilder(D)
    V = np.zeros((D, D))
    V[rows["z"], cell] = 1.0
    _head(gather, rows, select(D, rows["enc"]), select(D, rows["ptr"]), V, lam)
    zdata, zinstr = rows["z"][:d], rows["z"][d:]
    for k, b in enumerate(tk.blocks):
        code = encode_address([k], Lm)[:, 0]
        gate = row_vec(D, {mask[0]: 1.0, mask[1]: 1.0})
        gate[cur["m"]] += code
        src = zinstr if b.params.get("cell") == "code" else zdata
        gated_copy(gather, src, blockmap[b.name][b.rows["in"]], gate, -Lm, G)
    gated_copy(gather, rows["ptr"], rows["ptrw"], row_vec(D, {mask[2]: 1.0}), 0.0, G)

    lmax = max(b.n_layers for b in tk.blocks)
    compute = [LayerBuilder(D) for _ in range(lmax)]
    for b in tk.blocks:
        for t, layer in enumerate(b.layers):
            compute[t].extend(layer, blockmap[b.name])

    collect = LayerBuilder(D)
    for k, b in enumerate(tk.blocks):
        code = encode_address([k], Lm)[:, 0]
        gate = row_vec(D, {mask[2]: 1.0})
        gate[cur["m"]] += code
        dst = rows["znew"][d:] if b.params.get("cell") == "code" else rows["znew"][:d]
        gated_copy(collect, blockmap[b.name][b.rows["out"]][:len(dst)], dst, gate, -Lm, G)
        fixed = set(blockmap[b.name][b.constant_rows()])
        clear(collect, np.array([r for r in blockmap[b.name] if r not in fixed]))
    clear(collect, np.concatenate([rows["z"], rows["ptr"], mask]))

    write = LayerBuilder(D)
    KQ = select(D, rows["enc"]) + select(D, rows["ptrw"])
    V = np.zeros((D, D))
    V[rows["tmp"], cell] = 1.0
    V[rows["tmp"], rows["znew"]] = 1.0
    _head(write, rows, KQ, KQ, V, lam, null=False)
    Mw = np.zeros((len(cell), D))
    Mw[np.arange(len(cell)), rows["tmp"]] = 2.0
    Mw[np.arange(len(cell)), cell] = -2.0
    gated_linear(write, Mw, cell, row_vec(D, {one: 1.0, scr: -1.0}), 0.0, G)
    clear(write, np.concatenate([rows["tmp"], rows["znew"], rows["ptrw"]]))

    flagread = LayerBuilder(D)
    V = np.zeros((D, D))
    V[rows["fv"][0], rows["data"][0]] = 1.0
    _head(flagread, rows, select(D, rows["enc"]), select(D, cur["flag"]), V, lam)
    for shift, sgn in ((1.5, 1.0), (0.5, -1.0)):
        w1 = row_vec(D, {rows["fv"][0]: -2.0, scr: G})
        flagread.units(w1[None], np.array([shift - G]),
                       row_vec(D, {rows["flag"][0]: sgn})[:, None])
    gated_adder(flagread, rows["pc"], None, 1, rows["pc1"], row_vec(D, {scr: 1.0}), 0.0, G)

    branch = LayerBuilder(D)
    f0 = rows["flag"][0]
    W1, b1, W2 = [], [], []
    for r in range(L):
        W1.append(row_vec(D, {rows["pc1"][r]: 1.0, f0: -1.0}))
        b1.append(0.0)
        W1.append(row_vec(D, {cur["p"][r]: 1.0, f0: 1.0}))
        b1.append(-1.0)
        W2 += [row_vec(D, {rows["pc"][r]: 2.0})] * 2
    W1.append(row_vec(D, {scr: 1.0}))
    b1.append(0.0)
    W2.append(row_vec(D, dict.fromkeys(rows["pc"], -1.0)))
    branch.units(np.array(W1), np.array(b1), np.array(W2).T)
    linear_map(branch, -select(D, rows["pc"]), rows["pc"])
    clear(branch, np.concatenate([rows["cur"], rows["fv"], rows["flag"], rows["pc1"]]))

    builders = [fetch, gather, *compute, collect, write, flagread, branch]
    names = ["fetch", "gather"] + [f"block{t + 1}" for t in range(lmax)] + [
        "collect", "write", "flag", "branch"]
    return FleqMachine(tk, n, m, rows, builders, names, lam, blockmap)

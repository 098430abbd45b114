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

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tpcore.backend import get_xp, to_host
from tpcore.errors import TpcoreError
from tpcore.looped.encodings import address_bits, decode_unsigned, encode_address
from tpcore.looped.functions import (
    MASK,
    Block,
    Rows,
    SigmoidFit,
    Spec,
    clear,
    codes,
    combine_block,
    current_gate,
    diag_block,
    frame,
    gated_copy,
    gated_linear,
    indicator,
    linear_map,
    masked_head,
    matmul_block,
    row_vec,
    select,
    sigmoid_block,
    transpose_block,
)
from tpcore.looped.layer import Layer, layer_forward

FIELDS = ("a", "b", "c", "m", "flag", "p", "wa", "wb", "wc")
"""Instruction fields in the order of the ``instr`` rows."""


def field_heights(L: int, Lm: int) -> dict[str, int]:
    return {"a": L, "b": L, "c": L, "m": Lm, "flag": L, "p": L, "wa": 1, "wb": 1, "wc": 1}


# ----------------------------------------------------------------------------------------------
# Programs


@dataclass
class Cell:
    """A memory cell: ``value`` of shape ``(h, w)``; ``kind`` is ``real``, ``int`` (an integer
    scalar, usable as a flag) or ``code`` (instruction fields, for self-modifying programs)."""

    name: str
    value: np.ndarray
    kind: str = "real"
    code: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int]:
        return (1, 1) if self.kind == "code" else tuple(self.value.shape)


@dataclass
class Instr:
    """``mem[c] = f(mem[a], mem[b]); if mem[flag] <= 0 goto p``; names of cells or labels;
    ``f`` is a function name or its index ``m`` in the toolkit."""

    f: str | int
    c: str
    a: str
    b: str
    flag: str
    goto: str | None
    label: str | None = None


class Program:
    """A FLEQ program: cells and instructions named symbolically (resolved by :func:`assemble`).

    Reserved cells: ``_zero`` (0, a flag that always jumps), ``_one`` (1, never jumps) and
    ``_dummy`` (target of pure jumps). The last instruction is the halting one, which jumps to
    itself (added by :meth:`halt`).
    """

    def __init__(self, d: int) -> None:
        self.d = d
        self.cells: dict[str, Cell] = {}
        self.views: dict[str, tuple[str, int, tuple[int, int]]] = {}
        self.instrs: list[Instr] = []
        self.cell("_zero", 0, kind="int")
        self.cell("_one", 1, kind="int")
        self.cell("_dummy", 0.0)

    def cell(self, name: str, value: Any, kind: str = "real") -> str:
        """Declare a cell (scalar, vector ``(h,)`` stored as a column, or matrix ``(h, w)``)."""
        if name in self.cells:
            raise TpcoreError(f"cell {name!r} declared twice")
        v = np.asarray(value, dtype=np.float64)
        v = v.reshape(1, 1) if v.ndim == 0 else v[:, None] if v.ndim == 1 else v
        if v.ndim != 2 or v.shape[0] > self.d or v.shape[1] > self.d:
            raise TpcoreError(f"cell {name!r} has shape {v.shape}; cells are at most "
                              f"d x d = {self.d} x {self.d}")
        if kind == "int" and (v.shape != (1, 1) or v[0, 0] != np.round(v[0, 0])):
            raise TpcoreError(f"cell {name!r} is declared int but holds {v.tolist()}")
        self.cells[name] = Cell(name, v, kind)
        return name

    def view(self, name: str, of: str, col: int = 0, shape: tuple[int, int] = (1, 1)) -> str:
        """A name for part of a cell: ``shape`` starting at column ``col`` of cell ``of`` (e.g.
        one element of a row vector, to walk it with pointer increments)."""
        if name in self.cells or name in self.views:
            raise TpcoreError(f"cell {name!r} declared twice")
        if of not in self.cells:
            raise TpcoreError(f"view {name!r} of unknown cell {of!r}")
        h, w = self.cells[of].shape
        if shape[0] > h or col + shape[1] > w:
            raise TpcoreError(f"view {name!r} ({shape} at column {col}) exceeds cell {of!r} "
                              f"of shape {(h, w)}")
        self.views[name] = (of, col, tuple(shape))
        return name

    def code_cell(self, name: str, **fields: Any) -> str:
        """A memory cell holding instruction fields (``a b c`` as addresses/offsets or names,
        ``copy_of`` = an instruction label to copy every field from)."""
        if name in self.cells:
            raise TpcoreError(f"cell {name!r} declared twice")
        self.cells[name] = Cell(name, np.zeros((1, 1)), "code", dict(fields))
        return name

    def op(self, f: str | int, c: str, a: str, b: str = "_zero", flag: str = "_one",
           goto: str | None = None, label: str | None = None) -> None:
        self.instrs.append(Instr(f, c, a, b, flag, goto, label))

    def jump(self, flag: str, goto: str, label: str | None = None) -> None:
        """``if mem[flag] <= 0 goto`` (Corollary 1: a dummy ``_dummy = _zero + _zero``)."""
        self.op("add", "_dummy", "_zero", "_zero", flag, goto, label)

    def halt(self) -> None:
        self.op("add", "_dummy", "_zero", "_zero", "_zero", "_halt", "_halt")


# ----------------------------------------------------------------------------------------------
# Function blocks of a machine


@dataclass
class Toolkit:
    """The ``M`` function blocks of a machine (index ``m`` = position) and their sizes."""

    d: int
    s: int
    blocks: list[Block]

    @property
    def names(self) -> list[str]:
        return [b.name for b in self.blocks]


def toolkit(d: int, names: tuple[str, ...] = ("add", "sub", "mul", "transp", "perc"),
            c: float = 1e-8, C: float = 30.0, lam: float = 30.0,
            fits: dict[str, list[SigmoidFit]] | None = None, s: int | None = None,
            symmetric: bool = False) -> Toolkit:
    """Standard blocks: ``add sub perc`` (combine), ``mul`` (Lemma 7 with ``c, C``; two heads
    ``+-c`` if ``symmetric``), ``diag``, ``transp``
    (Lemma 6), ``ptr`` (pointer arithmetic on code cells) and one sigmoid block per entry of
    ``fits`` (Lemma 5). ``s`` defaults to the smallest scratchpad all blocks accept."""
    fits = fits or {}
    need = 3 * d + (d * d if "transp" in names else 0)
    s = need if s is None else s
    makers: dict[str, Callable[[], Block]] = {
        "add": lambda: combine_block(d, s, 1.0, 1.0, lam, "add"),
        "sub": lambda: combine_block(d, s, 1.0, -1.0, lam, "sub"),
        "perc": lambda: combine_block(d, s, 0.01, 0.0, lam, "perc"),
        "mul": lambda: matmul_block(d, s, c, C, lam, "mul", symmetric),
        "transp": lambda: transpose_block(d, s, lam, "transp"),
        "diag": lambda: diag_block(d, s, lam, "diag"),
    }
    blocks = []
    for nm in names:
        if nm in fits:
            blocks.append(sigmoid_block(d, s, fits[nm], lam, nm))
        elif nm == "ptr":
            blocks.append(pointer_block(d, s, 1, 1, lam))
        elif nm in makers:
            blocks.append(makers[nm]())
        else:
            raise TpcoreError(f"unknown function {nm!r}; expected one of "
                              f"{sorted(makers) + ['ptr'] + sorted(fits)}")
    return Toolkit(d, s, blocks)


def gated_adder(spec: Spec, x: np.ndarray | None, y: np.ndarray | None, const: int,
                dst: np.ndarray, gate: np.ndarray, gconst: float = 0.0,
                C: float | None = None) -> None:
    """Lemma 16 (+-1 bits, LSB first), gated: ``x[dst] += p_{(X + Y + const) mod 2^L}`` where
    ``g = gate . x + gconst`` is 1, and nothing where ``g <= 0``.

    For output bit ``i`` (weight ``2^(i-1)``) let ``S`` be the sum of the ``i`` low bits of both
    operands (``(b+1)/2`` of each +-1 bit) and of ``const``; the bit is
    ``H(2^(i-1)) - H(2^i) + H(3 2^(i-1))`` (6 units per bit). The paper's step
    ``ReLU(S - t + 1) - ReLU(S - t)`` passes noise on ``S`` straight through at integers; here
    ``H(t) = ReLU(2(S - t) + 1.5) - ReLU(2(S - t) + 0.5)`` is flat within 1/4 of every integer,
    so slightly noisy input bits give exact output bits (the adder also snaps). ``+-1 = 2 bit - 1``
    with the ``-1`` from one gated unit.
    """
    D, L = spec.D, len(dst)
    C = (current_gate() if C is None else C) + 2.0 ** (L + 3)
    rows_w1, b1, out = [], [], []
    lin, lin0 = np.zeros(D), 0.0
    for i in range(1, L + 1):
        k = i - 1
        for src in (x, y):
            if src is not None:
                lin[src[k]] += 2.0 ** k / 2
                lin0 += 2.0 ** k / 2
        lin0_i = lin0 + (const % (1 << i))
        for t, sign in ((2.0 ** k, 1.0), (2.0 ** i, -1.0), (3 * 2.0 ** k, 1.0)):
            for shift, sgn in ((1.5, 1.0), (0.5, -1.0)):
                rows_w1.append(2.0 * lin + C * gate)
                b1.append(2.0 * (lin0_i - t) + shift + C * (gconst - 1.0))
                o = np.zeros(D)
                o[dst[k]] = 2.0 * sign * sgn
                out.append(o)
    rows_w1.append(C * gate)
    b1.append(1.0 + C * (gconst - 1.0))
    o = np.zeros(D)
    o[dst] = -1.0
    out.append(o)
    spec.units(np.array(rows_w1), np.array(b1), np.array(out).T)


def gated_snap(spec: Spec, src: np.ndarray, dst: np.ndarray, gate: np.ndarray,
               gconst: float = 0.0, C: float | None = None) -> None:
    """``x[dst] += sign(x[src])`` for +-1 bits within 1/4 of +-1, where the gate is 1 (error
    correction, §5.1): ``s(b) - s(-b)`` with the flat step ``s(b) = ReLU(2b - 0.5) -
    ReLU(2b - 1.5)``. 4 units per bit."""
    D, k = spec.D, len(src)
    C = current_gate() if C is None else C
    W1, b1, W2 = [], [], np.zeros((D, 4 * k))
    for t, (r, q) in enumerate(zip(src, dst)):
        for u, (sgn, shift, w) in enumerate(((1, -0.5, 1), (1, -1.5, -1), (-1, -0.5, -1),
                                             (-1, -1.5, 1))):
            W1.append(row_vec(D, {r: 2.0 * sgn}) + C * gate)
            b1.append(shift + C * (gconst - 1.0))
            W2[q, 4 * t + u] = w
    spec.units(np.array(W1), np.array(b1), W2)


def pointer_block(d: int, s: int, L: int, Lm: int, lam: float = 30.0,
                  name: str = "ptr") -> Block:
    """Pointer arithmetic on code cells: C = A with fields ``a b c`` advanced by those of B
    (``mod 2^L``): ``f_incr_pointer`` / ``f_reset_pointer`` of Algorithm 9. 2 layers, 1 head.

    Works on the ``instr`` part of cells (``h_in`` = instruction height for address width ``L``
    and ``Lm`` function bits; :func:`build_machine` rebuilds it for the machine's ``L, Lm``).
    Layer 1 (FF) splits A (column 0) and B (column d); layer 2's head ties columns 0 and d at
    output column 2d (values doubled), its FF adds the fields with Lemma 16 and copies the rest
    (bits snapped to +-1, so rewritten instructions stay exact).
    """
    hs = field_heights(L, Lm)
    H = sum(hs.values())
    rows = frame(d, s, h_in=H, h_out=H)
    const = {"isA": indicator(s, [0]), "isB": indicator(s, [d]), "isC": indicator(s, [2 * d])}
    for nm, h in (("isA", 1), ("isB", 1), ("isC", 1), ("ra", H), ("rb", H), ("ga", H),
                  ("gb", H), ("kp", 1), ("qp", 1)):
        rows.add(nm, h)
    const["kp"] = codes(s, 1, {0: 1, d: 1})
    const["qp"] = codes(s, 1, {2 * d: 1})
    D = rows.size
    l1 = Spec(D)
    gated_copy(l1, rows["in"], rows["ra"], row_vec(D, {rows["isA"][0]: 1.0}))
    gated_copy(l1, rows["in"], rows["rb"], row_vec(D, {rows["isB"][0]: 1.0}))
    l2 = Spec(D)
    V = np.zeros((D, D))
    V[rows["ga"], rows["ra"]] = 2.0
    V[rows["gb"], rows["rb"]] = 2.0
    masked_head(l2, rows, select(D, rows["kp"]), select(D, rows["qp"]), V, lam)
    off = np.cumsum([0] + list(hs.values()))
    part = {f: np.arange(off[i], off[i + 1]) for i, f in enumerate(FIELDS)}
    gate = row_vec(D, {rows["isC"][0]: 1.0})
    for f in FIELDS:
        ga, out = rows["ga"][part[f]], rows["out"][part[f]]
        if f in ("a", "b", "c"):
            gated_adder(l2, ga, rows["gb"][part[f]], 0, out, gate)
        elif f in ("m", "flag", "p"):
            gated_snap(l2, ga, out, gate)
        else:
            gated_copy(l2, ga, out, gate)
    return Block(name, d, s, rows, [l1, l2], const, {"cell": "code", "lam": lam})


# ----------------------------------------------------------------------------------------------
# The machine


@dataclass
class FleqMachine:
    """Weights and layout of a FLEQ looped transformer for ``n`` columns."""

    tk: Toolkit
    n: int
    m: int
    rows: Rows
    specs: list[Spec]
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
            self.layers = [sp.layer(xp, dtype) for sp in self.specs]
        return self.layers

    def stats(self) -> dict[str, Any]:
        """Layers, heads and widths, next to Theorem 2's ``9 + max l_i`` and ``sum h_i``."""
        heads = [len(sp.heads) for sp in self.specs]
        return {"layers": len(self.specs), "theorem2_layers": 9 + max(b.n_layers
                                                                       for b in self.tk.blocks),
                "max_heads_per_layer": max(heads), "heads_total": sum(heads),
                "theorem2_heads": sum(b.n_heads for b in self.tk.blocks),
                "width": self.width, "ff_width": max(sp.n_units for sp in self.specs),
                "n": self.n, "s": self.s, "d": self.d, "M": len(self.tk.blocks)}


def _head(spec: Spec, rows: Rows, K: np.ndarray, Q: np.ndarray, V: np.ndarray, lam: float,
          null: bool = True) -> None:
    """A pointer head; with ``null`` non-scratchpad queries attend to the scratchpad."""
    D = spec.D
    if null:
        K = np.vstack([K, row_vec(D, {rows["scr"][0]: 1.0})])
        Q = np.vstack([Q, row_vec(D, {rows["one"][0]: MASK / lam, rows["scr"][0]: -MASK / lam})])
    spec.head(K, Q, V, lam)


def build_machine(tk: Toolkit, n: int, m: int, lam: float = 30.0) -> FleqMachine:
    """Weights of the FLEQ looped transformer for ``n`` columns (``m`` of them memory)."""
    d, s = tk.d, tk.s
    L = address_bits(n)
    M = len(tk.blocks)
    Lm = address_bits(M)
    hs = field_heights(L, Lm)
    H = sum(hs.values())
    rows = Rows()
    for nm, h in (("one", 1), ("scr", 1), ("data", d), ("instr", H), ("enc", L), ("pc", L),
                  ("cur", H), ("off", L), ("reg", 3), ("idx", 1), ("mask", 3), ("ptr", L),
                  ("ptrw", L), ("z", d + H), ("znew", d + H), ("tmp", d + H), ("fv", 1),
                  ("flag", 1), ("pc1", L)):
        rows.add(nm, h)
    blocks = [pointer_block(d, s, L, Lm, b.params["lam"], b.name)
              if b.params.get("cell") == "code" else b for b in tk.blocks]
    tk = Toolkit(d, s, blocks)
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
    G = current_gate()

    fetch = Spec(D)
    V = np.zeros((D, D))
    V[rows["cur"], rows["instr"]] = 1.0
    _head(fetch, rows, select(D, rows["enc"]), select(D, rows["pc"]), V, lam)
    for r, f, w in ((0, "a", "wa"), (1, "b", "wb"), (2, "c", "wc")):
        gated_adder(fetch, cur[f], rows["off"], 0, rows["ptr"], row_vec(D, {reg[r]: 1.0}))
        for shift, sgn in ((-0.5, 1.0), (-1.5, -1.0)):
            w1 = row_vec(D, {cur[w][0]: 2.0, rows["idx"][0]: -2.0, reg[r]: G})
            fetch.units(w1[None], np.array([shift - G]),
                        row_vec(D, {mask[r]: sgn})[:, None])

    gather = Spec(D)
    V = np.zeros((D, D))
    V[rows["z"], cell] = 1.0
    _head(gather, rows, select(D, rows["enc"]), select(D, rows["ptr"]), V, lam)
    zdata, zinstr = rows["z"][:d], rows["z"][d:]
    for k, b in enumerate(tk.blocks):
        code = encode_address([k], Lm)[:, 0]
        gate = row_vec(D, {mask[0]: 1.0, mask[1]: 1.0})
        gate[cur["m"]] += code
        src = zinstr if b.params.get("cell") == "code" else zdata
        gated_copy(gather, src, blockmap[b.name][b.rows["in"]], gate, gconst=-Lm)
    gated_copy(gather, rows["ptr"], rows["ptrw"], row_vec(D, {mask[2]: 1.0}))

    lmax = max(b.n_layers for b in tk.blocks)
    compute = [Spec(D) for _ in range(lmax)]
    for b in tk.blocks:
        for t, sp in enumerate(b.layers):
            sp.embed(compute[t], blockmap[b.name])

    collect = Spec(D)
    for k, b in enumerate(tk.blocks):
        code = encode_address([k], Lm)[:, 0]
        gate = row_vec(D, {mask[2]: 1.0})
        gate[cur["m"]] += code
        dst = rows["znew"][d:] if b.params.get("cell") == "code" else rows["znew"][:d]
        gated_copy(collect, blockmap[b.name][b.rows["out"]][:len(dst)], dst, gate, gconst=-Lm)
        fixed = set(blockmap[b.name][b.constant_rows()])
        clear(collect, np.array([r for r in blockmap[b.name] if r not in fixed]))
    clear(collect, np.concatenate([rows["z"], rows["ptr"], mask]))

    write = Spec(D)
    KQ = select(D, rows["enc"]) + select(D, rows["ptrw"])
    V = np.zeros((D, D))
    V[rows["tmp"], cell] = 1.0
    V[rows["tmp"], rows["znew"]] = 1.0
    _head(write, rows, KQ, KQ, V, lam, null=False)
    Mw = np.zeros((len(cell), D))
    Mw[np.arange(len(cell)), rows["tmp"]] = 2.0
    Mw[np.arange(len(cell)), cell] = -2.0
    gated_linear(write, Mw, cell, row_vec(D, {one: 1.0, scr: -1.0}))
    clear(write, np.concatenate([rows["tmp"], rows["znew"], rows["ptrw"]]))

    flagread = Spec(D)
    V = np.zeros((D, D))
    V[rows["fv"][0], rows["data"][0]] = 1.0
    _head(flagread, rows, select(D, rows["enc"]), select(D, cur["flag"]), V, lam)
    for shift, sgn in ((1.5, 1.0), (0.5, -1.0)):
        w1 = row_vec(D, {rows["fv"][0]: -2.0, scr: G})
        flagread.units(w1[None], np.array([shift - G]),
                       row_vec(D, {rows["flag"][0]: sgn})[:, None])
    gated_adder(flagread, rows["pc"], None, 1, rows["pc1"], row_vec(D, {scr: 1.0}))

    branch = Spec(D)
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

    specs = [fetch, gather, *compute, collect, write, flagread, branch]
    names = ["fetch", "gather"] + [f"block{t + 1}" for t in range(lmax)] + [
        "collect", "write", "flag", "branch"]
    return FleqMachine(tk, n, m, rows, specs, names, lam, blockmap)


# ----------------------------------------------------------------------------------------------
# Assembling and running


@dataclass
class Compiled:
    """A program laid out on a machine: punchcard ``X0``, addresses and instruction words."""

    program: Program
    machine: FleqMachine
    X0: np.ndarray
    addr: dict[str, int]
    labels: dict[str, int]
    words: list[dict[str, Any]]

    @property
    def halt(self) -> int:
        return self.labels["_halt"]


SHAPE_RULES: dict[str, str] = {"add": "same", "sub": "same", "perc": "unary", "mul": "AtB",
                               "transp": "T", "ptr": "code", "diag": "diag"}


def _result_shape(kind: str, A: tuple[int, int], B: tuple[int, int],
                  fit_inputs: int | None) -> tuple[int, int] | None:
    if kind == "same":
        return A if A == B else None
    if kind == "unary":
        return A
    if kind == "AtB":
        return (A[1], B[1]) if A[0] == B[0] else None
    if kind == "T":
        return (A[1], A[0])
    if kind == "diag":
        return (A[1], A[1]) if A[0] == 1 else None
    if kind == "sig":
        return (1, A[1]) if A[0] == fit_inputs else None
    return (1, 1)


def assemble(program: Program, tk: Toolkit, lam: float = 30.0) -> Compiled:
    """Lay ``program`` out (scratchpad, memory cells, instructions), validate it and build the
    machine. Rejected before running, naming the instruction: unknown function (index beyond M),
    operand shapes that exceed ``d`` or do not fit the function, a non-integer flag cell, an
    integer cell written by anything but add/sub of integer cells, unknown names or labels."""
    if program.d != tk.d:
        raise TpcoreError(f"program has d = {program.d} but the toolkit has d = {tk.d}")
    if not program.instrs or program.instrs[-1].label != "_halt":
        raise TpcoreError("program must end with halt()")
    s, d = tk.s, tk.d
    addr, col = {}, s
    for c in program.cells.values():
        addr[c.name] = col
        col += c.shape[1]
    m = col - s
    labels = {}
    for i, ins in enumerate(program.instrs):
        if ins.label is not None:
            if ins.label in labels:
                raise TpcoreError(f"label {ins.label!r} used twice")
            labels[ins.label] = col + i
    n = col + len(program.instrs)
    fits = {b.name: b for b in tk.blocks}
    shapes = {name: c.shape for name, c in program.cells.items()}
    kinds = {name: c.kind for name, c in program.cells.items()}
    for name, (of, vcol, shape) in program.views.items():
        addr[name], shapes[name], kinds[name] = addr[of] + vcol, shape, kinds[of]
    for lab in labels:
        shapes[lab], kinds[lab] = (1, 1), "code"
    words = []
    for i, ins in enumerate(program.instrs):
        where = f"instruction {i} ({ins.f} -> {ins.c})"
        if isinstance(ins.f, int | np.integer):
            if not 0 <= ins.f < len(tk.blocks):
                raise TpcoreError(f"{where}: function index {ins.f} is beyond the machine's "
                                  f"M = {len(tk.blocks)} functions {tk.names}")
            ins = Instr(tk.names[ins.f], ins.c, ins.a, ins.b, ins.flag, ins.goto, ins.label)
        if ins.f not in fits:
            raise TpcoreError(f"{where}: function {ins.f!r} is not one of the machine's M = "
                              f"{len(tk.blocks)} functions {tk.names}")
        for nm in (ins.a, ins.b, ins.c, ins.flag):
            if nm not in addr and nm not in labels:
                raise TpcoreError(f"{where}: unknown cell or label {nm!r}")
        if ins.goto is not None and ins.goto not in labels:
            raise TpcoreError(f"{where}: unknown jump target {ins.goto!r}")
        if kinds[ins.flag] != "int":
            raise TpcoreError(f"{where}: flag cell {ins.flag!r} is not an integer cell")
        blk = fits[ins.f]
        rule = "sig" if blk.params.get("N") else SHAPE_RULES.get(ins.f, "same")
        A, B, Cs = shapes[ins.a], shapes[ins.b], shapes[ins.c]
        if max(A + B + Cs) > d:
            raise TpcoreError(f"{where}: operand shapes {A}, {B}, {Cs} exceed d = {d}")
        fit_inputs = blk.params.get("dx", 1) if rule == "sig" else None
        want = _result_shape(rule, A, B, fit_inputs)
        if rule == "code" and not (kinds[ins.a] == kinds[ins.b] == kinds[ins.c] == "code"):
            raise TpcoreError(f"{where}: ptr works on code cells only")
        if want is None or (rule != "code" and want != Cs):
            raise TpcoreError(f"{where}: {ins.f} of shapes {A} and {B} gives {want}, but the "
                              f"result cell {ins.c!r} has shape {Cs}")
        if kinds[ins.c] == "int" and not (ins.f in ("add", "sub") and kinds[ins.a] == "int"
                                          and kinds[ins.b] == "int"):
            raise TpcoreError(f"{where}: integer cell {ins.c!r} may only be written by add/sub "
                              "of integer cells")
        target = labels[ins.goto] if ins.goto is not None else col + i + 1
        if target >= n:
            raise TpcoreError(f"{where}: falls off the end of the program")
        words.append({"a": _address(ins.a, addr, labels), "b": _address(ins.b, addr, labels),
                      "c": _address(ins.c, addr, labels), "m": tk.names.index(ins.f),
                      "flag": addr[ins.flag], "p": target, "wa": A[1], "wb": B[1],
                      "wc": Cs[1]})
    machine = build_machine(tk, n, m, lam)
    X0 = _punchcard(machine, program, addr, labels, words)
    return Compiled(program, machine, X0, addr, labels, words)


def _address(name: str, addr: dict[str, int], labels: dict[str, int]) -> int:
    return addr[name] if name in addr else labels[name]


def _word_column(machine: FleqMachine, w: dict[str, Any]) -> np.ndarray:
    """Instruction fields as the ``instr`` rows of one column."""
    L = address_bits(machine.n)
    Lm = address_bits(len(machine.tk.blocks))
    hs = field_heights(L, Lm)
    parts = []
    for f in FIELDS:
        if f in ("wa", "wb", "wc"):
            parts.append(np.array([float(w.get(f, 0))]))
        else:
            parts.append(encode_address([int(w.get(f, 0))], hs[f])[:, 0])
    return np.concatenate(parts)


def _punchcard(machine: FleqMachine, program: Program, addr: dict[str, int],
               labels: dict[str, int], words: list[dict[str, Any]]) -> np.ndarray:
    rows, s, d, n = machine.rows, machine.s, machine.d, machine.n
    L = address_bits(n)
    X = np.zeros((rows.size, n))
    X[rows["one"]] = 1.0
    X[rows["scr"], :s] = 1.0
    X[rows["enc"], s:] = encode_address(np.arange(s, n), L)
    start = s + machine.m
    X[rows["pc"], :s] = encode_address([start], L)
    for r in range(3):
        cols = np.arange(r * d, (r + 1) * d)
        X[rows["off"][:, None], cols] = encode_address(np.arange(d), L)
        X[rows["reg"][r], cols] = 1.0
        X[rows["idx"][0], cols] = np.arange(d)
    for b in machine.tk.blocks:
        X[machine.blockmap[b.name], :s] = b.initial()[:, :s]
    for c in program.cells.values():
        a = addr[c.name]
        if c.kind == "code":
            X[rows["instr"], a] = _word_column(machine, _code_fields(c, addr, labels, words))
        else:
            h, w = c.value.shape
            X[rows["data"][:h, None], np.arange(a, a + w)] = c.value
    for i, w in enumerate(words):
        X[rows["instr"], start + i] = _word_column(machine, w)
    return X


def _code_fields(c: Cell, addr: dict[str, int], labels: dict[str, int],
                 words: list[dict[str, Any]]) -> dict[str, Any]:
    """Fields of a code cell: a copy of a labelled instruction, or the given fields."""
    if "copy_of" in c.code:
        first = labels["_halt"] - (len(words) - 1)
        return dict(words[labels[c.code["copy_of"]] - first])
    return {f: (addr.get(v, v) if isinstance(v, str) else v) for f, v in c.code.items()}


@dataclass
class FleqRun:
    """Result of :func:`execute`: final punchcard, steps and the PC after every step."""

    X: Any
    steps: int
    pcs: list[np.ndarray]
    halted: bool


def decode_pc(machine: FleqMachine, X: Any) -> np.ndarray:
    """PC (absolute column) of each program: ``(B,)`` or scalar array."""
    return decode_unsigned(X[..., machine.rows["pc"], :1])[..., 0]


def read_cell(comp: Compiled, X: Any, name: str) -> np.ndarray:
    """The value of a cell decoded from ``X`` (``(..., h, w)`` host array)."""
    c = comp.program.cells[name]
    h, w = c.value.shape
    a = comp.addr[name]
    return to_host(X[..., comp.machine.rows["data"][:h], a:a + w])


def execute(comp: Compiled, X: Any | None = None, max_steps: int = 10_000,
            dtype: Any = np.float64) -> FleqRun:
    """Loop the machine until every program sits on its halting instruction; a PC outside the
    instructions (a broken run, e.g. in float32) or the step limit raises ``TpcoreError``."""
    xp = get_xp()
    machine = comp.machine
    X = xp.asarray(comp.X0 if X is None else X, dtype=dtype)
    layers = machine.layer_objects(xp, dtype)
    pcs = []
    for step in range(1, max_steps + 1):
        for lay in layers:
            X, _ = layer_forward(X, lay)
        pc = decode_pc(machine, X)
        pcs.append(pc)
        if np.all(pc == comp.halt):
            return FleqRun(X, step, pcs, True)
        if np.any((pc < machine.s + machine.m) | (pc >= machine.n)):
            raise TpcoreError(f"FLEQ run lost its program counter at step {step}: PC "
                              f"{pc.tolist()} is outside the instructions "
                              f"[{machine.s + machine.m}, {machine.n})")
    raise TpcoreError(f"FLEQ run reached the step limit {max_steps} at PC {pcs[-1].tolist()}")


def batch_punchcards(comp: Compiled, values: dict[str, np.ndarray]) -> np.ndarray:
    """``B`` copies of the punchcard with cells replaced: ``values[name]: (B, h, w)``."""
    B = len(next(iter(values.values())))
    X = np.repeat(comp.X0[None], B, axis=0)
    rows = comp.machine.rows
    for name, v in values.items():
        v = np.asarray(v, dtype=np.float64)
        v = v.reshape(B, 1, 1) if v.ndim == 1 else v
        h, w = comp.program.cells[name].value.shape
        if v.shape[1:] != (h, w):
            raise TpcoreError(f"cell {name!r} has shape {(h, w)}; got values of {v.shape[1:]}")
        a = comp.addr[name]
        X[:, rows["data"][:h, None], np.arange(a, a + w)] = v
    return X


# ----------------------------------------------------------------------------------------------
# Reference interpreter


def interpret_steps(comp: Compiled,
                    fns: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]
                    ) -> Iterator[tuple[int, np.ndarray]]:
    """Run the program with exact NumPy functions ``fns[name](A, B)`` on the same memory layout
    (pointer arithmetic on code cells included); yields ``(pc, data)`` after every step, where
    ``data: (d, n)`` holds the cell values column by column. Stops after the halting step."""
    d, s = comp.machine.d, comp.machine.s
    n = comp.machine.n
    L = address_bits(n)
    data = np.zeros((d, n))
    code: dict[int, dict[str, Any]] = {}
    start = s + comp.machine.m
    for c in comp.program.cells.values():
        a = comp.addr[c.name]
        if c.kind == "code":
            code[a] = _code_fields(c, comp.addr, comp.labels, comp.words)
        else:
            h, w = c.value.shape
            data[:h, a:a + w] = c.value
    for i, w in enumerate(comp.words):
        code[start + i] = dict(w)
    pc = start
    while True:
        w = code[pc]
        f = comp.machine.tk.names[w["m"]]
        if f == "ptr":
            new = dict(code[w["a"]])
            for k in ("a", "b", "c"):
                new[k] = (new[k] + code[w["b"]][k]) % (1 << L)
            code[w["c"]] = new
        else:
            A = data[:, w["a"]:w["a"] + w["wa"]].copy()
            B = data[:, w["b"]:w["b"] + w["wb"]].copy()
            out = fns[f](A, B)
            data[:, w["c"]:w["c"] + w["wc"]] = 0.0
            data[:out.shape[0], w["c"]:w["c"] + w["wc"]] = out[:, :w["wc"]]
        pc = w["p"] if data[0, w["flag"]] <= 0 else pc + 1
        yield pc, data.copy()
        if pc == comp.halt:
            return


def interpret(comp: Compiled, fns: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]],
              max_steps: int = 10_000) -> tuple[dict[str, np.ndarray], int]:
    """:func:`interpret_steps` to the end: final non-code cells and the number of steps."""
    for step, (pc, data) in enumerate(interpret_steps(comp, fns), start=1):
        if pc == comp.halt:
            cells = {nm: data[:c.value.shape[0], comp.addr[nm]:comp.addr[nm] + c.value.shape[1]]
                     for nm, c in comp.program.cells.items() if c.kind != "code"}
            return cells, step
        if step >= max_steps:
            break
    raise TpcoreError(f"interpreter reached the step limit {max_steps} at PC {pc}")

"""Punchcard layout of the SUBLEQ machine: which rows and columns hold what.

Columns (0-based): ``0..s-1`` scratchpad (only column 0 is active; the others are inert padding
kept for the authors' file layout), ``s..s+m-1`` memory, ``s+m..n-1`` instructions, the last one
being EOF. Row blocks, top to bottom (``L`` address bits, ``N`` bits per integer):

=========  ======  ==========================================================================
block      height  contents
=========  ======  ==========================================================================
cmd_a/b/c  L each  instruction columns: ``p_a, p_b, p_c``; 0 elsewhere
mem        N       memory columns: two's-complement value; 0 elsewhere
scr_a      N       column 0: mem[a] of the current instruction
scr_b      N       column 0: mem[b] - mem[a] (the value written back)
cur_a/b/c  L each  column 0: the fetched instruction ``p_a, p_b, p_c``
pc         L       column 0: ``p_PC``
pc1        L       column 0: ``p_(PC+1)`` (temporary)
flag       1       column 0: 1 if mem[b] - mem[a] <= 0 (temporary)
enc        L       column 0: 0; column j >= 1: ``p_j``
ind        1       1 on column 0, 0 elsewhere (the active-scratchpad indicator)
tmp_cmd    3L      temporary: fetched instruction (zeroed by the FF that reads it)
tmp_a      N       temporary: read of mem[a], then the write-back average
tmp_b      N       temporary: read of mem[b]
=========  ======  ==========================================================================

The paper counts ``8 log n + 3N + 1`` rows (its Eq. 5 layout) and leaves out the temporaries that
its own read/write proofs use; :attr:`Layout.d` counts every row. Host-only code (NumPy).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tpcore.errors import TpcoreError
from tpcore.looped.encodings import address_bits
from tpcore.looped.weights import RowBlocks

MAX_BITS = 48
"""Most bits per integer: the gating constant (:attr:`Layout.gate`, about ``4 * 2^N``) must
leave float64 room for the +-1 bits beside it (at N = 49 the machine no longer reaches the EOF
fixed point)."""

MAX_COLUMNS = 4096
"""Most columns of ``X`` (scratchpad, memory and instructions; the examples use 15-80): the
dense machine's attention scores and probabilities hold ``6 n^2`` float64 values, 0.8 GB at
this size (:meth:`Layout.memory_estimate`)."""

BLOCKS = ("cmd_a", "cmd_b", "cmd_c", "mem", "scr_a", "scr_b", "cur_a", "cur_b", "cur_c", "pc",
          "pc1", "flag", "enc", "ind", "tmp_cmd", "tmp_a", "tmp_b")
TEMPORARY = ("pc1", "flag", "tmp_cmd", "tmp_a", "tmp_b")


@dataclass(frozen=True)
class Layout:
    """Row blocks and column ranges for ``s`` scratchpad, ``m`` memory, ``k`` instruction columns
    and ``N``-bit integers. ``rows[name]`` is a ``slice`` of rows."""

    s: int
    m: int
    k: int
    N: int
    rows: dict[str, slice] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name, value, low in (("s", self.s, 1), ("m", self.m, 2), ("k", self.k, 1),
                                 ("N", self.N, 2)):
            if value < low:
                raise TpcoreError(f"layout {name} = {value}; expected {name} >= {low}")
        if self.n > MAX_COLUMNS:
            raise TpcoreError(f"layout of {self.n} columns (s={self.s}, m={self.m} memory cells, "
                              f"k={self.k} instructions); expected at most {MAX_COLUMNS}")
        if self.N > MAX_BITS:
            raise TpcoreError(f"layout N = {self.N} bits per integer; expected 2 <= N <= "
                              f"{MAX_BITS} (the float64 machine is exact up to {MAX_BITS} bits)")
        L, N = self.L, self.N
        heights = {"cmd_a": L, "cmd_b": L, "cmd_c": L, "mem": N, "scr_a": N, "scr_b": N,
                   "cur_a": L, "cur_b": L, "cur_c": L, "pc": L, "pc1": L, "flag": 1, "enc": L,
                   "ind": 1, "tmp_cmd": 3 * L, "tmp_a": N, "tmp_b": N}
        blocks = RowBlocks()
        for name in BLOCKS:
            blocks.add(name, heights[name])
        object.__setattr__(self, "rows", blocks.slices)

    @property
    def n(self) -> int:
        """Number of columns."""
        return self.s + self.m + self.k

    @property
    def L(self) -> int:
        """Address bits."""
        return address_bits(self.n)

    @property
    def d(self) -> int:
        """Number of rows (model width), temporaries included."""
        return self.rows[BLOCKS[-1]].stop

    @property
    def d_paper(self) -> int:
        """The paper's row count ``8L + 3N + 1`` (no temporaries)."""
        return 8 * self.L + 3 * self.N + 1

    @property
    def gate(self) -> float:
        """The gating constant ``C`` of the machine's gated units: above every pre-activation a
        gate must silence (adder sums reach ``2^(bits+1)``)."""
        return float(4 * 2 ** max(self.N, self.L) + 8)

    @property
    def first_instruction(self) -> int:
        return self.s + self.m

    @property
    def eof(self) -> int:
        """Column of the EOF instruction (the last column)."""
        return self.n - 1

    def memory_estimate(self, batch: int = 1, sparse: bool = False, trace_steps: int = 0) -> int:
        """Bytes of the largest arrays a run allocates (float64; a bound): the weights of at most
        8 layers (2 heads with ``V: (d, d)``, FF hidden width at most ``4 d``), per program the
        attention scores and probabilities of both heads (``n x n``, or ``n x 1`` on the sparse
        path, where column 0 alone attends globally) and a dozen ``(d, n)`` arrays, and a trace
        of ``trace_steps`` memories."""
        d, n = self.d, self.n
        keys = 1 if sparse else n
        weights = 8 * 14 * d * d
        per_program = 6 * n * keys + 12 * d * n
        return 8 * (weights + batch * per_program + 2 * trace_steps * (self.m + 8))

    def r(self, name: str, i: int = 0) -> int:
        """Row index of bit ``i`` of block ``name``."""
        sl = self.rows[name]
        if not 0 <= i < sl.stop - sl.start:
            raise IndexError(f"block {name} has {sl.stop - sl.start} rows; asked for row {i}")
        return sl.start + i

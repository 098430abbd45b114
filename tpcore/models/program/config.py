"""The hyper-parameters of a Transformer Program: :class:`ProgramConfig`."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tpcore.errors import TpcoreError
from tpcore.models.hooks import LensNames
from tpcore.models.program.layout import AttnGateLayout


@dataclass
class ProgramConfig(LensNames):
    """Hyper-parameters of a Transformer Program.

    ``vocab_size``: token ids ``0 .. V-1``; ``max_len``: longest sequence (BOS/EOS included);
    ``n_classes``: output classes, of which ``masked_classes`` are never predicted. Head and MLP
    counts are per layer. ``k``: cardinality of MLP outputs and learned embedding variables
    (0: the stream width ``d = max(V, max_len, k)``; with learned embeddings ``V`` does not count).
    ``n_embed_vars > 0`` replaces the one-hot ``tokens`` by that many learned variables.
    ``gate_tau``: the read gates (of heads, numerical values and MLPs) are sampled at
    ``gate_tau`` times the training temperature ``tau``, every other choice at ``tau``.
    """

    vocab_size: int
    max_len: int
    n_classes: int
    n_layers: int = 2
    n_cat_heads: int = 2
    n_num_heads: int = 2
    n_cat_mlps: int = 1
    n_num_mlps: int = 1
    k: int = 0
    d_mlp: int = 64
    causal: bool = False
    n_embed_vars: int = 0
    masked_classes: tuple[int, ...] = ()
    init_std: float = 1.0
    dtype: str = "float32"
    seed: int = 0
    gate_tau: float = 1.0

    def __post_init__(self) -> None:
        self.masked_classes = tuple(int(c) for c in self.masked_classes)
        if not (math.isfinite(self.gate_tau) and self.gate_tau > 0):
            raise TpcoreError(f"gate_tau must be a finite number > 0, got {self.gate_tau}")
        for name in ("vocab_size", "max_len", "n_classes", "n_layers"):
            if getattr(self, name) < 1:
                raise TpcoreError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("n_cat_heads", "n_num_heads", "n_cat_mlps", "n_num_mlps", "k",
                     "n_embed_vars"):
            if getattr(self, name) < 0:
                raise TpcoreError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.d_mlp < 1:
            raise TpcoreError(f"d_mlp must be >= 1, got {self.d_mlp}")
        bad = [c for c in self.masked_classes if not 0 <= c < self.n_classes]
        if bad:
            raise TpcoreError(f"masked class {bad[0]} outside 0..{self.n_classes - 1}")
        if self.n_embed_vars and self.k < 2:
            raise TpcoreError("learned embeddings (n_embed_vars > 0) need k >= 2 values each")

    @property
    def width(self) -> int:
        """``d``: the common width of categorical variables."""
        v = 0 if self.n_embed_vars else self.vocab_size
        return max(v, self.max_len, self.k)

    @property
    def out_k(self) -> int:
        """Cardinality of MLP outputs (and learned embedding variables)."""
        return self.k or self.width

    @property
    def attn_layout(self) -> AttnGateLayout:
        """The rows of each layer's ``attn_gates``."""
        return AttnGateLayout(self.n_cat_heads, self.n_num_heads)

    def n_parameters(self) -> int:
        """An upper bound on the number of parameters (every layer counted with the last
        layer's ``m`` categorical and ``p`` numerical variables): per layer the read gates,
        the ``d x d`` predicates and the MLPs' weights; the learned embeddings; the
        classifier over all ``m`` one-hots of width ``d`` and ``p`` scalars."""
        d, k, L, D = self.width, self.out_k, self.n_layers, self.d_mlp
        hc, hn, mc, mn = self.n_cat_heads, self.n_num_heads, self.n_cat_mlps, self.n_num_mlps
        m, p = 2 + self.n_embed_vars + L * (hc + mc + mn), 1 + L * hn
        layer = (self.attn_layout.rows * m + hn * p + (hc + hn) * d * d + 2 * mc * (m + hc)
                 + 2 * mn * (p + hn) + mc * (2 * d * D + D + D * k + k)
                 + mn * (3 * D + D * k + k))
        return (L * layer + self.vocab_size * self.n_embed_vars * k
                + (m * d + p + 1) * self.n_classes)

    def memory_estimate(self, batch: int) -> int:
        """Bytes of the largest arrays that training this model on batches of ``batch``
        sequences allocates (float32; a bound, not a measurement). The one estimate of a
        program model's training memory, which its callers add their own data to and check
        before any work (:func:`tpcore.limits.check_memory`).

        Parameters (:meth:`n_parameters`) with their gradients and two Adam moments; one
        forward's activations, kept for the backward, and as many again for their gradients:
        per token the stream (every categorical variable one-hot of width ``d``, and the
        classifier's copy), per head ``4 N^2`` (scores, noise, probabilities, cache) and its
        reads (a row of width ``d`` per read gate), per MLP its inputs, hidden units and
        outputs."""
        d, N, L, D = self.width, self.max_len, self.n_layers, self.d_mlp
        hc, hn, mc, mn = self.n_cat_heads, self.n_num_heads, self.n_cat_mlps, self.n_num_mlps
        m = 2 + self.n_embed_vars + L * (hc + mc + mn)
        per_token = 2 * m * d + L * ((hc + hn) * 4 * N + self.attn_layout.rows * d
                                     + (mc + mn) * (3 * d + 2 * D))
        return 4 * 4 * self.n_parameters() + 2 * 4 * batch * N * per_token

"""Counting modules for Transformer Programs (Menon & Beloglazov, "Modular Counts, Smarter
Programs"): two :class:`~tpcore.models.program.StreamExtension` s that append numerical
variables computed from the tokens, and :class:`CountingProgramModel`, a Transformer Program
carrying them.

Notation: ``x: (B, N)`` token ids in ``0 .. V-1``, ``pad: (B, N)`` True at padding (padding is
never counted and its features are 0).

- :class:`PrefixSumCounts` (before layer 0, no parameters): ``P[t, v] = #{i < t : x_i = v}``,
  one numerical variable ``prefix_count_{v}`` per token id ``v``, computed as
  ``cumsum(onehot(x)) - onehot(x)`` along the sequence.
- :class:`RunningCounts` (before layer 0, no parameters): ``r[t] = #{i <= t : x_i = x_t}``,
  one numerical variable ``running_count``: the running count of the position's own token,
  itself included. This is what the counting paper's released code feeds the model as its
  PrefixSumCounts (one gathered column of ``cumsum(onehot(x))``), where the paper's text
  defines the per-token counts above; both are offered.
- :class:`SparseExpertCountingNetwork` (after layer 0's MLPs): with the sequence histogram
  ``h[v] = #{i : x_i = v}`` and ``n = sum_v h[v]`` (every non-pad token, framing tokens included),
  five fixed experts per position ``t``: ``E1 = n`` (total count), ``E2 = h[x_t]`` (count of the
  current token), ``E3 = [h[x_t] = max_v h[v]]`` (most frequent), ``E4 = [h[x_t] = 1]`` (seen
  once), ``E5 = h[x_t] / n`` (relative frequency). A gate ``alpha = GumbelSoftmax(W h + b; tau)``
  (``W: (5, V)``, ``b: (5,)``; one sample per sequence, since ``h`` is the same at every
  position) mixes them: ``y_t = sum_i alpha_i E_i(t)``, one numerical variable
  ``expert_count``. Discretely the gate is ``argmax(W h + b)``: a readable choice of one expert
  per sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tpcore.backend import Array, get_xp, matmul, to_host
from tpcore.counts import (
    EXPERTS,
    expert_features,
    length_rule,
    only_expert,
    prefix_counts,
    running_counts,
)
from tpcore.errors import TpcoreError
from tpcore.models.program import ProgramConfig, ProgramModel, StreamExtension, ops
from tpcore.nn.module import Parameter
from tpcore.programs import ir
from tpcore.programs.source.sections import EXPERT_CODE, rule_text


class PrefixSumCounts(StreamExtension):
    """Per-position counts of each token id strictly before the position (no parameters)."""

    def __init__(self, vocab_size: int, dtype: str = "float32"):
        self.vocab_size, self.dtype = vocab_size, dtype
        self.name, self.after = "prefix_counts", -1
        self.outputs = tuple(f"prefix_count_{v}" for v in range(vocab_size))

    def forward(self, tokens: Array, pad: Array | None, noise: Any, tau: float | None
                ) -> tuple[Array, None]:
        """``(V, B, N)``: variable ``v`` is ``P[:, :, v]``."""
        return prefix_counts(tokens, self.vocab_size, pad, self.dtype).transpose(2, 0, 1), None

    def backward(self, dvalues: Array, cache: None) -> None:
        """No parameters and integer inputs: nothing to accumulate."""

    def program_modules(self, vocab: Sequence[str]) -> list[ir.ProgramModule]:
        """A prefix count of token ``vocab[v]`` for each ``prefix_count_{v}``."""
        return [ir.PrefixCount(out, vocab[v], out) for v, out in enumerate(self.outputs)]


class RunningCounts(StreamExtension):
    """The running count of each position's own token, itself included (no parameters)."""

    def __init__(self, vocab_size: int, dtype: str = "float32"):
        self.vocab_size, self.dtype = vocab_size, dtype
        self.name, self.after, self.outputs = "running_counts", -1, ("running_count",)

    def forward(self, tokens: Array, pad: Array | None, noise: Any, tau: float | None
                ) -> tuple[Array, None]:
        """``(1, B, N)``: ``r[b, t]``."""
        return running_counts(tokens, self.vocab_size, pad, self.dtype)[None], None

    def backward(self, dvalues: Array, cache: None) -> None:
        """No parameters and integer inputs: nothing to accumulate."""

    def program_modules(self, vocab: Sequence[str]) -> list[ir.ProgramModule]:
        """One running-count module."""
        return [ir.RunningCount(self.outputs[0], self.outputs[0])]


class SparseExpertCountingNetwork(StreamExtension):
    """The five counting experts mixed by a Gumbel-softmax gate on the histogram (module
    docstring). ``w: (5, V)``, ``b: (5,)``."""

    def __init__(self, vocab_size: int, after: int, gen: np.random.Generator, std: float,
                 dtype: str = "float32"):
        xp = get_xp()
        self.vocab_size, self.dtype = vocab_size, dtype
        self.name, self.after, self.outputs = "experts", after, ("expert_count",)
        self.w = Parameter(xp.asarray(gen.normal(0.0, std / vocab_size,
                                                 (len(EXPERTS), vocab_size)), dtype=dtype))
        self.b = Parameter(xp.asarray(gen.normal(0.0, std, len(EXPERTS)), dtype=dtype))

    def gate_logits(self, h: Array) -> Array:
        """``z = h W^T + b``: ``(B, 5)``."""
        return matmul(h, self.w.data.T) + self.b.data

    def choice(self, tokens: Array, pad: Array | None = None) -> Array:
        """The discrete gate: index of the chosen expert per sequence, ``(B,)``."""
        h, _ = expert_features(tokens, self.vocab_size, pad, self.dtype)
        return self.gate_logits(h).argmax(axis=1)

    def host_gate(self) -> tuple[np.ndarray, np.ndarray]:
        """``W: (5, V)`` and ``b: (5,)`` as host float64 arrays (the model's values, exactly)."""
        return (np.asarray(to_host(self.w.data), dtype=np.float64),
                np.asarray(to_host(self.b.data), dtype=np.float64))

    def forward(self, tokens: Array, pad: Array | None, noise: Any, tau: float | None
                ) -> tuple[Array, tuple]:
        """``y = sum_i alpha_i E_i``: ``(1, B, N)``; ``alpha`` relaxed at ``tau`` (argmax when
        ``tau`` is None)."""
        h, e = expert_features(tokens, self.vocab_size, pad, self.dtype)
        z = self.gate_logits(h)
        alpha, gate = ops.sample(z, noise(z.shape), tau)
        y = (e * alpha.T[:, :, None]).sum(axis=0)
        return y[None], (h, e, gate)

    def backward(self, dvalues: Array, cache: tuple) -> None:
        """``dalpha_bi = sum_t dy_bt E_i(b, t)``; ``dz`` = Gumbel-softmax backward of
        ``dalpha``; ``dW = dz^T h``, ``db = sum_b dz``."""
        h, e, gate = cache
        dalpha = (e * dvalues[0][None]).sum(axis=2).T
        dz = ops.sample_backward(dalpha, gate)
        self.w.accumulate(matmul(dz.T, h))
        self.b.accumulate(dz.sum(axis=0))

    def program_modules(self, vocab: Sequence[str]) -> list[ir.ProgramModule]:
        """The discrete gate as an expert-count module: ``W``, ``b`` (:meth:`host_gate`) and
        the float type relative frequencies are divided in."""
        return [ir.ExpertCount(self.name, self.outputs[0], *self.host_gate(), self.dtype)]


@dataclass
class CountingConfig(ProgramConfig):
    """A :class:`~tpcore.models.program.ProgramConfig` plus the counting modules:
    ``prefix_counts`` (PrefixSumCounts before layer 0, as the paper's text defines it),
    ``running_counts`` (:class:`RunningCounts` before layer 0, as its released code computes
    it) and ``experts`` (the expert network after layer ``expert_after``'s MLPs; the paper: 0,
    the first layer)."""

    prefix_counts: bool = False
    experts: bool = False
    expert_after: int = 0
    running_counts: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.experts and not 0 <= self.expert_after < self.n_layers:
            raise TpcoreError(f"expert_after must be in 0 .. {self.n_layers - 1}, got "
                              f"{self.expert_after}")

    @property
    def variant(self) -> str:
        """The :data:`VARIANTS` name of its modules (``custom`` for another mix)."""
        return next((v for v in VARIANTS if all(getattr(self, flag) == on for flag, on
                                                in variant_flags(v).items())), "custom")


VARIANTS = ("none", "prefix", "experts", "both", "running")
"""The counting modules a model carries: ``prefix`` (PrefixSumCounts as the paper's text
defines it), ``experts``, ``both`` (those two), ``running`` (:class:`RunningCounts`, the
PrefixSumCounts of the paper's released code)."""


def variant_flags(variant: str) -> dict[str, bool]:
    """``CountingConfig`` flags of a variant name."""
    if variant not in VARIANTS:
        raise TpcoreError(f"unknown counting variant {variant!r}; expected one of {VARIANTS}")
    return {"prefix_counts": variant in ("prefix", "both"),
            "experts": variant in ("experts", "both"),
            "running_counts": variant == "running"}


class CountingProgramModel(ProgramModel):
    """A Transformer Program with the counting modules its :class:`CountingConfig` asks for."""

    config_class = CountingConfig

    def make_extensions(self) -> list[StreamExtension]:
        cfg = self.config
        ext: list[StreamExtension] = []
        if cfg.prefix_counts:
            ext.append(PrefixSumCounts(cfg.vocab_size, cfg.dtype))
        if cfg.running_counts:
            ext.append(RunningCounts(cfg.vocab_size, cfg.dtype))
        if cfg.experts:
            gen = np.random.default_rng([cfg.seed, 5])
            ext.append(SparseExpertCountingNetwork(cfg.vocab_size, cfg.expert_after, gen,
                                                   cfg.init_std, cfg.dtype))
        return ext

    def astype(self, dtype: Any) -> CountingProgramModel:
        super().astype(dtype)
        for e in self.extensions:
            e.dtype = np.dtype(dtype).name
        return self

    @property
    def expert_network(self) -> SparseExpertCountingNetwork | None:
        return next((e for e in self.extensions
                     if isinstance(e, SparseExpertCountingNetwork)), None)


def framing_and_content(vocab: list[str] | tuple[str, ...]) -> tuple[dict[int, int], list[int]]:
    """Framing counts (``<s>``, ``</s>``: once per input) and content ids of a task vocabulary
    (``<...>`` names are specials; ``<pad>`` is never counted)."""
    framing = {i: 1 for i, t in enumerate(vocab) if t in ("<s>", "</s>")}
    return framing, [i for i, t in enumerate(vocab) if not t.startswith("<")]


def gate_rule(net: SparseExpertCountingNetwork, vocab: list[str] | tuple[str, ...],
              max_len: int) -> dict[int, str | None]:
    """Content length ``L`` -> the expert the discrete gate picks for every input of that
    length (None: it depends on the input), for every ``L >= 1`` that fits in ``max_len``."""
    framing, content = framing_and_content(vocab)
    return length_rule(*net.host_gate(), framing, content,
                       range(1, max_len - sum(framing.values()) + 1))


def describe(model: CountingProgramModel, vocab: list[str] | tuple[str, ...]) -> str:
    """The counting modules of a trained model as readable Python-like lines: the prefix counts
    with token names and the discrete gate as an expert choice per input length."""
    lines = []
    for e in model.extensions:
        if isinstance(e, PrefixSumCounts):
            names = ", ".join(f"prefix_count_{i} = {t!r}" for i, t in enumerate(vocab))
            lines.append(f"# PrefixSumCounts (before layer 0), for each token v ({names}):")
            lines.append("prefix_count_v = [tokens[:t].count(v) for t in range(len(tokens))]")
        elif isinstance(e, SparseExpertCountingNetwork):
            lines.append(f"# SparseExpertCountingNetwork (after layer {e.after}):")
            lines.append("hist = Counter(tokens)")
            rule = gate_rule(e, vocab, model.config.max_len)
            lines += [f"# {text}" for text in rule_text(rule)]
            if only_expert(rule) is not None:
                lines.append(f"expert_count = [{EXPERT_CODE[only_expert(rule)]} "
                             "for t in range(len(tokens))]")
    return "\n".join(lines)

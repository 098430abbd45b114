"""Transformer Program model: a transformer with a disentangled residual stream whose every choice
is a relaxed categorical sample, so that its argmax is a program.

The stream is a list of named variables. Categorical variables are one-hots (relaxed while
training) padded to a common width ``d``; numerical variables are scalars. Inputs: ``tokens``
(fixed one-hot, or ``n_embed_vars`` learned factored variables ``embed_0 ...``), ``positions``
(one-hot of the position) and ``ones`` (numerical, all 1). Each layer runs, reading the stream
as it stands at the start of the layer,

- ``n_cat_heads`` categorical heads ``attn_{l}_{h}`` (read gates for query, key and value over the
  categorical variables, a predicate matrix, closest-match hard attention with default to BOS;
  output: the value copied from the attended position, a new categorical variable);
- ``n_num_heads`` numerical heads ``num_attn_{l}_{h}`` (categorical query and key, a numerical
  value variable; output ``sum_j S_ij value_j``, a new numerical variable);

then, reading the stream after the heads,

- ``n_cat_mlps`` categorical MLPs ``mlp_{l}_{i}`` (two categorical inputs) and ``n_num_mlps``
  numerical MLPs ``num_mlp_{l}_{i}`` (two numerical inputs), each a new categorical variable of
  width ``k``.

A linear classifier reads every variable of the final stream. ``forward(tokens, pad, rng, tau)``
trains with Gumbel-softmax samples at temperature ``tau``; with ``tau=None`` it is the *discrete
model*: argmax gates, predicates, attention and MLP outputs, no noise. :meth:`ProgramModel.discrete`
returns that model as plain data (:class:`DiscreteProgram`), which is what program extraction
reads. Exact semantics of every module: ``tpcore/models/program_ops.py``.

Hook points (:mod:`tpcore.models.hooks`): every variable by its name (``tokens``, ``positions``,
``attn_0_1_outputs``, ...; categorical ``(batch, pos, value)`` of width ``d``, numerical
``(batch, pos)``), as it enters the stream, and every head's pattern ``attn_0_1.pattern``,
``num_attn_0_0.pattern`` (``(batch, query_pos, key_pos)``: the attention of a categorical head,
the masked scores a numerical head sums with).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tpcore.models.program_ops as ops
from tpcore.backend import Array, get_xp, scatter_add, to_host
from tpcore.errors import TpcoreError
from tpcore.models.hooks import Hooked, LensNames
from tpcore.nn.hookpoints import NO_HOOKS, Hooks
from tpcore.nn.module import Module, Parameter
from tpcore.nn.relax import gumbel_noise
from tpcore.programs import ir


@dataclass(frozen=True)
class AttnGateLayout:
    """The rows of a layer's ``attn_gates``: the query, key and value gates of the ``cat_heads``
    categorical heads, then the query and key gates of the ``num_heads`` numerical heads (their
    value gates read the numerical stream: ``value_gates``)."""

    cat_heads: int
    num_heads: int

    @property
    def rows(self) -> int:
        return 3 * self.cat_heads + 2 * self.num_heads

    @property
    def cat_query(self) -> slice:
        return slice(0, self.cat_heads)

    @property
    def cat_key(self) -> slice:
        return slice(self.cat_heads, 2 * self.cat_heads)

    @property
    def cat_value(self) -> slice:
        return slice(2 * self.cat_heads, 3 * self.cat_heads)

    @property
    def num_query(self) -> slice:
        return slice(3 * self.cat_heads, 3 * self.cat_heads + self.num_heads)

    @property
    def num_key(self) -> slice:
        return slice(3 * self.cat_heads + self.num_heads, self.rows)


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


@dataclass(frozen=True)
class VarSpec:
    """A stream variable: ``name``, ``kind`` (categorical / numerical), ``width`` (number of
    meaningful one-hot indices; 1 for numerical), ``slot`` (index in its stream) and the module
    that wrote it (None for inputs)."""

    name: str
    kind: str
    width: int
    slot: int
    source: str | None = None


@dataclass
class DiscreteHead:
    """An attention head after argmax. ``predicate[a] = b``: query value ``a`` matches key value
    ``b`` (exactly one per row). ``value`` is categorical for a categorical head (the output copies
    it) and numerical for a numerical head (the output sums it over matching keys)."""

    name: str
    kind: str
    layer: int
    query: str
    key: str
    value: str
    output: str
    predicate: np.ndarray


@dataclass
class DiscreteMlp:
    """An MLP after argmax of its read gates: ``out = argmax(relu([a; b] W1 + b1) W2 + b2)`` where
    ``a, b`` are its two inputs (one-hots of width ``d`` for a categorical MLP, scalars for a
    numerical one). Weights: ``w1 (I, D)``, ``b1 (D,)``, ``w2 (D, k)``, ``b2 (k,)``, float64."""

    name: str
    kind: str
    layer: int
    inputs: tuple[str, str]
    output: str
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray

    def lookup(self, a: np.ndarray, b: np.ndarray, width: int,
               dtype: Any = "float64") -> np.ndarray:
        """Output indices for input values ``a, b`` (indices of categorical inputs, numbers of
        numerical ones), any equal shapes; ``width`` = ``d`` for categorical inputs. Computed in
        the float type ``dtype`` (the model's, for outputs equal to its own)."""
        w1, b1, w2, b2 = (x.astype(dtype) for x in (self.w1, self.b1, self.w2, self.b2))
        a, b = np.asarray(a), np.asarray(b)
        if self.kind == "categorical":
            eye = np.eye(width, dtype=dtype)
            x = np.concatenate([eye[a], eye[b]], axis=-1)
        else:
            x = np.stack([a, b], axis=-1).astype(dtype)
        h = np.maximum(x @ w1 + b1, 0)
        return np.argmax(h @ w2 + b2, axis=-1)


@dataclass
class DiscreteProgram:
    """The discrete model as data: the variables in stream order, the modules in execution order
    (per layer: categorical heads, numerical heads, categorical MLPs, numerical MLPs), a learned
    embedding table when present (``embedding[v, i]``: value of variable ``embed_i`` for token
    ``v``) and the classifier ``logits = bias + sum_f W_f[value of f]`` (categorical ``f``,
    ``W_f: (width_f, C)``) ``+ W_f[0] * f`` (numerical, ``W_f: (1, C)``); masked classes never
    win. ``extensions``: the model's stream extensions, which describe their own program
    modules (:meth:`StreamExtension.program_modules`)."""

    variables: list[VarSpec]
    modules: list[DiscreteHead | DiscreteMlp]
    classifier_weights: dict[str, np.ndarray]
    classifier_bias: np.ndarray
    masked_classes: tuple[int, ...]
    width: int
    causal: bool
    max_len: int
    embedding: np.ndarray | None = None
    extensions: list[StreamExtension] = field(default_factory=list)


class ProgramLayer(Module):
    """One layer's parameters (all logits of relaxed choices, plus MLP weights).

    ``attn_gates: (3 Hc + 2 Hn, m)`` over the ``m`` categorical variables before the layer, rows
    as :class:`AttnGateLayout` orders them;
    ``value_gates: (Hn, p)`` over the ``p`` numerical variables; ``cat_pred: (Hc, d, d)``,
    ``num_pred: (Hn, d, d)`` predicate logits (one categorical distribution per row);
    ``mlp_gates: (2 Mc, m + Hc)`` (first inputs of all MLPs, then second inputs) and
    ``num_mlp_gates: (2 Mn, p + Hn)``; MLP weights ``(M, I, D)``, ``(M, 1, D)``, ``(M, D, k)``,
    ``(M, 1, k)``.
    """

    def __init__(self, cfg: ProgramConfig, m: int, p: int, gen: np.random.Generator):
        xp, dt = get_xp(), cfg.dtype
        d, k, hc, hn, mc, mn = (cfg.width, cfg.out_k, cfg.n_cat_heads, cfg.n_num_heads,
                                cfg.n_cat_mlps, cfg.n_num_mlps)
        self.m, self.p = m, p

        def normal(*shape: int) -> Parameter:
            return Parameter(xp.asarray(gen.normal(0.0, cfg.init_std, shape), dtype=dt))

        def uniform(fan_in: int, *shape: int) -> Parameter:
            bound = 1.0 / math.sqrt(fan_in)
            return Parameter(xp.asarray(gen.uniform(-bound, bound, shape), dtype=dt))

        self.attn_gates = normal(cfg.attn_layout.rows, m)
        self.value_gates = normal(hn, p)
        self.cat_pred = normal(hc, d, d)
        self.num_pred = normal(hn, d, d)
        self.mlp_gates = normal(2 * mc, m + hc)
        self.num_mlp_gates = normal(2 * mn, p + hn)
        self.mlp_w1, self.mlp_b1 = uniform(2 * d, mc, 2 * d, cfg.d_mlp), uniform(2 * d, mc, 1,
                                                                                  cfg.d_mlp)
        self.mlp_w2, self.mlp_b2 = uniform(cfg.d_mlp, mc, cfg.d_mlp, k), uniform(cfg.d_mlp, mc,
                                                                                 1, k)
        self.num_w1, self.num_b1 = uniform(2, mn, 2, cfg.d_mlp), uniform(2, mn, 1, cfg.d_mlp)
        self.num_w2, self.num_b2 = uniform(cfg.d_mlp, mn, cfg.d_mlp, k), uniform(cfg.d_mlp, mn,
                                                                                 1, k)


def _through(fn: Any, x: Array, xn: Array, variables: list[VarSpec]) -> None:
    """Pass each variable of the streams ``x``, ``xn`` (or their gradients) through ``fn``
    (``hooks`` or ``hooks.grad``), writing back the ones it edits."""
    for v in variables:
        stream = x if v.kind == "categorical" else xn
        part = stream[v.slot]
        new = fn(v.name, part)
        if new is not part:
            stream[v.slot] = new


class StreamExtension(Module):
    """A module that appends numerical variables computed from the tokens alone (e.g. counts).

    ``name``: its module name; ``outputs``: the names of the numerical variables it appends;
    ``after``: where they enter the stream (``-1``: with the inputs, before layer 0; ``l``: after
    layer ``l``'s MLPs, so layers ``l + 1 ..`` and the classifier can read them). Subclasses
    implement ``forward(tokens, pad, noise, tau) -> (values (q, B, N), cache)`` (``noise(shape)``
    draws Gumbel noise or returns None; ``tau=None``: discrete mode) and
    ``backward(dvalues (q, B, N), cache)`` accumulating their own parameters' gradients.
    """

    name: str = "extension"
    outputs: tuple[str, ...] = ()
    after: int = -1

    def forward(self, tokens: Array, pad: Array | None, noise: Any, tau: float | None
                ) -> tuple[Array, Any]:
        raise NotImplementedError

    def backward(self, dvalues: Array, cache: Any) -> None:
        raise NotImplementedError

    def program_modules(self, vocab: Sequence[str]) -> list[ir.ProgramModule]:
        """The program IR modules that compute ``outputs`` in the discrete mode (one per output,
        host copies of any parameters), token ids named by ``vocab``."""
        raise TpcoreError(f"variable {self.outputs[0]!r} comes from module {self.name!r}, which "
                          "the program IR cannot express yet")


class ProgramModel(Hooked, Module):
    """The Transformer Program (see the module docstring). ``model.variables`` lists the stream
    variables (:class:`VarSpec`) in slot order; ``model.cache`` holds the last forward's
    intermediate values for the backward. Subclasses add :class:`StreamExtension` modules by
    overriding :meth:`make_extensions`."""

    config_class = ProgramConfig

    def __init__(self, cfg: ProgramConfig):
        self.config = cfg
        self.extensions: list[StreamExtension] = self.make_extensions()
        gen = np.random.default_rng(cfg.seed)
        xp, dt = get_xp(), cfg.dtype
        d, k = cfg.width, cfg.out_k
        self.variables: list[VarSpec] = []
        if cfg.n_embed_vars:
            self.embedding = Parameter(xp.asarray(
                gen.normal(0.0, cfg.init_std, (cfg.vocab_size, cfg.n_embed_vars, k)), dtype=dt))
            for i in range(cfg.n_embed_vars):
                self._add(f"embed_{i}", "categorical", k)
        else:
            self._add("tokens", "categorical", cfg.vocab_size)
        self._add("positions", "categorical", cfg.max_len)
        self._add("ones", "numerical", 1)
        self._add_extensions(-1)
        self.layers: list[ProgramLayer] = []
        for layer in range(cfg.n_layers):
            m, p = self.n_vars("categorical"), self.n_vars("numerical")
            self.layers.append(ProgramLayer(cfg, m, p, gen))
            for h in range(cfg.n_cat_heads):
                self._add(f"attn_{layer}_{h}_outputs", "categorical", d, f"attn_{layer}_{h}")
            for h in range(cfg.n_num_heads):
                self._add(f"num_attn_{layer}_{h}_outputs", "numerical", 1, f"num_attn_{layer}_{h}")
            for i in range(cfg.n_cat_mlps):
                self._add(f"mlp_{layer}_{i}_outputs", "categorical", k, f"mlp_{layer}_{i}")
            for i in range(cfg.n_num_mlps):
                self._add(f"num_mlp_{layer}_{i}_outputs", "categorical", k, f"num_mlp_{layer}_{i}")
            self._add_extensions(layer)
        n_feat = d * self.n_vars("categorical") + self.n_vars("numerical")
        bound = 1.0 / math.sqrt(n_feat)
        self.w_out = Parameter(xp.asarray(gen.uniform(-bound, bound, (n_feat, cfg.n_classes)),
                                          dtype=dt))
        self.b_out = Parameter(xp.zeros((cfg.n_classes,), dtype=dt))
        self.bias = ops.closest_bias(cfg.max_len, dt, xp)
        self.cache: dict[str, Any] = {}

    def astype(self, dtype: Any) -> ProgramModel:
        """Cast parameters, the position bias and the stream dtype (e.g. float64 for gradchecks)."""
        super().astype(dtype)
        self.config.dtype = np.dtype(dtype).name
        self.bias = self.bias.astype(dtype)
        return self

    def _add(self, name: str, kind: str, width: int, source: str | None = None) -> None:
        self.variables.append(VarSpec(name, kind, width, self.n_vars(kind), source))

    def make_extensions(self) -> list[StreamExtension]:
        """The model's stream extensions (none here)."""
        return []

    def _add_extensions(self, after: int) -> None:
        for e in self.extensions:
            if e.after == after:
                for name in e.outputs:
                    self._add(name, "numerical", 1, e.name)

    def _extension_slots(self) -> list[slice]:
        """Numerical-stream slots of each extension's outputs."""
        slot = {v.name: v.slot for v in self.variables if v.kind == "numerical"}
        return [slice(slot[e.outputs[0]], slot[e.outputs[0]] + len(e.outputs))
                for e in self.extensions]

    def n_vars(self, kind: str) -> int:
        """Number of variables of ``kind`` in the full stream."""
        return sum(v.kind == kind for v in self.variables)

    def variable_names(self, kind: str) -> list[str]:
        """Names of the ``kind`` variables in slot order."""
        return [v.name for v in self.variables if v.kind == kind]

    # ------------------------------------------------------------------ forward
    def check_tokens(self, tokens: Array) -> None:
        """Raise naming the offending value if a token id or the length is out of range."""
        cfg = self.config
        if tokens.ndim != 2:
            raise TpcoreError(f"tokens must be (B, N), got shape {tuple(tokens.shape)}")
        if tokens.shape[1] > cfg.max_len:
            raise TpcoreError(f"sequence length {tokens.shape[1]} exceeds the model's context "
                              f"max_len={cfg.max_len}")
        lo, hi = int(tokens.min()), int(tokens.max())
        if lo < 0 or hi >= cfg.vocab_size:
            bad = lo if lo < 0 else hi
            raise TpcoreError(f"token id {bad} outside the vocabulary 0..{cfg.vocab_size - 1}")

    def forward(self, tokens: Array, pad: Array | None = None, rng: Any = None,
                tau: float | None = None, hooks: Hooks | None = None,
                checked: bool = False) -> Array:
        """Logits ``(B, N, C)`` for ``tokens: (B, N)``; ``pad: (B, N)`` True at padding.

        ``tau`` given: training mode, Gumbel-softmax samples at temperature ``tau`` with noise
        from ``rng`` (``rng=None``: no noise, a plain softmax relaxation). ``tau=None``: the
        discrete model (argmax everywhere). ``hooks`` reads or edits variables and patterns
        (:meth:`hook_names`); the backward follows its edits. ``checked``: the caller has
        checked the tokens already (:meth:`check_tokens`), as a training loop does with its data
        once before the loop, so that no step waits for a GPU to read their range.
        """
        cfg, xp = self.config, get_xp()
        tokens, pad = xp.asarray(tokens), None if pad is None else xp.asarray(pad)
        if not checked:
            self.check_tokens(tokens)
        b, n = tokens.shape
        d, k, dt = cfg.width, cfg.out_k, cfg.dtype
        m_all, p_all = self.n_vars("categorical"), self.n_vars("numerical")

        def noise(shape: tuple[int, ...]) -> Array | None:
            return gumbel_noise(shape, rng, dt) if (rng is not None and tau is not None) else None

        x = xp.zeros((m_all, b, n, d), dtype=dt)
        xn = xp.zeros((p_all, b, n), dtype=dt)
        xn[0] = 1.0
        emb_cache = None
        if cfg.n_embed_vars:
            e, emb_cache = ops.sample(self.embedding.data, noise(self.embedding.shape), tau)
            x[: cfg.n_embed_vars, :, :, :k] = e[tokens].transpose(2, 0, 1, 3)
        else:
            x[0, xp.arange(b)[:, None], xp.arange(n)[None, :], tokens] = 1.0
        x[cfg.n_embed_vars or 1, :, xp.arange(n), xp.arange(n)] = 1.0
        ext_caches = []
        for e, s in zip(self.extensions, self._extension_slots()):
            xn[s], ec = e.forward(tokens, pad, noise, tau)
            ext_caches.append(ec)
        hooks = NO_HOOKS if hooks is None else hooks
        _through(hooks, x, xn, self._entering(-1))
        keys = xp.ones((b, n), dtype=bool) if pad is None else ~pad
        mask = keys[:, None, :]
        if cfg.causal:
            mask = mask & xp.tril(xp.ones((n, n), dtype=bool))[None]
        bias = ops.masked_bias(self.bias[:n, :n], mask)
        caches = [self._layer_forward(layer, x, xn, layer.m, layer.p, mask, bias, noise, tau,
                                      li, hooks) for li, layer in enumerate(self.layers)]
        logits = self._classify(x, xn)
        if cfg.masked_classes:
            logits[..., list(cfg.masked_classes)] = ops.MASKED_LOGIT
        self.cache = {"x": x, "xn": xn, "layers": caches, "tokens": tokens,
                      "emb": emb_cache, "ext": ext_caches, "hooks": hooks}
        return logits

    def _layer_forward(self, layer: ProgramLayer, x: Array, xn: Array, m: int, p: int,
                       mask: Array, bias: Array, noise: Any, tau: float | None, li: int,
                       hooks: Hooks) -> dict:
        """Run layer ``li`` reading variables ``x[:m]``, ``xn[:p]`` and writing its outputs into
        the next slots of ``x`` and ``xn`` in place (through their hook points); returns the
        cache for :meth:`_layer_backward`."""
        cfg = self.config
        hc, hn, mc, mn = cfg.n_cat_heads, cfg.n_num_heads, cfg.n_cat_mlps, cfg.n_num_mlps
        b, n, d = x.shape[1:]
        k = cfg.out_k
        c: dict[str, Any] = {"m": m, "p": p, "li": li}
        cat, num = self._written(li, "attn"), self._written(li, "num_attn")
        gate_tau = None if tau is None else tau * cfg.gate_tau
        c["pi_attn"], c["attn_gates"] = ops.sample(layer.attn_gates.data,
                                                   noise(layer.attn_gates.shape), gate_tau)
        r = ops.read_forward(x[:m], c["pi_attn"])
        rows = cfg.attn_layout
        if hc:
            pred, c["cat_pred"] = ops.sample(layer.cat_pred.data, noise(layer.cat_pred.shape), tau)
            x[m:m + hc], c["cat_attn"] = ops.cat_attention_forward(
                r[rows.cat_query], r[rows.cat_key], r[rows.cat_value], pred, mask, bias,
                noise((hc, b, n, n)), tau, hooks, [f"{v.source}.pattern" for v in cat])
        if hn:
            c["pi_value"], c["value_gates"] = ops.sample(layer.value_gates.data,
                                                         noise(layer.value_gates.shape), gate_tau)
            v = ops.read_forward(xn[:p], c["pi_value"])
            pred, c["num_pred"] = ops.sample(layer.num_pred.data, noise(layer.num_pred.shape), tau)
            xn[p:p + hn], c["num_attn"] = ops.num_attention_forward(
                r[rows.num_query], r[rows.num_key], v, pred, mask, hooks,
                [f"{v.source}.pattern" for v in num])
        _through(hooks, x, xn, cat + num)
        m, p = m + hc, p + hn
        if mc:
            c["pi_mlp"], c["mlp_gates"] = ops.sample(layer.mlp_gates.data,
                                                     noise(layer.mlp_gates.shape), gate_tau)
            r = ops.read_forward(x[:m], c["pi_mlp"]).reshape(2, mc, b * n, d)
            inp = r.transpose(1, 2, 0, 3).reshape(mc, b * n, 2 * d)
            y, c["mlp"] = ops.mlp_forward(inp, layer.mlp_w1.data, layer.mlp_b1.data,
                                          layer.mlp_w2.data, layer.mlp_b2.data,
                                          noise((mc, b * n, k)), tau)
            x[m:m + mc, ..., :k] = y.reshape(mc, b, n, k)
        if mn:
            c["pi_num_mlp"], c["num_mlp_gates"] = ops.sample(
                layer.num_mlp_gates.data, noise(layer.num_mlp_gates.shape), gate_tau)
            r = ops.read_forward(xn[:p], c["pi_num_mlp"]).reshape(2, mn, b * n)
            y, c["num_mlp"] = ops.mlp_forward(r.transpose(1, 2, 0).copy(), layer.num_w1.data,
                                              layer.num_b1.data, layer.num_w2.data,
                                              layer.num_b2.data, noise((mn, b * n, k)), tau)
            x[m + mc:m + mc + mn, ..., :k] = y.reshape(mn, b, n, k)
        _through(hooks, x, xn, self._written(li, "mlp") + self._written(li, "num_mlp"))
        _through(hooks, x, xn, self._entering(li))
        return c

    def _classify(self, x: Array, xn: Array) -> Array:
        """The classifier over every variable of the final stream, ``logits: (B, N, C)``:
        ``bias + sum_m X[m] W_m + sum_q Xn[q] w_q``, where ``W_m: (d, C)`` are the rows of
        ``w_out`` reading categorical variable ``m`` and ``w_q: (C,)`` the row reading numerical
        variable ``q`` (one product per variable, so the stream is read in its own layout)."""
        m, b, n, d = x.shape
        w = self.w_out.data
        logits = (x.reshape(m, b * n, d) @ w[: m * d].reshape(m, d, -1)).sum(axis=0)
        logits += xn.reshape(xn.shape[0], -1).T @ w[m * d:]
        logits += self.b_out.data
        return logits.reshape(b, n, -1)

    def _classify_backward(self, dlogits: Array, x: Array, xn: Array) -> tuple[Array, Array]:
        """Accumulate the classifier's gradients (``dW_m = X[m]^T dlogits``,
        ``dw_q = Xn[q] dlogits``, ``db`` summed over tokens) and return the streams' gradients
        ``dX[m] = dlogits W_m^T``, ``dXn[q] = dlogits w_q``, shaped like ``x`` and ``xn``."""
        m, b, n, d = x.shape
        w = self.w_out.data
        d2 = dlogits.reshape(b * n, -1)
        dw_cat = (x.reshape(m, b * n, d).swapaxes(-1, -2) @ d2).reshape(m * d, -1)
        self.w_out.accumulate(get_xp().concatenate([dw_cat, xn.reshape(xn.shape[0], -1) @ d2]))
        self.b_out.accumulate(d2.sum(axis=0))
        dx = (d2 @ w[: m * d].reshape(m, d, -1).swapaxes(-1, -2)).reshape(x.shape)
        dxn = (w[m * d:] @ d2.T).reshape(xn.shape)
        return dx, dxn

    # ------------------------------------------------------------------ backward
    def backward(self, dlogits: Array) -> None:
        """Accumulate every parameter's gradient from ``dlogits: (B, N, C)`` (after a training
        forward)."""
        cfg, c = self.config, self.cache
        if not c:
            raise TpcoreError("backward called before forward")
        x, xn = c["x"], c["xn"]
        if cfg.masked_classes:
            dlogits = dlogits.copy()
            dlogits[..., list(cfg.masked_classes)] = 0.0
        dx, dxn = self._classify_backward(dlogits, x, xn)
        for layer, lc in zip(reversed(self.layers), reversed(c["layers"])):
            self._layer_backward(layer, lc, x, xn, dx, dxn)
        _through(c["hooks"].grad, dx, dxn, self._entering(-1))
        for e, s, ec in zip(self.extensions, self._extension_slots(), c["ext"]):
            e.backward(dxn[s], ec)
        if cfg.n_embed_vars:
            (_, b, n, _), k, me = dx.shape, cfg.out_k, cfg.n_embed_vars
            de = dx[:me, ..., :k].transpose(1, 2, 0, 3).reshape(b * n, me * k)
            table = get_xp().zeros((cfg.vocab_size, me * k), dtype=de.dtype)
            table = scatter_add(table, c["tokens"].reshape(-1), de)
            self.embedding.accumulate(ops.sample_backward(table.reshape(self.embedding.shape),
                                                          c["emb"]))

    def _layer_backward(self, layer: ProgramLayer, c: dict, x: Array, xn: Array, dx: Array,
                        dxn: Array) -> None:
        """Reverse :meth:`_layer_forward`: read the gradients of the layer's outputs from
        ``dx, dxn`` and add the gradients of its inputs into them, in place."""
        cfg = self.config
        hc, hn, mc, mn = cfg.n_cat_heads, cfg.n_num_heads, cfg.n_cat_mlps, cfg.n_num_mlps
        b, n, d = x.shape[1:]
        k = cfg.out_k
        m, p, li = c["m"], c["p"], c["li"]
        ma, pa = m + hc, p + hn
        grad = self.cache["hooks"].grad
        _through(grad, dx, dxn, self._entering(li))
        _through(grad, dx, dxn, self._written(li, "mlp") + self._written(li, "num_mlp"))
        if mn:
            dy = dx[ma + mc:ma + mc + mn, ..., :k].reshape(mn, b * n, k)
            dr, dw1, db1, dw2, db2 = ops.mlp_backward(dy, c["num_mlp"])
            for prm, g in ((layer.num_w1, dw1), (layer.num_b1, db1), (layer.num_w2, dw2),
                           (layer.num_b2, db2)):
                prm.accumulate(g)
            dr = dr.transpose(2, 0, 1).reshape(2 * mn, b, n)
            dxr, dpi = ops.read_backward(dr, xn[:pa], c["pi_num_mlp"])
            dxn[:pa] += dxr
            layer.num_mlp_gates.accumulate(ops.sample_backward(dpi, c["num_mlp_gates"]))
        if mc:
            dy = dx[ma:ma + mc, ..., :k].reshape(mc, b * n, k)
            dinp, dw1, db1, dw2, db2 = ops.mlp_backward(dy, c["mlp"])
            for prm, g in ((layer.mlp_w1, dw1), (layer.mlp_b1, db1), (layer.mlp_w2, dw2),
                           (layer.mlp_b2, db2)):
                prm.accumulate(g)
            dr = dinp.reshape(mc, b * n, 2, d).transpose(2, 0, 1, 3).reshape(2 * mc, b, n, d)
            dxr, dpi = ops.read_backward(dr, x[:ma], c["pi_mlp"])
            dx[:ma] += dxr
            layer.mlp_gates.accumulate(ops.sample_backward(dpi, c["mlp_gates"]))
        _through(grad, dx, dxn, self._written(li, "attn") + self._written(li, "num_attn"))
        rows = cfg.attn_layout
        dr = get_xp().empty((rows.rows, b, n, d), dtype=dx.dtype)  # every row is written below
        if hn:
            dq, dk, dv, dpred = ops.num_attention_backward(dxn[p:pa], c["num_attn"])
            dr[rows.num_query], dr[rows.num_key] = dq, dk
            layer.num_pred.accumulate(ops.sample_backward(dpred, c["num_pred"]))
            dxr, dpi = ops.read_backward(dv, xn[:p], c["pi_value"])
            dxn[:p] += dxr
            layer.value_gates.accumulate(ops.sample_backward(dpi, c["value_gates"]))
        if hc:
            dq, dk, dv, dpred = ops.cat_attention_backward(dx[m:ma], c["cat_attn"])
            dr[rows.cat_query], dr[rows.cat_key], dr[rows.cat_value] = dq, dk, dv
            layer.cat_pred.accumulate(ops.sample_backward(dpred, c["cat_pred"]))
        dxr, dpi = ops.read_backward(dr, x[:m], c["pi_attn"])
        dx[:m] += dxr
        layer.attn_gates.accumulate(ops.sample_backward(dpi, c["attn_gates"]))

    # ------------------------------------------------------------------ hook vocabulary
    def _written(self, li: int, module: str) -> list[VarSpec]:
        """The variables that layer ``li``'s modules ``{module}_{li}_*`` write (``module``:
        ``attn``, ``num_attn``, ``mlp`` or ``num_mlp``), in slot order."""
        memo = self.__dict__.setdefault("_written_memo", {})
        if (li, module) not in memo:
            head = f"{module}_{li}_"
            memo[li, module] = [v for v in self.variables if v.source and v.source.startswith(head)
                                and v.source[len(head):].isdigit()]
        return memo[li, module]

    def _entering(self, after: int) -> list[VarSpec]:
        """The variables that enter the stream after layer ``after``'s MLPs from outside the
        layers: the inputs (``after=-1``) and stream extensions' outputs."""
        names = {o for e in self.extensions if e.after == after for o in e.outputs}
        return [v for v in self.variables
                if v.name in names or (after == -1 and v.source is None)]

    def hook_names(self) -> list[str]:
        """Every hook point's name, in forward order: the inputs, then per layer the heads'
        patterns and outputs (categorical heads first), the MLPs' outputs, and extensions'
        variables where they enter."""
        names = [v.name for v in self._entering(-1)]
        for li in range(self.config.n_layers):
            heads = self._written(li, "attn") + self._written(li, "num_attn")
            names += [f"{v.source}.pattern" for v in heads] + [v.name for v in heads]
            names += [v.name for v in self._written(li, "mlp") + self._written(li, "num_mlp")]
            names += [v.name for v in self._entering(li)]
        return names

    def hook_axes(self, name: str) -> tuple[str, ...]:
        """``(batch, query_pos, key_pos)`` for a pattern, ``(batch, pos, value)`` for a
        categorical variable (width ``d``), ``(batch, pos)`` for a numerical one."""
        self.check_hook_names([name])
        if name.endswith(".pattern"):
            return ("batch", "query_pos", "key_pos")
        kind = next(v.kind for v in self.variables if v.name == name)
        return ("batch", "pos", "value") if kind == "categorical" else ("batch", "pos")

    def hook_name(self, kind: str, where: str | None = None) -> str:
        """``("pattern", "attn_0_1")`` -> ``attn_0_1.pattern``; a variable's name is its own
        (``("attn_0_1_outputs",)``)."""
        name = kind if where is None else f"{where}.{kind}"
        self.check_hook_names([name])
        return name

    def heads(self) -> list[list[tuple[str, str]]]:
        """Every head by layer, categorical then numerical: ``("attn_1_0", "cat head 0")``,
        ``("num_attn_1_0", "num head 0")``."""
        names = [v.source for v in self.variables if v.source and "attn_" in v.source]
        return [[(n, f"{'num' if n.startswith('num') else 'cat'} head {n.rsplit('_', 1)[1]}")
                 for n in names if int(n.split("_")[-2]) == layer]
                for layer in range(self.config.n_layers)]

    def head_output(self, head: str) -> tuple[str, dict[str, int]]:
        """Head ``head``'s (e.g. ``"attn_1_0"``) output variable; no selection."""
        out = [v.name for v in self.variables if v.source == head and "attn_" in head]
        if not out:
            heads = [v.source for v in self.variables if v.source and "attn_" in v.source]
            raise TpcoreError(f"head {head!r} does not exist; expected one of "
                              f"{', '.join(heads)}")
        return out[0], {}

    # ------------------------------------------------------------------ discrete view
    def discrete(self) -> DiscreteProgram:
        """The discrete model as data (argmax of every gate and predicate row; host float64
        weights). Running :meth:`forward` with ``tau=None`` computes exactly this program."""
        cfg = self.config
        cat = self.variable_names("categorical")
        num = self.variable_names("numerical")
        hc, hn, mc, mn = cfg.n_cat_heads, cfg.n_num_heads, cfg.n_cat_mlps, cfg.n_num_mlps

        def host(p: Parameter) -> np.ndarray:
            return np.asarray(to_host(p.data), dtype=np.float64)

        rows = cfg.attn_layout
        modules: list[DiscreteHead | DiscreteMlp] = []
        for li, layer in enumerate(self.layers):
            g = host(layer.attn_gates).argmax(axis=1)
            q, k, v = g[rows.cat_query], g[rows.cat_key], g[rows.cat_value]
            nq, nk = g[rows.num_query], g[rows.num_key]
            vg = host(layer.value_gates).argmax(axis=1)
            cp, npred = host(layer.cat_pred).argmax(-1), host(layer.num_pred).argmax(-1)
            for h in range(hc):
                modules.append(DiscreteHead(
                    f"attn_{li}_{h}", "categorical", li, cat[q[h]], cat[k[h]], cat[v[h]],
                    f"attn_{li}_{h}_outputs", cp[h]))
            for h in range(hn):
                modules.append(DiscreteHead(
                    f"num_attn_{li}_{h}", "numerical", li, cat[nq[h]], cat[nk[h]], num[vg[h]],
                    f"num_attn_{li}_{h}_outputs", npred[h]))
            mg, ng = host(layer.mlp_gates).argmax(axis=1), host(layer.num_mlp_gates).argmax(axis=1)
            for i in range(mc):
                modules.append(DiscreteMlp(
                    f"mlp_{li}_{i}", "categorical", li, (cat[mg[i]], cat[mg[mc + i]]),
                    f"mlp_{li}_{i}_outputs", host(layer.mlp_w1)[i], host(layer.mlp_b1)[i, 0],
                    host(layer.mlp_w2)[i], host(layer.mlp_b2)[i, 0]))
            for i in range(mn):
                modules.append(DiscreteMlp(
                    f"num_mlp_{li}_{i}", "numerical", li, (num[ng[i]], num[ng[mn + i]]),
                    f"num_mlp_{li}_{i}_outputs", host(layer.num_w1)[i], host(layer.num_b1)[i, 0],
                    host(layer.num_w2)[i], host(layer.num_b2)[i, 0]))
        w = host(self.w_out)
        d, m_all = cfg.width, len(cat)
        wc = w[: d * m_all].reshape(m_all, d, -1)
        weights = {}
        for v in self.variables:
            weights[v.name] = (wc[v.slot, : v.width] if v.kind == "categorical"
                               else w[d * m_all + v.slot][None])
        emb = host(self.embedding).argmax(-1) if cfg.n_embed_vars else None
        return DiscreteProgram(list(self.variables), modules, weights, host(self.b_out),
                               cfg.masked_classes, d, cfg.causal, cfg.max_len, emb,
                               list(self.extensions))

"""The Transformer Program model: :class:`ProgramModel`, the stream's inputs, a loop over its
layers (:class:`~tpcore.models.program.layer.ProgramLayer`) and the classifier."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tpcore.backend import Array, get_xp
from tpcore.errors import TpcoreError
from tpcore.models.program import ops
from tpcore.models.program.classifier import StreamClassifier
from tpcore.models.program.config import ProgramConfig
from tpcore.models.program.discrete import DiscreteProgram, host
from tpcore.models.program.embed import FactoredEmbedding
from tpcore.models.program.extension import StreamExtension
from tpcore.models.program.layer import ProgramLayer
from tpcore.models.program.stream import StreamNames, VarSpec, stream_variables, through
from tpcore.nn.hookpoints import NO_HOOKS, Hooks
from tpcore.nn.module import Module, Parameter
from tpcore.nn.relax import gumbel_noise


class ProgramModel(StreamNames, Module):
    """The Transformer Program (:mod:`tpcore.models.program`). ``model.variables`` lists the
    stream variables (:class:`VarSpec`) in slot order; ``model.cache`` holds the last forward's
    streams (``x``, ``xn``), and each component its own intermediate values, for the backward.
    Subclasses add :class:`StreamExtension` modules by overriding :meth:`make_extensions`.

    Parameters, under the names saved models use: the extensions' (``extensions.{i}.*``), the
    learned embedding ``embedding: (V, n_embed_vars, k)`` (:class:`FactoredEmbedding`
    ``embed``, when ``n_embed_vars > 0``), each layer's (:class:`ProgramLayer`), and the
    classifier's ``w_out: (m d + p, C)``, ``b_out: (C,)`` (:class:`StreamClassifier`
    ``classifier``).
    """

    config_class = ProgramConfig

    def __init__(self, cfg: ProgramConfig):
        self.config = cfg
        self.extensions: list[StreamExtension] = self.make_extensions()
        gen = np.random.default_rng(cfg.seed)
        xp, dt = get_xp(), cfg.dtype
        self.variables: list[VarSpec]
        self.variables, before = stream_variables(cfg, self.extensions)
        self.embed = None
        if cfg.n_embed_vars:
            self.embedding = Parameter(xp.asarray(
                gen.normal(0.0, cfg.init_std, (cfg.vocab_size, cfg.n_embed_vars, cfg.out_k)),
                dtype=dt))
            self.embed = FactoredEmbedding(self.embedding)
        self.layers: list[ProgramLayer] = [
            ProgramLayer(cfg, li, m, p, gen, self.layer_variables(li))
            for li, (m, p) in enumerate(before)]
        n_feat = cfg.width * self.n_vars("categorical") + self.n_vars("numerical")
        bound = 1.0 / math.sqrt(n_feat)
        self.w_out = Parameter(xp.asarray(gen.uniform(-bound, bound, (n_feat, cfg.n_classes)),
                                          dtype=dt))
        self.b_out = Parameter(xp.zeros((cfg.n_classes,), dtype=dt))
        self.classifier = StreamClassifier(self.w_out, self.b_out, cfg.masked_classes)
        self.bias = ops.closest_bias(cfg.max_len, dt, xp)
        self.cache: dict[str, Any] = {}

    def astype(self, dtype: Any) -> ProgramModel:
        """Cast parameters, the position bias and the stream dtype (e.g. float64 for gradchecks)."""
        super().astype(dtype)
        self.config.dtype = np.dtype(dtype).name
        self.bias = self.bias.astype(dtype)
        return self

    def make_extensions(self) -> list[StreamExtension]:
        """The model's stream extensions (none here)."""
        return []

    def _extension_slots(self) -> list[slice]:
        """Numerical-stream slots of each extension's outputs."""
        slot = {v.name: v.slot for v in self.variables if v.kind == "numerical"}
        return [slice(slot[e.outputs[0]], slot[e.outputs[0]] + len(e.outputs))
                for e in self.extensions]

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

        def noise(shape: tuple[int, ...]) -> Array | None:
            return gumbel_noise(shape, rng, dt) if (rng is not None and tau is not None) else None

        x = xp.zeros((self.n_vars("categorical"), b, n, d), dtype=dt)
        xn = xp.zeros((self.n_vars("numerical"), b, n), dtype=dt)
        xn[0] = 1.0
        one = xp.ones((), dtype=dt)  # made on the device: a number would be copied from the host
        if self.embed is not None:
            x[: cfg.n_embed_vars, :, :, :k] = self.embed.forward(tokens, noise, tau)
        else:
            x[0, xp.arange(b)[:, None], xp.arange(n)[None, :], tokens] = one
        x[cfg.n_embed_vars or 1, :, xp.arange(n), xp.arange(n)] = one
        ext_caches = []
        for e, s in zip(self.extensions, self._extension_slots()):
            xn[s], ec = e.forward(tokens, pad, noise, tau)
            ext_caches.append(ec)
        hooks = NO_HOOKS if hooks is None else hooks
        through(hooks, x, xn, self.entering(-1))
        keys = xp.ones((b, n), dtype=bool) if pad is None else ~pad
        mask = keys[:, None, :]
        if cfg.causal:
            mask = mask & xp.tril(xp.ones((n, n), dtype=bool))[None]
        bias = ops.masked_bias(self.bias[:n, :n], mask)
        gate_tau = None if tau is None else tau * cfg.gate_tau
        for layer in self.layers:
            layer.forward(x, xn, mask, bias, noise, tau, gate_tau, hooks)
        logits = self.classifier.forward(x, xn)
        self.cache = {"x": x, "xn": xn, "ext": ext_caches, "hooks": hooks}
        return logits

    # ------------------------------------------------------------------ backward
    def backward(self, dlogits: Array) -> None:
        """Accumulate every parameter's gradient from ``dlogits: (B, N, C)`` (after a training
        forward)."""
        cfg, c = self.config, self.cache
        if not c:
            raise TpcoreError("backward called before forward")
        dx, dxn = self.classifier.backward(dlogits)
        grad = c["hooks"].grad
        for layer in reversed(self.layers):
            layer.backward(dx, dxn, grad)
        through(grad, dx, dxn, self.entering(-1))
        for e, s, ec in zip(self.extensions, self._extension_slots(), c["ext"]):
            e.backward(dxn[s], ec)
        if self.embed is not None:
            self.embed.backward(dx[: cfg.n_embed_vars, ..., : cfg.out_k])

    # ------------------------------------------------------------------ discrete view
    def discrete(self) -> DiscreteProgram:
        """The discrete model as data (argmax of every gate and predicate row; host float64
        weights). Running :meth:`forward` with ``tau=None`` computes exactly this program."""
        cfg = self.config
        cat, num = self.variable_names("categorical"), self.variable_names("numerical")
        modules = [module for layer in self.layers for module in layer.discrete(cat, num)]
        emb = host(self.embedding).argmax(-1) if cfg.n_embed_vars else None
        return DiscreteProgram(list(self.variables), modules,
                               self.classifier.discrete(self.variables, cfg.width),
                               host(self.b_out), cfg.masked_classes, cfg.width, cfg.causal,
                               cfg.max_len, emb, list(self.extensions))

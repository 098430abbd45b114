"""Train a standard transformer (:class:`tpcore.models.transformer.Transformer`) on a generated
task or on the caller's own arrays, through the shared loop (:func:`tpcore.train.fit`):
:func:`train_transformer`.

Data are splits of host arrays: ``tokens (S, N)`` ids, ``targets`` either ``(S, N)`` (a label
per position, the ``token`` readout) or ``(S,)`` (a label per sequence, read out from the mean of
the positions), optionally ``mask (S, N)`` (positions that carry a loss; default all) and
``pad (S, N)`` (padding, never attended to; default none, or the positions holding
``pad_token`` when one is given). The sizes the model needs and the data do not state are
derived from every split given: ``vocab_size`` and ``n_classes`` one above the largest id, so
give them when some ids never occur. Training is Adam at a constant ``lr`` on shuffled batches;
with a validation split the model of the best validation token accuracy is kept.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.models.transformer import Transformer, TransformerConfig
from tpcore.nn.optim import Adam
from tpcore.train import TrainConfig, evaluate_supervised, fit, shuffled_batches, supervised_step

Splits = dict[str, dict[str, np.ndarray]]

KEYS = ("tokens", "targets", "mask", "pad")
"""Arrays a split may hold."""


def _split(name: str, split: Any) -> dict[str, np.ndarray]:
    """``split`` checked: a dict of the :data:`KEYS` with ``tokens`` and ``targets``, integer
    ids >= 0 of matching shapes, boolean ``mask``/``pad`` shaped like the tokens."""
    if not isinstance(split, dict):
        raise TpcoreError(f"split {name!r} is {type(split).__name__}; expected a dict of arrays "
                          f"{KEYS}")
    unknown = sorted(set(split) - set(KEYS))
    if unknown or "tokens" not in split or "targets" not in split:
        raise TpcoreError(f"split {name!r} holds {sorted(split)}; expected tokens and targets, "
                          "and optionally mask and pad")
    out = {k: np.asarray(v) for k, v in split.items()}
    tokens, targets = out["tokens"], out["targets"]
    if tokens.ndim != 2 or tokens.dtype.kind not in "iu" or tokens.size == 0:
        raise TpcoreError(f"{name} tokens: shape {tokens.shape}, dtype {tokens.dtype}; expected "
                          "integer ids (S, N), not empty")
    if targets.dtype.kind not in "iu" or targets.shape not in (tokens.shape, tokens.shape[:1]):
        raise TpcoreError(f"{name} targets: shape {targets.shape}, dtype {targets.dtype}; "
                          f"expected integer ids {tokens.shape} or {tokens.shape[:1]}")
    for key in ("mask", "pad"):
        if key in out and (out[key].dtype != bool or out[key].shape != tokens.shape):
            raise TpcoreError(f"{name} {key}: shape {out[key].shape}, dtype {out[key].dtype}; "
                              f"expected booleans {tokens.shape}")
    if "mask" in out and targets.ndim == 1:
        raise TpcoreError(f"{name} mask: sequence labels (targets {targets.shape}) have no "
                          "positions to mask")
    for key in ("tokens", "targets"):
        if out[key].min() < 0:
            raise TpcoreError(f"{name} {key}: negative id {int(out[key].min())}; expected ids "
                              ">= 0")
    return out


def derived_config(splits: Splits, options: dict[str, Any]) -> TransformerConfig:
    """The :class:`TransformerConfig` of ``options`` (its fields), the sizes they leave out
    derived from every split: ``vocab_size`` and ``n_classes`` one above the largest id,
    ``max_len`` the sequence length, the ``mean`` readout for sequence labels."""
    fields = set(TransformerConfig.__dataclass_fields__)
    unknown = sorted(set(options) - fields)
    if unknown:
        raise TpcoreError(f"unknown transformer option {unknown[0]!r}; expected one of "
                          f"{sorted(fields)}")
    first = next(iter(splits.values()))
    labels = [s["targets"][s["mask"]] if "mask" in s else s["targets"] for s in splits.values()]
    derived = {"vocab_size": max(int(s["tokens"].max()) for s in splits.values()) + 1,
               "max_len": first["tokens"].shape[1],
               "n_classes": max(int(t.max()) if t.size else 0 for t in labels) + 1,
               "readout": "token" if first["targets"].ndim == 2 else "mean"}
    cfg = TransformerConfig(**{**derived, **options})
    for name, s in splits.items():
        top = int(s["tokens"].max())
        if top >= cfg.vocab_size:
            raise TpcoreError(f"{name} tokens hold id {top}; vocab_size is {cfg.vocab_size}")
        if s["tokens"].shape[1] > cfg.max_len:
            raise TpcoreError(f"{name} sequences of length {s['tokens'].shape[1]}; max_len is "
                              f"{cfg.max_len}")
    if (cfg.readout == "token") != (first["targets"].ndim == 2):
        raise TpcoreError(f"readout {cfg.readout!r} with targets of shape "
                          f"{first['targets'].shape}: the token readout needs a label per "
                          "position, the others one per sequence")
    return cfg


def train_transformer(splits: Splits, *, epochs: int = 20, batch_size: int = 64,
                      lr: float = 1e-3, grad_clip: float | None = None, seed: int = 0,
                      quiet: bool = True, threads: int | None = None,
                      **options: Any) -> tuple[Transformer, dict[str, Any]]:
    """Train a :class:`Transformer` on ``splits["train"]`` (``"val"`` selects the model,
    ``"test"`` is only scored); return the model and a report: ``config`` (the model's),
    ``steps``, ``train_seconds``, ``history`` (validation metrics after every epoch) and the
    loss, token and sequence accuracy of each split given.

    ``options``: :class:`TransformerConfig` fields (``d_model``, ``n_layers``, ``n_heads``,
    ``causal``, ``pad_token``, ...; the sizes it needs are derived from the data where not
    given, :func:`derived_config`); ``seed`` seeds the weights and the batch order."""
    if not isinstance(splits, dict) or "train" not in splits:
        raise TpcoreError("splits: expected a dict with a 'train' split (and optionally 'val' "
                          "and 'test'), each a dict of arrays tokens, targets[, mask, pad]")
    unknown = sorted(set(splits) - {"train", "val", "test"})
    if unknown:
        raise TpcoreError(f"unknown split {unknown[0]!r}; expected train, val and test")
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        if type(value) is not int or value < 1:
            raise TpcoreError(f"{name} {value!r}: expected an integer >= 1")
    if not (isinstance(lr, int | float) and lr > 0):
        raise TpcoreError(f"lr {lr!r}: expected a number > 0")
    data = {name: _split(name, s) for name, s in splits.items()}
    cfg = derived_config(data, {"seed": seed, **options})
    model = Transformer(cfg)
    train = data["train"]
    per_epoch = len(train["tokens"]) // min(batch_size, len(train["tokens"]))
    val = data.get("val")
    config = TrainConfig(steps=epochs * per_epoch, eval_every=per_epoch if val else 0,
                         select="acc" if val else None, grad_clip=grad_clip, seed=seed,
                         quiet=quiet, desc="transformer", threads=threads)
    start = time.perf_counter()
    result = fit(model, Adam(model.parameters(), lr=lr), shuffled_batches(train, batch_size, seed),
                 supervised_step, config,
                 (lambda m: evaluate_supervised(m, val)) if val else None)
    report: dict[str, Any] = {"config": cfg.__dict__.copy(), "steps": config.steps,
                              "train_seconds": time.perf_counter() - start,
                              "history": result.history}
    for name, split in data.items():
        report[name] = evaluate_supervised(model, split)
    return model, report

"""Masked cross-entropy with per-token or per-sequence reduction and optional loss clipping."""

from __future__ import annotations

from tpcore.backend import Array, xp_of
from tpcore.dispatch import kernel
from tpcore.errors import TpcoreError
from tpcore.nn.functional import log_softmax_backward, log_softmax_forward, one_hot

REDUCTIONS = ("token_mean", "sequence_mean", "sequence_sum")


def cross_entropy_forward(
    logits: Array, targets: Array, mask: Array | None = None, reduction: str = "token_mean",
    clip: float | None = None,
) -> tuple[Array, tuple]:
    """Cross-entropy ``l_bn = -log softmax(logits_bn)[t_bn]`` over the targets where ``mask``.

    ``logits: (B, N, C)`` (or ``(B, C)``), ``targets`` and ``mask: (B, N)`` (or ``(B,)``).
    Reductions, with ``m`` the mask:

    - ``token_mean``: ``sum_bn m l / sum_bn m`` (every target token weighs the same);
    - ``sequence_mean``: ``mean_b (sum_n m l / sum_n m)`` (each sequence averaged, then the batch);
    - ``sequence_sum``: ``mean_b sum_n m l``.

    ``clip``: each individual loss ``l`` below ``clip`` is replaced by the constant ``clip`` (no
    gradient), so well-predicted tokens stop pulling and training spends itself on the hard ones
    (the sorting paper's clipping at 0.02). Returns the loss, a 0-d array on the logits' device
    (``float(loss)`` reads it, which waits for a GPU), and a cache for the backward.
    """
    if reduction not in REDUCTIONS:
        raise TpcoreError(f"reduction {reduction!r} unknown; expected one of {REDUCTIONS}")
    xp = xp_of(logits)
    squeeze = logits.ndim == 2
    if squeeze:
        logits, targets = logits[:, None], targets[:, None]
        mask = None if mask is None else mask[:, None]
    logp, _ = log_softmax_forward(logits)
    losses = -xp.take_along_axis(logp, targets[..., None].astype("int64"), axis=-1)[..., 0]
    m = xp.ones(targets.shape, dtype=logp.dtype) if mask is None else mask.astype(logp.dtype)
    active = m if clip is None else m * (losses > clip)
    if clip is not None:
        losses = xp.maximum(losses, clip)
    if reduction == "token_mean":
        w = m / xp.maximum(m.sum(), 1.0)
    elif reduction == "sequence_mean":
        w = m / xp.maximum(m.sum(axis=1, keepdims=True), 1.0) / m.shape[0]
    else:
        w = m / m.shape[0]
    loss = (w * losses).sum()
    return loss, (logp, targets, w * active, squeeze)


def cross_entropy_backward(cache: tuple) -> Array:
    """``dlogits_bn = w_bn (softmax(logits_bn) - onehot(t_bn))`` with ``w`` the reduction weight
    (zero where masked or clipped); shaped like the logits given to the forward."""
    logp, targets, w, squeeze = cache
    d = cross_entropy_grad(logp, targets, w)
    return d[:, 0] if squeeze else d


@kernel(None, gpu=True)
def cross_entropy_grad(logp: Array, targets: Array, w: Array) -> Array:
    """The gradient of ``sum_bn w_bn l_bn`` with respect to the logits, from the log-softmax
    ``logp: (B, N, C)``, ``targets`` and weights ``w: (B, N)``: the log-softmax's backward of
    ``dlogp = -w onehot(t)``, ``w (exp(logp) - onehot(t))``."""
    dlogp = -w[..., None] * one_hot(targets, logp.shape[-1], dtype=w.dtype)
    return log_softmax_backward(dlogp, (logp, -1))


def token_accuracy(logits: Array, targets: Array, mask: Array | None = None) -> float:
    """Fraction of (unmasked) positions whose argmax equals the target."""
    hit = logits.argmax(axis=-1) == targets
    if mask is None:
        return float(hit.mean())
    return float((hit & mask).sum()) / max(float(mask.sum()), 1.0)


def sequence_accuracy(logits: Array, targets: Array, mask: Array | None = None) -> float:
    """Fraction of sequences whose every (unmasked) position is predicted correctly."""
    hit = logits.argmax(axis=-1) == targets
    if mask is not None:
        hit = hit | ~mask
    return float(hit.all(axis=-1).mean())

"""What a trained counting model rests on, measured for ``tpcore reproduce counting``
(:mod:`tpcore.experiments.counting`): which expert its gate picks, which heads count the query's
own token, how much its accuracy needs its prefix counts, and how it does on inputs longer than
any it was trained on."""

from __future__ import annotations

import numpy as np

from tpcore.backend import asarray, to_host
from tpcore.counts import EXPERTS
from tpcore.models.counting import CountingProgramModel, PrefixSumCounts, framing_and_content
from tpcore.nn.hookpoints import Hooks, replace
from tpcore.train import evaluate_supervised


def gate_usage(model: CountingProgramModel, split: dict[str, np.ndarray]) -> dict[str, float]:
    """Share of ``split``'s sequences for which the discrete gate picks each expert."""
    net = model.expert_network
    if net is None:
        return {}
    choice = to_host(net.choice(asarray(split["tokens"]), asarray(split["pad"])))
    counts = np.bincount(np.asarray(choice), minlength=len(EXPERTS)) / len(choice)
    return {name: float(c) for name, c in zip(EXPERTS, counts)}


def histogram_heads(model: CountingProgramModel, vocab: list[str] | tuple[str, ...]
                    ) -> list[str]:
    """The numerical heads that count the query's own token: query and key ``tokens`` and a
    predicate matching every content token to itself, so the head sums its value over the
    positions holding the same token (with value ``ones``, the histogram double hist builds on).
    Each is named with its value, e.g. ``num_attn_0_1(ones)``."""
    content = framing_and_content(vocab)[1]
    return [f"{m.name}({m.value})" for m in model.discrete().modules
            if m.name.startswith("num_attn") and m.query == m.key == "tokens"
            and all(m.predicate[i] == i for i in content)]


def prefix_ablation(model: CountingProgramModel, split: dict[str, np.ndarray],
                    vocab: list[str] | tuple[str, ...]) -> dict[str, dict[str, float]]:
    """How much a trained model's accuracy on ``split`` rests on its prefix counts ({} without
    PrefixSumCounts), read through the hook points ``prefix_count_{v}``: ``content_zero``
    evaluates it with every content token's prefix count set to 0; ``bos_one`` also sets the
    count of ``<s>`` to 1 (at ``<s>`` itself it is 0), so that the one prefix count left no
    longer tells ``<s>`` from the content positions. Padding positions take the values too;
    their keys are masked and their outputs unscored, so nothing else changes."""
    if not any(isinstance(e, PrefixSumCounts) for e in model.extensions):
        return {}
    content = framing_and_content(vocab)[1]
    zero = {f"prefix_count_{v}": replace(0.0) for v in content}
    bos_one = zero | {f"prefix_count_{vocab.index('<s>')}": replace(1.0)}
    return {case: evaluate_supervised(model, split, hooks=Hooks(fns))
            for case, fns in (("content_zero", zero), ("bos_one", bos_one))}


def train_classes(split: dict[str, np.ndarray]) -> np.ndarray:
    """The classes that occur as targets in ``split``."""
    return np.unique(split["targets"][split["mask"]])


def longer_only(model: CountingProgramModel, split: dict[str, np.ndarray], n_train: int,
                seen_classes: np.ndarray) -> dict[str, float]:
    """Accuracy on the inputs of ``split`` longer than any seen in training (``> n_train``
    content tokens), how many there are, and ``acc_seen_classes``: token accuracy over the
    target positions whose class is among ``seen_classes`` (the classes that occur as training
    targets); ``acc_trained_positions``: token accuracy at the content positions that exist in
    training (``1 .. n_train``) of those longer inputs."""
    keep = split["mask"].sum(axis=1) > n_train
    if not keep.any():
        return {"n": 0}
    part = {k: a[keep] for k, a in split.items()}
    pred = np.asarray(to_host(model.forward(part["tokens"], part["pad"]).argmax(-1)))
    hit = pred == part["targets"]
    seen = part["mask"] & np.isin(part["targets"], seen_classes)
    early = part["mask"].copy()
    early[:, n_train + 1:] = False  # content positions 1 .. n_train (position 0 is <s>)
    return {"n": int(keep.sum()), **evaluate_supervised(model, part),
            "acc_seen_classes": float(hit[seen].mean()),
            "share_seen_classes": float(seen.sum() / part["mask"].sum()),
            "acc_trained_positions": float(hit[early].mean()),
            "classes_seen": [int(c) for c in seen_classes]}


def range_shift(model: CountingProgramModel, train: dict[str, np.ndarray],
                test: dict[str, np.ndarray]) -> dict[str, list[float]]:
    """Numerical variables whose largest magnitude on ``test`` exceeds that on ``train``:
    ``name -> [max |x| train, max |x| test, spread of its classifier row]`` (the classifier
    reads each numerical variable linearly, so such values are extrapolated)."""
    def peak(split: dict[str, np.ndarray]) -> np.ndarray:
        model.forward(split["tokens"], split["pad"])
        return np.abs(np.asarray(to_host(model.cache["xn"]))).max(axis=(1, 2))

    a, b = peak(train), peak(test)
    d, nc = model.config.width, model.n_vars("categorical")
    w = np.asarray(to_host(model.w_out.data))[nc * d:]
    return {name: [float(x), float(y), float(np.ptp(row))]
            for name, x, y, row in zip(model.variable_names("numerical"), a, b, w) if y > x}

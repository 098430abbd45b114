"""Evaluation metrics: CoNLL entity-level precision / recall / F1 and classification accuracy.

Host-only code (plain Python over tag strings).

Entities are the chunks of the CoNLL evaluation script ``conlleval`` (and of seqeval's default,
conlleval-compatible mode). A tag ``P-TYPE`` splits at its first ``-`` into a prefix ``P`` and a
type; ``O`` (or any tag without ``-``) has the empty type. Walking a sentence with the previous
tag (``O`` before the first token), a chunk **starts** at a token when

- its prefix is ``B`` or ``S``; or ``I`` / ``E`` after ``O``, ``E`` or ``S`` (an ``I`` that opens a
  chunk, as in IOB1 or a broken IOB2 sequence); or
- it is not ``O`` and its type differs from the previous token's type,

and the chunk open before the token **ends** when

- the previous prefix is ``E`` or ``S``; or the token's prefix is ``B``, ``S`` or ``O``; or
- the previous token is not ``O`` and the types differ.

A predicted entity is correct when a gold entity has the same first token, last token and type.
``precision = correct / predicted``, ``recall = correct / gold``, ``F1 = 2PR / (P + R)``, each 0
when its denominator is 0, in percent like conlleval. Sentences are evaluated separately (the
script's blank line acts as an ``O``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from tpcore.errors import TpcoreError

Entity = tuple[str, int, int]
"""``(type, first token, last token)`` within a sentence."""


def _split(tag: str) -> tuple[str, str]:
    prefix, dash, kind = tag.partition("-")
    return (prefix, kind) if dash else (tag, "")


def _ends(prev: str, prev_type: str, tag: str, kind: str) -> bool:
    return (prev in ("E", "S") or (prev != "O" and tag in ("B", "S", "O"))
            or (prev != "O" and prev_type != kind))


def _starts(prev: str, prev_type: str, tag: str, kind: str) -> bool:
    return (tag in ("B", "S") or (tag in ("I", "E") and prev in ("O", "E", "S"))
            or (tag != "O" and prev_type != kind))


def entities(tags: Sequence[str]) -> list[Entity]:
    """The chunks of one sentence's tags, in order (see the module docstring)."""
    out: list[Entity] = []
    prev, prev_type, begin = "O", "", -1
    for i, t in enumerate(tags):
        tag, kind = _split(t)
        if begin >= 0 and _ends(prev, prev_type, tag, kind):
            out.append((prev_type, begin, i - 1))
            begin = -1
        if _starts(prev, prev_type, tag, kind):
            begin = i
        prev, prev_type = tag, kind
    if begin >= 0:
        out.append((prev_type, begin, len(tags) - 1))
    return out


def _prf(correct: int, predicted: int, gold: int) -> dict[str, float]:
    p = 100.0 * correct / predicted if predicted else 0.0
    r = 100.0 * correct / gold if gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": p, "recall": r, "f1": f}


@dataclass
class EntityScores:
    """Counts and scores of :func:`conll_scores`: overall ``precision``, ``recall``, ``f1`` (in
    percent), token ``accuracy`` (percent, ``O`` tokens included as in conlleval), and
    ``per_type[TYPE]`` with the same three scores plus ``predicted`` / ``gold`` counts."""

    correct: int
    predicted: int
    gold: int
    tokens: int
    correct_tokens: int
    per_type: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def precision(self) -> float:
        return _prf(self.correct, self.predicted, self.gold)["precision"]

    @property
    def recall(self) -> float:
        return _prf(self.correct, self.predicted, self.gold)["recall"]

    @property
    def f1(self) -> float:
        return _prf(self.correct, self.predicted, self.gold)["f1"]

    @property
    def accuracy(self) -> float:
        return 100.0 * self.correct_tokens / self.tokens if self.tokens else 0.0

    def as_dict(self) -> dict:
        """Plain dict for JSON."""
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1,
                "accuracy": self.accuracy, "correct": self.correct, "predicted": self.predicted,
                "gold": self.gold, "per_type": self.per_type}


def conll_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> EntityScores:
    """Entity-level scores of ``predicted`` against ``gold`` tag sentences (equal shapes)."""
    if len(gold) != len(predicted):
        raise TpcoreError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    found_gold: Counter[str] = Counter()
    found_pred: Counter[str] = Counter()
    hits: Counter[str] = Counter()
    tokens = correct_tokens = 0
    for i, (g, p) in enumerate(zip(gold, predicted)):
        if len(g) != len(p):
            raise TpcoreError(f"sentence {i}: {len(g)} gold tags but {len(p)} predicted")
        ge, pe = entities(g), entities(p)
        found_gold.update(e[0] for e in ge)
        found_pred.update(e[0] for e in pe)
        hits.update(e[0] for e in set(ge) & set(pe))
        tokens += len(g)
        correct_tokens += sum(a == b for a, b in zip(g, p))
    per_type = {}
    for kind in sorted(set(found_gold) | set(found_pred)):
        per_type[kind] = {**_prf(hits[kind], found_pred[kind], found_gold[kind]),
                          "predicted": found_pred[kind], "gold": found_gold[kind]}
    return EntityScores(sum(hits.values()), sum(found_pred.values()), sum(found_gold.values()),
                        tokens, correct_tokens, per_type)


def accuracy(gold: Sequence, predicted: Sequence) -> float:
    """Percentage of equal entries (classification accuracy); 0 for empty input."""
    if len(gold) != len(predicted):
        raise TpcoreError(f"{len(gold)} gold labels but {len(predicted)} predicted")
    return 100.0 * sum(a == b for a, b in zip(gold, predicted)) / len(gold) if gold else 0.0

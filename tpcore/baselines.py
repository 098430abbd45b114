"""Baselines of the paper's NLP tables: the unigram tagger (Table 2) and multinomial Naive Bayes
on unigram counts (Table 6).

Host-only code (NumPy on encoded id arrays; these are counting models, not compute paths).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpcore.errors import TpcoreError


@dataclass
class UnigramTagger:
    """Predicts for each word the tag most often assigned to it in training (ties: the lowest tag
    id, i.e. ``O`` first); words never tagged in training (``<unk>`` included, unless it was
    tagged) get ``default`` (``O``, id 0).

    ``table (V,)``: the predicted tag id of each word id.
    """

    table: np.ndarray

    @classmethod
    def fit(cls, tokens: np.ndarray, targets: np.ndarray, mask: np.ndarray, vocab_size: int,
            n_tags: int, default: int = 0) -> UnigramTagger:
        """Count (word, tag) pairs at the ``mask`` positions of ``tokens, targets (S, L)``."""
        if not 0 <= default < n_tags:
            raise TpcoreError(f"default tag {default} outside 0..{n_tags - 1}")
        counts = np.zeros((vocab_size, n_tags), dtype=np.int64)
        np.add.at(counts, (tokens[mask], targets[mask]), 1)
        table = counts.argmax(axis=1)
        table[counts.sum(axis=1) == 0] = default
        return cls(table)

    def predict(self, tokens: np.ndarray) -> np.ndarray:
        """Tag ids ``(S, L)`` for ``tokens (S, L)``."""
        return self.table[tokens]


@dataclass
class NaiveBayes:
    """Multinomial Naive Bayes on word counts with add-``alpha`` smoothing:
    ``log P(c | x) = log prior_c + sum_w count_w(x) log P(w | c) + const``,
    ``P(w | c) = (n_wc + alpha) / (sum_w n_wc + alpha V)``.

    ``log_prior (C,)``, ``log_like (V, C)``; ``ignore`` lists word ids never counted (padding,
    ``<s>``, ``</s>``).
    """

    log_prior: np.ndarray
    log_like: np.ndarray
    ignore: tuple[int, ...]

    @staticmethod
    def _keep(tokens: np.ndarray, vocab_size: int, ignore: tuple[int, ...]) -> np.ndarray:
        """``(S, L)`` True at the words that count; checks the ids."""
        if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
            bad = tokens.min() if tokens.min() < 0 else tokens.max()
            raise TpcoreError(f"word id {bad} outside the vocabulary 0..{vocab_size - 1}")
        return ~np.isin(tokens, list(ignore))

    @classmethod
    def fit(cls, tokens: np.ndarray, targets: np.ndarray, vocab_size: int, n_classes: int,
            alpha: float = 1.0, ignore: tuple[int, ...] = ()) -> NaiveBayes:
        """Fit on ``tokens (S, L)`` with labels ``targets (S,)``."""
        if alpha <= 0:
            raise TpcoreError(f"smoothing alpha must be > 0, got {alpha}")
        keep = cls._keep(tokens, vocab_size, ignore)
        labels = np.broadcast_to(np.asarray(targets)[:, None], tokens.shape)
        n_wc = np.zeros((vocab_size, n_classes), dtype=np.float64)
        np.add.at(n_wc, (tokens[keep], labels[keep]), 1.0)
        denom = n_wc.sum(axis=0) + alpha * (vocab_size - len(set(ignore)))
        log_like = np.log(n_wc + alpha) - np.log(denom)
        prior = (np.bincount(targets, minlength=n_classes) + 1e-12) / len(targets)
        return cls(np.log(prior), log_like, tuple(ignore))

    def predict(self, tokens: np.ndarray) -> np.ndarray:
        """Class ids ``(S,)`` for ``tokens (S, L)``."""
        keep = self._keep(tokens, self.log_like.shape[0], self.ignore)
        scores = (self.log_like[tokens] * keep[..., None]).sum(axis=1) + self.log_prior
        return np.argmax(scores, axis=1)

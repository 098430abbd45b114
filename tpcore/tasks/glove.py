"""GloVe-format word vectors (a text file: a word, then its floats, space-separated, one word a
line) and their projection onto a model's embedding width.

Host-only code (file reading): NumPy is used directly; callers move the arrays to the backend.

Projection (used for both models, since neither has a 300-wide embedding):
the vectors found for the vocabulary are centred (mean over found words) and scaled to unit
standard deviation over all entries, then multiplied by a fixed Gaussian matrix
``P (D, out)`` with entries ``N(0, 1 / D)`` drawn from ``seed``. Each output entry then has
variance about 1 (the models' default initialisation scale), and inner products between words
are preserved up to the usual random-projection error, so words that are close in GloVe start
close in the model. Words without a vector get ``N(0, 1)`` rows like the default initialisation.
The Transformer Program reshapes the ``(V, m k)`` result into its embedding logits ``(V, m, k)``
(one ``k``-way categorical per variable); the standard transformer uses ``(V, d_model)``
directly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tpcore.errors import TpcoreError


def read_glove(path: str | Path, words: list[str], lowercase_fallback: bool = True,
               ) -> tuple[np.ndarray, np.ndarray]:
    """Vectors for ``words`` from a GloVe text file: ``(vectors (V, D) float32, found (V,)
    bool)``; rows of missing words are zero. A word missing exactly is looked up lowercased when
    ``lowercase_fallback`` (GloVe 6B is lowercase). Lines whose width differs from the first
    line's raise naming ``file:line``."""
    path = Path(path)
    want: dict[str, list[int]] = {}
    for i, w in enumerate(words):
        want.setdefault(w, []).append(i)
    lower: dict[str, list[int]] = {}
    if lowercase_fallback:
        for i, w in enumerate(words):
            lower.setdefault(w.lower(), []).append(i)
    rows: dict[int, np.ndarray] = {}
    exact: set[int] = set()
    dim = -1
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            word, _, rest = line.rstrip("\n").partition(" ")
            if not rest.strip():
                if line.strip():
                    raise TpcoreError(f"{path}:{number}: expected 'WORD FLOAT ...', got "
                                      f"{line.strip()[:60]!r}")
                continue
            if dim < 0:
                dim = len(rest.split())
            hit_exact, hit_lower = want.get(word, ()), lower.get(word, ())
            if not hit_exact and not hit_lower:
                continue
            try:
                vec = np.array(rest.split(), dtype=np.float32)
            except ValueError as exc:
                raise TpcoreError(f"{path}:{number}: not a number in the vector of "
                                  f"{word!r} ({exc})") from None
            if len(vec) != dim:
                raise TpcoreError(f"{path}:{number}: vector of {word!r} has {len(vec)} values, "
                                  f"expected {dim} like the first line")
            for i in hit_exact:
                rows[i] = vec
                exact.add(i)
            for i in hit_lower:
                if i not in exact:
                    rows[i] = vec
    if dim < 0:
        raise TpcoreError(f"{path}: no vectors found")
    vectors = np.zeros((len(words), dim), dtype=np.float32)
    found = np.zeros(len(words), dtype=bool)
    for i, vec in rows.items():
        vectors[i], found[i] = vec, True
    return vectors, found


def project(vectors: np.ndarray, found: np.ndarray, out_dim: int, seed: int = 0) -> np.ndarray:
    """``(V, out_dim)`` float32 initial embeddings from ``vectors (V, D)`` (module docstring)."""
    if out_dim < 1:
        raise TpcoreError(f"projection width must be >= 1, got {out_dim}")
    gen = np.random.default_rng(seed)
    v, dim = vectors.shape
    proj = gen.normal(0.0, 1.0 / np.sqrt(dim), (dim, out_dim))
    out = gen.normal(0.0, 1.0, (v, out_dim))
    if found.any():
        x = vectors[found].astype(np.float64)
        x = x - x.mean(axis=0)
        x /= max(float(x.std()), 1e-12)
        out[found] = x @ proj
    return out.astype(np.float32)

"""Built-in synthetic corpora for the NLP pipeline: named entities whose type only context decides,
and sentiment classification with negation. Seeded; the same seed gives the same corpus.

Host-only code (data generation): the standard library's ``random`` with a seed.

NER (``ner_corpus``)
--------------------
A sentence is filler phrases with 1-3 entity mentions between them (at most ``max_words``
words). A mention of type ``PER``, ``LOC`` or ``ORG`` is a *cue* word then a *name*; a ``MISC``
mention is a nationality-like word after filler. The cue is the previous word and decides the type:
``Mr. Mrs. Dr. coach minister`` -> PER, ``in at near from via`` -> LOC,
``club firm bank group team`` -> ORG. The name is

- with probability ``p_ambiguous`` an *ambiguous* word (``Jordan``, ``Washington`` ...) that
  occurs as all three types, so only the cue resolves it;
- with probability ``p_rare`` a rare invented name (fresh letters, mostly unseen in training);
- otherwise a name of that type only (``Berlin`` is always LOC).

PER names take a surname (``I-PER``) with probability 0.3. Cue words also occur in filler
followed by an ordinary word (``in the morning``), so a cue alone is not an entity. Tags are IOB2.
The unigram baseline cannot resolve ambiguous or unseen names; a model that reads the previous
word can.

Classification (``classification_corpus``)
------------------------------------------
Movie-review-like sentences with one or two sentiment words of the same polarity; each is
negated (``not``, ``never``, ``hardly`` just before it) with probability ``p_negate``, flipping it.
The label (``pos`` / ``neg``) is the polarity of the sentiment words after negation (they agree).
A bag of words sees the negator but not what it applies to.
"""

from __future__ import annotations

import random

from tpcore.errors import TpcoreError
from tpcore.tasks.nlp import Example, TaggedSentence

CUES = {
    "PER": ("Mr.", "Mrs.", "Dr.", "coach", "minister"),
    "LOC": ("in", "at", "near", "from", "via"),
    "ORG": ("club", "firm", "bank", "group", "team"),
}
NAMES = {
    "PER": ("John", "Mary", "Peter", "Anna", "David", "Laura", "Paul", "Sarah", "Mark", "Helen",
            "James", "Emma"),
    "LOC": ("Berlin", "Madrid", "Tokyo", "Cairo", "Oslo", "Lima", "Boston", "Denver", "Vienna",
            "Dublin", "Nairobi", "Quito"),
    "ORG": ("Siemens", "Reuters", "Fiat", "Nokia", "Boeing", "Unilever", "Intel", "Bayer",
            "Volvo", "Sony", "Danone", "Pfizer"),
}
SURNAMES = ("Smith", "Brown", "Miller", "Wilson", "Taylor", "Clark", "Lewis", "Walker")
MISC = ("German", "French", "Olympic", "Japanese", "Italian", "Dutch", "Kenyan", "Swiss")
AMBIGUOUS = ("Jordan", "Washington", "Lincoln", "Chelsea", "Florence", "Austin", "Dallas",
             "Victoria", "Georgia", "Morgan", "Kent", "Orlando", "Sydney", "Troy", "Phoenix",
             "Madison")
FILLER = ("the", "shares", "rose", "fell", "#", "percent", "on", "Monday", "said", "a", "new",
          "deal", "after", "talks", "with", "week", "its", "market", "prices", "and", "was",
          "to", "of", "report", "year", "season", "last", "won", "match", "officials", ",")
NOUNS = ("morning", "meeting", "end", "start", "time", "moment", "past", "market", "final")
SYLLABLES = ("ka", "lo", "ren", "vi", "tor", "sa", "mu", "del", "ni", "bro", "gan", "zo", "ph",
             "el", "ta", "quin")

POSITIVE = ("good", "great", "excellent", "fun", "brilliant", "moving", "charming", "clever")
NEGATIVE = ("bad", "boring", "awful", "dull", "weak", "poor", "clumsy", "tedious")
NEGATORS = ("not", "never", "hardly")
REVIEW_FILLER = ("the", "movie", "film", "was", "plot", "acting", "really", "very", "and", "a",
                 "story", "quite", "this", "is", "cast", "ending", "overall", "script", ",")


def _rare_name(gen: random.Random) -> str:
    return "".join(gen.choice(SYLLABLES) for _ in range(gen.randint(2, 3))).capitalize()


def _filler(gen: random.Random, words: list[str], tags: list[str], n: int) -> None:
    """Append ``n`` filler units: an ordinary word, or a cue used as a plain word before one."""
    for _ in range(n):
        if gen.random() < 0.25:
            cue = gen.choice(CUES[gen.choice(sorted(CUES))])
            words += [cue, gen.choice(("the", "a", "its")), gen.choice(NOUNS)]
            tags += ["O", "O", "O"]
        else:
            words.append(gen.choice(FILLER))
            tags.append("O")


def _mention(gen: random.Random, words: list[str], tags: list[str], p_ambiguous: float,
             p_rare: float) -> None:
    kind = gen.choice(("PER", "LOC", "ORG", "PER", "LOC", "ORG", "MISC"))
    if kind == "MISC":
        words.append(gen.choice(MISC))
        tags.append("B-MISC")
        return
    words.append(gen.choice(CUES[kind]))
    tags.append("O")
    u = gen.random()
    name = (gen.choice(AMBIGUOUS) if u < p_ambiguous else
            _rare_name(gen) if u < p_ambiguous + p_rare else gen.choice(NAMES[kind]))
    words.append(name)
    tags.append(f"B-{kind}")
    if kind == "PER" and gen.random() < 0.3:
        words.append(gen.choice(SURNAMES))
        tags.append("I-PER")


def _check(n: int, max_words: int, p: float, q: float) -> None:
    if n < 1:
        raise TpcoreError(f"number of sentences must be >= 1, got {n}")
    if max_words < 8:
        raise TpcoreError(f"max_words must be >= 8 for the synthetic corpora, got {max_words}")
    if not (0 <= p <= 1 and 0 <= q <= 1 and p + q <= 1):
        raise TpcoreError(f"probabilities {p}, {q} must be in [0, 1] with sum <= 1")


def ner_sentences(n: int, seed: int, max_words: int = 30, p_ambiguous: float = 0.5,
                  p_rare: float = 0.15) -> list[TaggedSentence]:
    """``n`` synthetic NER sentences (module docstring)."""
    _check(n, max_words, p_ambiguous, p_rare)
    gen = random.Random(seed)
    out = []
    while len(out) < n:
        words: list[str] = []
        tags: list[str] = []
        _filler(gen, words, tags, gen.randint(0, 3))
        for _ in range(gen.randint(1, 3)):
            _mention(gen, words, tags, p_ambiguous, p_rare)
            _filler(gen, words, tags, gen.randint(1, 4))
        if len(words) <= max_words:
            out.append(TaggedSentence(words, tags, len(out) + 1))
    return out


def ner_corpus(n_train: int = 4000, n_dev: int = 500, n_test: int = 500, seed: int = 0,
               **kwargs: float) -> dict[str, list[TaggedSentence]]:
    """Train / dev / test splits from independent streams of one seed: streams ``3 seed``,
    ``3 seed + 1``, ``3 seed + 2``, so no two seeds share one (new studies derive their streams
    by name, :func:`tpcore.seeds.derive_seed`; these stay as the committed NER and
    classification results were drawn)."""
    return {name: ner_sentences(n, seed * 3 + i, **kwargs)
            for i, (name, n) in enumerate((("train", n_train), ("dev", n_dev), ("test", n_test)))}


def review_examples(n: int, seed: int, max_words: int = 30, p_negate: float = 0.4,
                    ) -> list[Example]:
    """``n`` synthetic sentiment examples (module docstring)."""
    _check(n, max_words, p_negate, 0.0)
    gen = random.Random(seed)
    out = []
    while len(out) < n:
        label = gen.choice(("pos", "neg"))
        words = [gen.choice(REVIEW_FILLER) for _ in range(gen.randint(1, 5))]
        for _ in range(gen.randint(1, 2)):
            negate = gen.random() < p_negate
            polar = (label == "pos") != negate
            if negate:
                words.append(gen.choice(NEGATORS))
            words.append(gen.choice(POSITIVE if polar else NEGATIVE))
            words += [gen.choice(REVIEW_FILLER) for _ in range(gen.randint(1, 4))]
        if len(words) <= max_words:
            out.append(Example(words, label, len(out) + 1))
    return out


def classification_corpus(n_train: int = 4000, n_dev: int = 500, n_test: int = 500,
                          seed: int = 0, **kwargs: float) -> dict[str, list[Example]]:
    """Train / dev / test splits from independent streams of one seed, drawn as
    :func:`ner_corpus` draws them."""
    return {name: review_examples(n, seed * 3 + i, **kwargs)
            for i, (name, n) in enumerate((("train", n_train), ("dev", n_dev), ("test", n_test)))}

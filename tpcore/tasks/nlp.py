"""NLP data from local files: CoNLL-2003 named entities and TSV text classification.

Host-only code (file reading and preprocessing): the standard library and NumPy are used directly;
the arrays returned move to the active backend in the training loop.

Files
-----
- **CoNLL** (``read_conll``): one token per line, whitespace-separated columns (CoNLL-2003 has
  token, POS, chunk, NER); the first column is the word and the last the tag (``O``, ``B-TYPE`` or
  ``I-TYPE``); a blank line ends a sentence; ``-DOCSTART-`` lines are skipped.
- **Classification** (``read_classification``): one example per line, ``LABEL<TAB>TEXT``, the
  text already tokenised by whitespace; blank lines are skipped.

A malformed line raises :class:`~tpcore.errors.TpcoreError` naming ``file:line`` and what was
expected.

Preprocessing (the paper's section 4.3 and appendix B.3, after Collobert et al. 2011)
--------------------------------------------------------------------------------------
- every maximal run of digits becomes ``#`` (``"19.99" -> "#.#"``, ``"1996-08-22" -> "#-#-#"``);
- optional lowercasing (off by default: capitalisation is the strongest cue for named entities);
- sentences longer than ``max_words`` are dropped (30 for NER, so that with ``<s>`` and ``</s>``
  a sequence has at most 32 positions; 64 for classification);
- the vocabulary is the ``vocab_size`` (10,000) most common training words, ties broken by first
  occurrence, after the specials ``<pad>`` (id 0), ``<unk>``, ``<s>`` and ``</s>``; other words map
  to ``<unk>``.

Encoded arrays (``encode_tagged``, ``encode_classification``), ``S`` sentences padded to the
longest length ``L`` (words + 2): ``tokens (S, L)`` int32 ``<s> w_1 .. w_n </s> <pad> ..``,
``pad (S, L)`` True at padding; NER adds ``targets (S, L)`` tag ids and ``mask (S, L)`` True at
the word positions (the loss and metrics ignore ``<s>``, ``</s>`` and padding); classification
adds ``targets (S,)``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.io import open_regular, write_text

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIALS = (PAD, UNK, BOS, EOS)
NUMBER = "#"
DOCSTART = "-DOCSTART-"
MAX_WORDS_NER = 30
MAX_WORDS_CLASSIFY = 64
VOCAB_SIZE = 10_000
_DIGITS = re.compile(r"[0-9]+")
_TAG = re.compile(r"^(O|[BI]-\S+)$")


@dataclass
class TaggedSentence:
    """A sentence of ``words`` with one ``tags`` entry each; ``line`` is the file line of its
    first word (for messages)."""

    words: list[str]
    tags: list[str]
    line: int = 0

    def with_words(self, words: list[str]) -> TaggedSentence:
        return TaggedSentence(words, self.tags, self.line)


@dataclass
class Example:
    """A classification example: ``words`` and its ``label``; ``line`` in its file."""

    words: list[str]
    label: str
    line: int = 0

    def with_words(self, words: list[str]) -> Example:
        return Example(words, self.label, self.line)


def _where(path: str | Path, line: int) -> str:
    return f"{path}:{line}"


def _lines(path: Path) -> list[str]:
    """The lines of the UTF-8 text file ``path``; another encoding is refused naming the file
    and the line."""
    with open_regular(path) as f:
        data = f.read()
    try:
        return data.decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TpcoreError(f"{_where(path, line)}: not UTF-8 text ({exc.reason} at byte "
                          f"{exc.start}); expected a UTF-8 file") from None


def read_conll(path: str | Path) -> list[TaggedSentence]:
    """Sentences of a CoNLL file (see the module docstring); IOB2 tags are checked per line."""
    path = Path(path)
    lines = _lines(path)
    sentences: list[TaggedSentence] = []
    words: list[str] = []
    tags: list[str] = []
    valid: set[str] = set()
    start = 0
    for number, raw in enumerate(lines, 1):
        cols = raw.split()
        if not cols:
            if words:
                sentences.append(TaggedSentence(words, tags, start))
                words, tags = [], []
            continue
        if cols[0] == DOCSTART:
            continue
        if len(cols) < 2:
            raise TpcoreError(f"{_where(path, number)}: expected 'WORD ... TAG' columns, "
                              f"got {raw.strip()!r}")
        tag = cols[-1]
        if tag not in valid:
            if not _TAG.match(tag):
                raise TpcoreError(f"{_where(path, number)}: tag {tag!r} is not O, B-TYPE or "
                                  "I-TYPE")
            valid.add(tag)
        if not words:
            start = number
        words.append(cols[0])
        tags.append(tag)
    if words:
        sentences.append(TaggedSentence(words, tags, start))
    return sentences


def read_classification(path: str | Path) -> list[Example]:
    """Examples of a ``LABEL<TAB>TEXT`` file (see the module docstring)."""
    path = Path(path)
    examples: list[Example] = []
    for number, raw in enumerate(_lines(path), 1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        label, tab, text = line.partition("\t")
        label, words = label.strip(), text.split()
        if not tab or not label or not words:
            raise TpcoreError(f"{_where(path, number)}: expected 'LABEL<TAB>TEXT', got "
                              f"{line[:60]!r}")
        examples.append(Example(words, label, number))
    return examples


def normalise(word: str, lowercase: bool = False) -> str:
    """The preprocessed form of ``word``: digit runs -> ``#``, optionally lowercased."""
    word = _DIGITS.sub(NUMBER, word)
    return word.lower() if lowercase else word


def normalise_all(sentences: Sequence[Sequence[str]], lowercase: bool = False,
                  ) -> list[list[str]]:
    """:func:`normalise` over many sentences (one regex pass over all their words)."""
    text = _DIGITS.sub(NUMBER, "\n".join("\n".join(s) for s in sentences if s))
    flat = (text.lower() if lowercase else text).split("\n")
    out, i = [], 0
    for s in sentences:
        out.append(flat[i:i + len(s)])
        i += len(s)
    return out


@dataclass
class Vocab:
    """Word <-> id map; ``words[i]`` is the word of id ``i``; ids 0-3 are the specials."""

    words: list[str]
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if tuple(self.words[: len(SPECIALS)]) != SPECIALS:
            raise TpcoreError(f"a vocabulary must start with {SPECIALS}, got {self.words[:4]}")
        self.index = {w: i for i, w in enumerate(self.words)}
        if len(self.index) != len(self.words):
            raise TpcoreError("vocabulary words must be distinct")

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], size: int = VOCAB_SIZE) -> Vocab:
        """The ``size`` most common words (ties: first occurrence first) after the specials."""
        if size < 1:
            raise TpcoreError(f"vocabulary size must be >= 1, got {size}")
        counts = Counter(chain.from_iterable(sentences))
        for s in SPECIALS:
            counts.pop(s, None)
        # Counter.most_common keeps insertion (first occurrence) order among equal counts.
        return cls(list(SPECIALS) + [w for w, _ in counts.most_common(size)])

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, words: Sequence[str]) -> list[int]:
        """Ids of ``words``, ``<unk>`` for words outside the vocabulary."""
        get, unk = self.index.get, self.index[UNK]
        return [get(w, unk) for w in words]


@dataclass
class Labels:
    """Label <-> id map (NER tags or classes), in first-seen order, ``O`` first when present."""

    names: list[str]
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index = {n: i for i, n in enumerate(self.names)}

    @classmethod
    def build(cls, labels: Iterable[str]) -> Labels:
        seen = dict.fromkeys(labels)
        names = list(seen)
        if "O" in seen:
            names.remove("O")
            names.insert(0, "O")
        return cls(names)

    def __len__(self) -> int:
        return len(self.names)

    def ids(self, labels: Sequence[str], where: str) -> list[int]:
        """Ids of ``labels``; an unknown one raises naming ``where`` (``file:line``)."""
        get = self.index.get
        out = [get(label, -1) for label in labels]
        if -1 in out:
            label = labels[out.index(-1)]
            raise TpcoreError(f"{where}: label {label!r} never seen in training; known: "
                              f"{self.names}")
        return out


def _frame(ids: Sequence[int], lengths: np.ndarray, first: int, last: int, fill: int,
           ) -> np.ndarray:
    """``(S, L)`` int32 rows ``first w_1 .. w_n last fill ..`` from the concatenated ids of all
    sentences (``lengths``: words per sentence), ``L = max length + 2``."""
    n = len(lengths)
    out = np.full((n, int(lengths.max(initial=0)) + 2), fill, dtype=np.int32)
    out[:, 0] = first
    out[np.arange(n), lengths + 1] = last
    row = np.repeat(np.arange(n), lengths)
    col = np.arange(len(row)) - np.repeat(np.cumsum(lengths) - lengths, lengths) + 1
    out[row, col] = np.asarray(ids, dtype=np.int32)
    return out


def _filter(items: list, max_words: int) -> list:
    if max_words < 1:
        raise TpcoreError(f"max_words must be >= 1, got {max_words}")
    return [s for s in items if len(s.words) <= max_words]


@dataclass
class Corpus:
    """A preprocessed corpus: the vocabulary and label set (NER tags or classes, from the
    training split), each split's encoded arrays (see the module docstring), the kept
    (preprocessed) sentences or examples per split, ``dropped[split]`` the number over
    ``max_words``, and ``max_len`` (``max_words + 2``)."""

    vocab: Vocab
    labels: Labels
    splits: dict[str, dict[str, np.ndarray]]
    items: dict[str, list]
    dropped: dict[str, int]
    max_len: int


NerData = Corpus
ClassificationData = Corpus


def _lengths(items: Sequence[TaggedSentence] | Sequence[Example]) -> np.ndarray:
    return np.fromiter((len(x.words) for x in items), dtype=np.int64, count=len(items))


def _tag_ids(sentences: Sequence[TaggedSentence], tags: Labels, lengths: np.ndarray,
             source: str) -> list[int]:
    """Tag ids of all sentences, concatenated; an unknown tag raises naming ``source:line`` of
    its sentence."""
    get = tags.index.get
    ids = [get(t, -1) for t in chain.from_iterable(s.tags for s in sentences)]
    if -1 in ids:
        s = sentences[int(np.searchsorted(np.cumsum(lengths), ids.index(-1), side="right"))]
        tags.ids(s.tags, _where(source, s.line))
    return ids


def _encode_words(items: Sequence[TaggedSentence] | Sequence[Example], vocab: Vocab,
                  ) -> dict[str, np.ndarray]:
    """``tokens`` (framed with ``<s>``/``</s>``, padded), ``pad`` and the word ``lengths``."""
    lengths = _lengths(items)
    words = list(chain.from_iterable(x.words for x in items))
    tokens = _frame(vocab.encode(words), lengths, vocab.index[BOS], vocab.index[EOS],
                    vocab.index[PAD])
    pad = np.arange(tokens.shape[1])[None, :] >= lengths[:, None] + 2
    return {"tokens": tokens, "pad": pad, "lengths": lengths}


def encode_tagged(sentences: Sequence[TaggedSentence], vocab: Vocab, tags: Labels,
                  source: str = "<memory>") -> dict[str, np.ndarray]:
    """``tokens, pad, targets, mask`` arrays of preprocessed sentences (module docstring)."""
    out = _encode_words(sentences, vocab)
    lengths = out.pop("lengths")
    out["targets"] = _frame(_tag_ids(sentences, tags, lengths, source), lengths, 0, 0, 0)
    pos = np.arange(out["tokens"].shape[1])[None, :]
    out["mask"] = (pos >= 1) & (pos <= lengths[:, None])
    return out


def encode_classification(examples: Sequence[Example], vocab: Vocab, labels: Labels,
                          source: str = "<memory>") -> dict[str, np.ndarray]:
    """``tokens, pad, targets`` arrays of preprocessed examples (module docstring)."""
    out = _encode_words(examples, vocab)
    del out["lengths"]
    targets = [labels.ids([e.label], _where(source, e.line))[0] for e in examples]
    out["targets"] = np.asarray(targets, dtype=np.int32)
    return out


def _prepare(splits: dict[str, list], max_words: int, vocab_size: int, lowercase: bool,
             sources: dict[str, str] | None, labels_of: Any, encode: Any) -> tuple:
    """Normalise and filter every split, build the vocabulary and label set from ``train``,
    encode; returns ``(vocab, labels, arrays, kept, dropped)``."""
    if "train" not in splits:
        raise TpcoreError(f"splits need 'train'; got {sorted(splits)}")
    kept, dropped = {}, {}
    for name, items in splits.items():
        norm = [x.with_words(w)
                for w, x in zip(normalise_all([x.words for x in items], lowercase), items)]
        kept[name] = _filter(norm, max_words)
        dropped[name] = len(norm) - len(kept[name])
    if not kept["train"]:
        raise TpcoreError(f"no training sentence has at most {max_words} words")
    vocab = Vocab.build((x.words for x in kept["train"]), vocab_size)
    labels = Labels.build(chain.from_iterable(map(labels_of, kept["train"])))
    sources = sources or {}
    arrays = {name: encode(x, vocab, labels, sources.get(name, name))
              for name, x in kept.items()}
    return vocab, labels, arrays, kept, dropped


def prepare_ner(splits: dict[str, list[TaggedSentence]], max_words: int = MAX_WORDS_NER,
                vocab_size: int = VOCAB_SIZE, lowercase: bool = False,
                sources: dict[str, str] | None = None) -> NerData:
    """Preprocess and encode NER splits; ``splits`` must contain ``train``, whose kept sentences
    define the vocabulary and the tag set. ``sources`` names each split's file for messages."""
    return Corpus(*_prepare(splits, max_words, vocab_size, lowercase, sources,
                            lambda s: s.tags, encode_tagged), max_words + 2)


def prepare_classification(splits: dict[str, list[Example]],
                           max_words: int = MAX_WORDS_CLASSIFY, vocab_size: int = VOCAB_SIZE,
                           lowercase: bool = False,
                           sources: dict[str, str] | None = None) -> ClassificationData:
    """Preprocess and encode classification splits (as :func:`prepare_ner`)."""
    return Corpus(*_prepare(splits, max_words, vocab_size, lowercase, sources,
                            lambda e: (e.label,), encode_classification), max_words + 2)


def hold_out(items: list, fraction: float, seed: int) -> tuple[list, list]:
    """Split ``items`` into (kept, held out) with ``round(fraction * len)`` held out at random
    (the paper holds out 10 % of each classification training set for validation)."""
    if not 0 < fraction < 1:
        raise TpcoreError(f"hold-out fraction must be in (0, 1), got {fraction}")
    order = np.random.default_rng(seed).permutation(len(items))
    n_out = int(round(fraction * len(items)))
    out = set(order[:n_out].tolist())
    return ([x for i, x in enumerate(items) if i not in out],
            [x for i, x in enumerate(items) if i in out])


def tag_sequences(ids: np.ndarray, mask: np.ndarray, tags: Labels) -> list[list[str]]:
    """Tag strings per sentence from ``ids (S, L)`` at the ``mask (S, L)`` positions."""
    names = np.asarray(tags.names, dtype=object)
    return [names[row[m]].tolist() for row, m in zip(ids, mask)]


def write_conll(path: str | Path, sentences: Sequence[TaggedSentence]) -> None:
    """Write sentences as a CoNLL-2003-style file (``WORD POS CHUNK TAG``, with placeholder
    ``NN O`` columns, a ``-DOCSTART-`` header), atomically."""
    lines = [f"{DOCSTART} -X- -X- O", ""]
    for s in sentences:
        lines += [f"{w} NN O {t}" for w, t in zip(s.words, s.tags)]
        lines.append("")
    write_text(path, "\n".join(lines) + "\n")


def write_classification(path: str | Path, examples: Sequence[Example]) -> None:
    """Write examples as ``LABEL<TAB>TEXT`` lines, atomically."""
    write_text(path, "".join(f"{e.label}\t{' '.join(e.words)}\n" for e in examples))

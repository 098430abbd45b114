"""Reading and preprocessing a CoNLL-2003-sized NER file (about 200,000 tokens, 14,000
sentences, a Zipf vocabulary of 25,000 word forms with numbers), target under 2 s; plus the
conlleval scorer over the same tags.

Run: ``pytest bench/bench_nlp.py --benchmark-enable``. ``extra_info["tokens_per_s"]`` is stored;
the machine is shared, so absolute figures are noisy (compare the rows of one run: reading alone
vs reading + preprocessing + encoding).
"""

import numpy as np
import pytest

from tpcore.metrics import conll_scores
from tpcore.tasks.nlp import TaggedSentence, prepare_ner, read_conll, write_conll

N_TOKENS = 200_000
TYPES = ("PER", "LOC", "ORG", "MISC")


def _corpus(seed: int = 0) -> list[TaggedSentence]:
    """Sentences of 1-40 words (about 14.3 on average); words Zipf (70 %) or uniform (30 %)
    over 25,000 forms (about 20,000 distinct, like CoNLL-2003's training file); IOB2 tags."""
    gen = np.random.default_rng(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    forms = [letters[i % 26] + letters[i // 26 % 26] + letters[i // 676 % 26]
             if i % 7 else f"{i % 100}.{i}" for i in range(25_000)]
    sents, total = [], 0
    while total < N_TOKENS:
        n = int(min(40, 1 + gen.geometric(1 / 14)))
        ids = np.where(gen.random(n) < 0.3, gen.integers(0, len(forms), n),
                       np.minimum(gen.zipf(1.3, n), len(forms)) - 1)
        tags, inside = [], None
        for u, t in zip(gen.random(n), gen.integers(0, 4, n)):
            if u < 0.15:
                inside = TYPES[t]
                tags.append(f"B-{inside}")
            elif u < 0.22 and inside:
                tags.append(f"I-{inside}")
            else:
                inside = None
                tags.append("O")
        sents.append(TaggedSentence([forms[i] for i in ids], tags))
        total += n
    return sents


@pytest.fixture(scope="module")
def conll_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("nlp") / "train.txt"
    write_conll(path, _corpus())
    return path


def _read(path):
    return read_conll(path)


def _read_and_prepare(path):
    return prepare_ner({"train": read_conll(path)}, max_words=30)


@pytest.mark.parametrize("what", ["read", "read+prepare"])
def test_conll_read_prepare(benchmark, conll_file, what):
    fn = _read if what == "read" else _read_and_prepare
    out = benchmark.pedantic(fn, args=(conll_file,), rounds=3, iterations=1)
    n = sum(len(s.words) for s in read_conll(conll_file))
    benchmark.extra_info["tokens"] = n
    benchmark.extra_info["tokens_per_s"] = n / benchmark.stats.stats.mean
    assert n >= N_TOKENS
    if what == "read+prepare":
        assert len(out.vocab) == 10_004 and out.splits["train"]["tokens"].shape[1] == 32


def test_conlleval_scoring(benchmark, conll_file):
    gold = [s.tags for s in read_conll(conll_file)]
    pred = [t[::-1] for t in gold]
    s = benchmark.pedantic(conll_scores, args=(gold, pred), rounds=3, iterations=1)
    benchmark.extra_info["tokens_per_s"] = sum(map(len, gold)) / benchmark.stats.stats.mean
    assert 0 < s.f1 < 100

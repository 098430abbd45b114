"""Hand-built programs: a readable reverse program and random programs of a given shape.

They exercise the interpreter, code generation and import without a trained model (tests and
benches use them). Host-only code (NumPy).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from tpcore.programs.ir import Classifier, Head, Mlp, Program, Variable, numerical_range

SPECIALS = ("<pad>", "<s>", "</s>")


def base_variables(vocab: int, max_len: int,
                   words: Sequence[str] | None = None) -> dict[str, Variable]:
    """``tokens`` (``<pad> <s> </s>`` then ``words``, default ``0 .. vocab-1``), ``positions``
    and ``ones``."""
    words = tuple(words) if words is not None else tuple(str(i) for i in range(vocab))
    return {
        "tokens": Variable("tokens", "categorical", SPECIALS + words),
        "positions": Variable("positions", "categorical", tuple(range(max_len))),
        "ones": Variable("ones", "numerical", (1,)),
    }


def reverse_program(vocab: int = 8, max_len: int = 10, rule: str = "closest",
                    words: Sequence[str] | None = None) -> Program:
    """Reverse ``<s> x_1 .. x_n </s>`` in two layers (the paper's C.3 solution); ``words``: the
    content tokens (default ``"0" .. str(vocab - 1)``).

    ``attn_0_0`` copies the position of ``</s>`` (the length), ``mlp_0_0`` computes
    ``length - position``, ``attn_1_0`` reads the token there; the classifier copies it.
    """
    v = base_variables(vocab, max_len, words)
    tok = v["tokens"].values
    eos = tok.index("</s>")
    v["attn_0_0_outputs"] = Variable("attn_0_0_outputs", "categorical", v["positions"].values)
    length = Head("attn_0_0", "categorical", "tokens", "tokens", "positions", "attn_0_0_outputs",
                  np.full(len(tok), eos, dtype=np.int64), rule)
    v["mlp_0_0_outputs"] = Variable("mlp_0_0_outputs", "categorical", tuple(range(max_len)))
    end, pos = np.meshgrid(np.arange(max_len), np.arange(max_len), indexing="ij")
    table = np.where(end >= pos, end - pos, 0).astype(np.int64)
    target = Mlp("mlp_0_0", "categorical", ("attn_0_0_outputs", "positions"), "mlp_0_0_outputs",
                 table, 0)
    v["attn_1_0_outputs"] = Variable("attn_1_0_outputs", "categorical", tok)
    read = Head("attn_1_0", "categorical", "mlp_0_0_outputs", "positions", "tokens",
                "attn_1_0_outputs", np.arange(max_len, dtype=np.int64), rule)
    classes = tok[3:]
    weights = np.zeros((len(tok), len(classes)))
    weights[3:] = np.eye(len(classes))
    clf = Classifier(classes, ("attn_1_0_outputs",), {"attn_1_0_outputs": weights},
                     np.zeros(len(classes)))
    return Program("reverse", v, [length, target, read], clf, bos="<s>", eos="</s>", pad="<pad>")


def counting_program(key: str, target: int | None = None, value: str = "ones") -> Program:
    """One numerical head over ``vocab=4, max_len=8``: a query value ``q`` looks for the key
    value ``q`` (or ``target``) and sums ``value`` over the keys it finds (a selector width for
    ``ones``)."""
    v = base_variables(4, 8)
    out = "num_attn_0_0_outputs"
    v[out] = Variable(out, "numerical", numerical_range(v[value], 8))
    pred = np.arange(v[key].size) if target is None else np.full(v[key].size, target)
    head = Head("num_attn_0_0", "numerical", key, key, value, out, pred.astype(np.int64))
    clf = Classifier(("x", "y"), (out,), {out: np.zeros((1, 2))}, np.zeros(2))
    return Program("count", v, [head], clf, bos="<s>", eos="</s>", pad="<pad>")


def random_program(seed: int = 0, *, layers: int = 2, cat_heads: int = 2, num_heads: int = 2,
                   cat_mlps: int = 1, num_mlps: int = 1, vocab: int = 8, max_len: int = 10,
                   rule: str | None = None, causal: bool = False) -> Program:
    """A random well-formed program with the module layout of the Transformer Program model.

    Each layer's heads and MLPs read variables defined by earlier layers (MLPs also read the
    current layer's heads). Predicates may match nothing (``-1``); ``rule=None`` mixes rules.
    Numerical heads read ``ones`` or a numerical variable whose values stay within ``0..max_len``.
    Class 0 is masked when ``seed`` is a multiple of 3.
    """
    rng = np.random.default_rng(seed)
    v = base_variables(vocab, max_len)
    modules: list[Head | Mlp] = []

    def pick(kind: str, names: list[str]) -> str:
        pool = [n for n in names if v[n].kind == kind and (kind == "categorical" or
                                                          max(v[n].values) <= max_len)]
        return pool[rng.integers(len(pool))]

    for layer in range(layers):
        visible = list(v)
        for h in range(cat_heads + num_heads):
            kind = "categorical" if h < cat_heads else "numerical"
            name = f"attn_{layer}_{h}" if kind == "categorical" else f"num_attn_{layer}_{h}"
            q, k = pick("categorical", visible), pick("categorical", visible)
            val = pick(kind, visible)
            pred = rng.integers(-1, v[k].size, size=v[q].size)
            out = f"{name}_outputs"
            values = v[val].values if kind == "categorical" else numerical_range(v[val], max_len)
            v[out] = Variable(out, kind, values)
            head_rule = rule or ("closest", "published")[rng.integers(2)]
            modules.append(Head(name, kind, q, k, val, out, pred.astype(np.int64), head_rule))
        visible = list(v)
        for m in range(cat_mlps + num_mlps):
            kind = "categorical" if m < cat_mlps else "numerical"
            name = f"mlp_{layer}_{m}" if kind == "categorical" else f"num_mlp_{layer}_{m}"
            inputs = tuple(pick(kind, visible) for _ in range(1 + int(rng.integers(2))))
            out = f"{name}_outputs"
            v[out] = Variable(out, "categorical", tuple(range(max_len)))
            shape = tuple(v[x].size for x in inputs)
            table = rng.integers(0, max_len, size=shape).astype(np.int64)
            modules.append(Mlp(name, kind, inputs, out, table, int(rng.integers(max_len))))
    classes = v["tokens"].values[3:]
    feats = tuple(v)
    weights = {f: rng.normal(size=(v[f].size if v[f].kind == "categorical" else 1, len(classes)))
               for f in feats}
    masked = (0,) if seed % 3 == 0 else ()
    clf = Classifier(classes, feats, weights, rng.normal(size=len(classes)), masked)
    return Program(f"random{seed}", v, modules, clf, causal=causal, bos="<s>", eos="</s>",
                   pad="<pad>")


def random_inputs(program: Program, batch: int, seed: int = 0,
                  min_len: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Random framed inputs ``(ids (B, max_len), lengths (B,))``: ``<s>``, tokens, ``</s>``."""
    rng = np.random.default_rng(seed)
    tok = program.tokens.values
    n = program.max_len
    ids = rng.integers(3, len(tok), size=(batch, n))
    lengths = rng.integers(max(min_len, 2), n + 1, size=batch)
    ids[:, 0] = tok.index("<s>")
    ids[np.arange(batch), lengths - 1] = tok.index("</s>")
    ids[np.arange(n)[None, :] >= lengths[:, None]] = tok.index("<pad>")
    return ids.astype(np.int64), lengths.astype(np.int64)


def content_tokens(program: Program) -> list[str]:
    """The tokens an input's content is made of: the vocabulary less BOS, EOS and padding."""
    specials = {program.bos, program.eos, program.pad}
    return [t for t in map(str, program.tokens.values) if t not in specials]


def input_count(program: Program) -> int:
    """How many framed inputs ``program`` takes: every sequence of 1 up to ``max_len`` less
    the framing tokens of :func:`content_tokens`."""
    k, n = len(content_tokens(program)), _content_len(program)
    return sum(k ** length for length in range(1, n + 1))


def all_inputs(program: Program) -> Iterator[list[str]]:
    """Every framed input (:func:`input_count` of them), shortest first."""
    tokens = content_tokens(program)
    for length in range(1, _content_len(program) + 1):
        for content in itertools.product(tokens, repeat=length):
            yield program.frame(content)


def sample_inputs(program: Program, count: int, seed: int = 0) -> list[list[str]]:
    """``count`` random framed inputs: a content length uniform in ``1 ..`` the longest, then
    tokens uniform over :func:`content_tokens` (so short inputs are not outnumbered by long
    ones as in :func:`all_inputs`)."""
    rng = np.random.default_rng(seed)
    tokens = content_tokens(program)
    lengths = rng.integers(1, _content_len(program) + 1, size=count)
    return [program.frame([tokens[i] for i in rng.integers(len(tokens), size=n)])
            for n in lengths.tolist()]


def _content_len(program: Program) -> int:
    return program.max_len - (program.bos is not None) - (program.eos is not None)

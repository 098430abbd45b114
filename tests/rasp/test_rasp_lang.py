"""The program language: what it builds, and the one-line refusals of what the architecture
cannot express or the program gets wrong."""

from __future__ import annotations

import pytest

from tpcore import rasp
from tpcore.errors import TpcoreError
from tpcore.programs.values import LIMITS

VOCAB = ("<pad>", "<s>", "a", "b", "c")


def _program(out, **kw):
    return rasp.Program(out, VOCAB, 5, bos="<s>", pad="<pad>", **kw)


def test_nodes_resolve_to_value_sets_predicates_and_tables():
    same = rasp.selector_width(rasp.select(rasp.tokens, rasp.tokens, rasp.EQ)).named("same")
    big = rasp.map(lambda c: "many" if c > 1 else "one", same).named("big")
    p = _program(big)
    assert p.nodes[same].values == tuple(range(6)) and p.nodes[same].predicate == (
        0, 1, 2, 3, 4)
    assert p.nodes[big].values == ("one", "many")
    assert p.nodes[big].table == (0, 0, 1, 1, 1, 1)
    assert p.classes == ("one", "many") and [n.name for n in p.order()][-1] == "big"


@pytest.mark.parametrize("build, message", [
    (lambda: rasp.aggregate(rasp.select(rasp.tokens, rasp.tokens, lambda k, q: k != q),
                            rasp.tokens).named("h"),
     "h: the predicate matches 4 key values ('<s>', 'a', 'b', 'c') for query value '<pad>'; a "
     "head matches one key value per query value"),
    (lambda: rasp.aggregate(rasp.select(rasp.tokens, rasp.tokens, {"z": "a"}),
                            rasp.tokens).named("h"),
     "h: the predicate maps 'z', which is not a value of 'tokens'"),
    (lambda: rasp.aggregate(rasp.select(rasp.tokens, rasp.tokens, {"a": "z"}),
                            rasp.tokens).named("h"),
     "h: the predicate maps query value 'a' to 'z', which is not a value of 'tokens'"),
    (lambda: rasp.map(lambda t: t == "a", rasp.tokens).named("m"),
     "m: f('<pad>',) returned False; return a string or a number (not a bool)"),
    (lambda: rasp.map(lambda t: 1 / 0, rasp.tokens).named("m"),
     "m: f('<pad>',) raised ZeroDivisionError: division by zero"),
])
def test_what_cannot_be_compiled_is_refused_naming_the_node(build, message):
    with pytest.raises(TpcoreError) as err:
        _program(rasp.map(str, build()))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize("build, message", [
    (lambda: rasp.aggregate(rasp.select(rasp.tokens, rasp.tokens, rasp.EQ), rasp.ones),
     "aggregate: values 'ones' are numerical; use aggregate_sum or selector_width"),
    (lambda: rasp.aggregate_sum(rasp.select(rasp.tokens, rasp.tokens, rasp.EQ), rasp.tokens),
     "aggregate: values 'tokens' are categorical; use aggregate"),
    (lambda: rasp.select(rasp.ones, rasp.tokens, rasp.EQ),
     "select: keys 'ones' is numerical"),
    (lambda: rasp.sequence_map(lambda a, b: a, rasp.tokens, rasp.ones),
     "sequence_map reads categorical 'tokens' and numerical 'ones'"),
    (lambda: rasp.map(lambda t: t, "tokens"),
     "map input: 'tokens' is not a variable of the program language"),
    (lambda: rasp.select(rasp.tokens, rasp.tokens, "=="),
     "select: predicate '==' is neither a function"),
])
def test_wrong_kinds_are_refused_when_built(build, message):
    with pytest.raises(TpcoreError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()


def test_program_level_refusals():
    width = rasp.selector_width(rasp.select(rasp.tokens, rasp.tokens, rasp.EQ))
    with pytest.raises(TpcoreError, match="is numerical; map it to categorical labels"):
        _program(width)
    with pytest.raises(TpcoreError, match="takes the value 'c', which is not among the "
                                          r"classes \['a', 'b'\]"):
        _program(rasp.map(lambda t: t if t in "abc" else "a", rasp.tokens), classes=("a", "b"))
    a = rasp.map(lambda t: t, rasp.tokens).named("x")
    b = rasp.map(lambda t: t, a).named("x")
    with pytest.raises(TpcoreError, match="two nodes are named 'x'"):
        _program(b)
    with pytest.raises(TpcoreError, match="framing token '</s>' is not in the vocabulary"):
        rasp.Program(b, VOCAB, 5, eos="</s>")
    with pytest.raises(TpcoreError, match="is not a name: expected an ASCII Python identifier"):
        rasp.map(str, rasp.tokens).named("not a name")


def test_a_cycle_is_refused_naming_a_node_on_it():
    a = rasp.map(lambda t: t, rasp.tokens).named("a")
    b = rasp.map(lambda t: t, a).named("b")
    a.parents = (b,)
    with pytest.raises(TpcoreError, match="node 'b' reads itself"):
        _program(b)


def test_sizes_beyond_the_limits_are_refused_before_tabulating():
    vocab = tuple(f"t{i}" for i in range(1500))
    pair = rasp.sequence_map(lambda a, b: 0, rasp.tokens, rasp.tokens).named("pair")
    with pytest.raises(TpcoreError, match="pair: table entries: 2,250,000 exceeds the limit"):
        rasp.Program(rasp.map(str, pair), vocab, 4)
    with pytest.raises(TpcoreError, match="maximum length"):
        rasp.Program(rasp.tokens, VOCAB, LIMITS.max_len + 1)

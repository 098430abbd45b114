"""Write a program in RASP's primitives, compile it into Transformer Program weights that compute
it exactly, and verify it every way tpcore runs programs.

::

    from tpcore import rasp

    eos = rasp.aggregate(rasp.select(rasp.tokens, rasp.indices, lambda k, q: k == "</s>"),
                         rasp.indices).named("eos")
    target = rasp.sequence_map(lambda e, i: e - i, eos, rasp.indices).named("target")
    out = rasp.aggregate(rasp.select(rasp.indices, target, rasp.EQ), rasp.tokens)
    program = rasp.Program(out, vocab, max_len=8, bos="<s>", eos="</s>", pad="<pad>")
    compiled = rasp.compile(program)          # a ProgramModel, checked on 1,000 inputs
    rasp.verify(compiled).summary()           # every input, five engines

The language: :mod:`tpcore.rasp.lang`; layout and IR: :mod:`tpcore.rasp.lower`; weights:
:mod:`tpcore.rasp.weights`; the reference interpreter: :mod:`tpcore.rasp.evaluate`; compile and
verify: :mod:`tpcore.rasp.compiler`; the RASP tasks written in it: :mod:`tpcore.rasp.library`.
"""

from tpcore.rasp.compiler import Compiled, Verification, compile, verify
from tpcore.rasp.lang import (
    EQ,
    Node,
    Program,
    aggregate,
    aggregate_sum,
    indices,
    map,
    ones,
    select,
    selector_width,
    sequence_map,
    tokens,
)

__all__ = ["EQ", "Compiled", "Node", "Program", "Verification", "aggregate", "aggregate_sum",
           "compile", "indices", "map", "ones", "select", "selector_width", "sequence_map",
           "tokens", "verify"]

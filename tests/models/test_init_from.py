"""Initialising a Transformer Program model from a program IR: the model's argmax is the
program's choice, only the chosen parts change, and a program that does not fit is refused."""

import numpy as np
import pytest

from tpcore.backend import to_host
from tpcore.errors import TpcoreError
from tpcore.experiments.table5 import solution
from tpcore.models.init_from import init_from_program, parse_parts
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.programs.ir import Head
from tpcore.tasks.registry import make_task

TASK = make_task("reverse", 8, 8, 200, 0, 1)


def model(seed=0, **kw):
    cfg = dict(vocab_size=len(TASK.vocab), max_len=TASK.max_len, n_classes=len(TASK.classes),
               n_layers=2, n_cat_heads=1, n_num_heads=0, n_cat_mlps=1, n_num_mlps=0, seed=seed)
    return ProgramModel(ProgramConfig(**{**cfg, **kw}))


def program():
    return solution(TASK.vocab, TASK.classes, TASK.max_len)


def params(m):
    return {k: to_host(p.data) for k, p in m.named_parameters()}


def test_read_and_predicate_make_the_argmax_the_programs_choice():
    m = model()
    done = init_from_program(m, program(), ["read", "predicate"], TASK.vocab)
    assert done == ["attn_0_0.read", "attn_0_0.predicate", "mlp_0_0.read", "attn_1_0.read",
                    "attn_1_0.predicate"]
    dp = {x.name: x for x in m.discrete().modules}
    a0, mlp, a1 = dp["attn_0_0"], dp["mlp_0_0"], dp["attn_1_0"]
    assert (a0.query, a0.key, a0.value) == ("tokens", "tokens", "positions")
    assert (a0.predicate[: len(TASK.vocab)] == TASK.vocab.index("</s>")).all()
    assert mlp.inputs == ("attn_0_0_outputs", "positions")
    assert (a1.query, a1.key, a1.value) == ("mlp_0_0_outputs", "positions", "tokens")
    assert (a1.predicate[: TASK.max_len] == np.arange(TASK.max_len)).all()


def test_only_the_chosen_parts_change():
    m, fresh = model(), params(model())
    init_from_program(m, program(), ["attn_1_0.predicate"], TASK.vocab)
    after = params(m)
    changed = {k for k in after if not np.array_equal(after[k], fresh[k])}
    assert changed == {"layers.1.cat_pred"}
    np.testing.assert_array_equal(after["layers.0.cat_pred"], fresh["layers.0.cat_pred"])


def test_classifier_is_copied():
    m = model()
    init_from_program(m, program(), ["classifier"], TASK.vocab, TASK.classes)
    w = m.discrete().classifier_weights["attn_1_0_outputs"]
    expected = program().classifier.weights["attn_1_0_outputs"]
    np.testing.assert_allclose(w[: len(TASK.vocab)], expected)


def test_the_initialised_model_computes_the_program_where_it_is_set():
    """With every part and the classifier set, the discrete model and the program agree on the
    first layer's head (the MLP is never initialised, so the output need not)."""
    m = model()
    init_from_program(m, program(), ["read", "predicate", "classifier"], TASK.vocab,
                      TASK.classes)
    head = next(x for x in m.discrete().modules if x.name == "attn_0_0")
    target = program().module("attn_0_0")
    assert isinstance(target, Head)
    np.testing.assert_array_equal(head.predicate[: len(TASK.vocab)], target.predicate)


@pytest.mark.parametrize("parts,kw,msg", [
    (["read"], dict(n_layers=1), "the model has 1 layers"),
    (["read"], dict(n_cat_heads=0), "attn_0_0"),
    (["read"], dict(max_len=TASK.max_len - 2), "value 6 of 'positions'"),
    (["gates"], {}, "init part 'gates'"),
    (["attn_9_9.read"], {}, "init part 'attn_9_9': the program has no such module"),
])
def test_a_program_that_does_not_fit_is_refused(parts, kw, msg):
    m = model(**kw)
    before = params(m)
    with pytest.raises(TpcoreError, match=msg):
        init_from_program(m, program(), parts, TASK.vocab)
    assert all(np.array_equal(before[k], v) for k, v in params(m).items())


def test_tokens_outside_the_vocabulary_are_refused():
    other = make_task("reverse", 10, 8, 200, 0, 1)
    m = model(vocab_size=len(other.vocab), n_classes=len(other.classes))
    prog = solution(TASK.vocab, TASK.classes, TASK.max_len)
    with pytest.raises(TpcoreError, match="classes"):
        init_from_program(m, prog, ["classifier"], other.vocab, other.classes)


def test_parse_parts():
    assert parse_parts(["read", "mlp_0_0.read"]) == [(None, "read"), ("mlp_0_0", "read")]
    with pytest.raises(TpcoreError, match="expected one of"):
        parse_parts(["attn_0_0.classifier"])
    with pytest.raises(TpcoreError, match="no init parts"):
        parse_parts([])

"""``tpcore.rasp.compile`` and ``verify``: written programs become models that compute them
exactly, checked five ways; what a model cannot hold is refused; a miscompilation is caught."""

from __future__ import annotations

import collections
import itertools
import zlib

import numpy as np
import pytest

from tpcore import rasp
from tpcore.backend import to_host
from tpcore.errors import TpcoreError
from tpcore.models import load
from tpcore.nn.module import save
from tpcore.rasp import lower
from tpcore.rasp.evaluate import evaluate
from tpcore.rasp.library import TASKS, task_check

VOCAB = ("<pad>", "<s>", "a", "b", "c")
SMALL = {"reverse", "sort", "induction"}


def _stable(*args) -> int:
    """A hash of labels that does not change between processes."""
    return zlib.crc32(repr(args).encode())


def random_program(seed: int) -> rasp.Program:
    """A random program over three symbols and at most four of them: categorical heads with
    random partial predicates, numerical heads summing ones or earlier sums, and categorical and
    numerical maps of one or two inputs with random tables."""
    rng = np.random.default_rng(seed)
    cat = {rasp.tokens: VOCAB, rasp.indices: tuple(range(5))}
    num = {rasp.ones: (1,)}
    for _ in range(int(rng.integers(2, 7))):
        kind = int(rng.integers(5))
        if kind in (0, 1):
            keys, queries = (list(cat)[int(rng.integers(len(cat)))] for _ in range(2))
            pred = {q: cat[keys][int(rng.integers(len(cat[keys])))]
                    for q in cat[queries] if rng.random() < 0.7}
            sel = rasp.select(keys, queries, pred)
            if kind == 0:
                values = list(cat)[int(rng.integers(len(cat)))]
                cat[rasp.aggregate(sel, values)] = cat[values]
            else:
                values = list(num)[int(rng.integers(len(num)))]
                if max(num[values]) * 5 <= 25:
                    top = 5 * max(num[values])
                    num[rasp.aggregate_sum(sel, values)] = tuple(range(top + 1))
        else:
            pool = num if kind == 4 else cat
            ins = [list(pool)[int(rng.integers(len(pool)))]
                   for _ in range(int(rng.integers(1, 3)))]
            salt = int(rng.integers(1000))
            out = 2 + int(rng.integers(3))

            def f(*a, salt=salt, out=out):
                return _stable(salt, *a) % out

            node = rasp.map(f, ins[0]) if len(ins) == 1 else rasp.sequence_map(f, *ins)
            cat[node] = tuple({f(*a) for a in itertools.product(*(pool[x] for x in ins))})
    last = list(cat)[-1]
    output = rasp.map(lambda x: _stable(x) % 3, last).named("out")
    return rasp.Program(output, VOCAB, 5, bos="<s>", pad="<pad>", causal=bool(seed % 2),
                        name=f"random{seed}")


@pytest.mark.parametrize("seed", range(24))
def test_random_programs_compile_exactly_on_every_input(seed):
    compiled = rasp.compile(random_program(seed), check=0)
    engines = rasp.compiler.ENGINES if seed < 4 else ("written", "model", "numpy", "numba")
    v = rasp.verify(compiled, engines)
    assert v.exhaustive and v.inputs == 3 + 9 + 27 + 81
    assert v.ok, v.first


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_written_tasks_compute_their_targets(name):
    t = TASKS[name]
    compiled = rasp.compile(t.program())
    assert compiled.check.ok and compiled.check.inputs == 1000
    small = name in SMALL
    acc = task_check(compiled, t, exhaustive=300_000 if small else 0, sample=1000)
    assert acc["exhaustive"] == small
    assert acc["token_accuracy"] == 1.0 and acc["sequence_accuracy"] == 1.0


def test_every_engine_agrees_on_every_input_of_sort():
    v = rasp.verify(rasp.compile(TASKS["sort"].program()))
    assert v.exhaustive and v.inputs == 19_530 and v.ok
    assert set(v.agree) == set(rasp.compiler.ENGINES)


def test_layers_fewer_than_needed_are_refused_naming_the_chain_more_are_padding():
    program = TASKS["induction"].program()
    with pytest.raises(TpcoreError) as err:
        rasp.compile(program, layers=1)
    assert str(err.value) == ("program 'induction' needs 2 layers, not 1: prev (layer 0) -> "
                              "follows (layer 1)")
    deeper = rasp.compile(program, layers=4)
    assert deeper.model.config.n_layers == 4 and deeper.check.ok


def _widest(layers: dict) -> dict[str, int]:
    """The most modules of each kind in one layer, for ``layers``: module -> (layer, kind)."""
    count = collections.Counter(layers.values())
    return {kind: max([n for (_, k), n in count.items() if k == kind], default=0)
            for kind in lower.KINDS}


@pytest.mark.parametrize("name", ["most_freq", "sort", "dyck2", *(f"random{s}" for s in range(8))])
@pytest.mark.parametrize("extra", [0, 2])
def test_placement_reads_what_is_written_and_keeps_layers_narrow(name, extra):
    program = (random_program(int(name[6:])) if name.startswith("random")
               else TASKS[name].program())
    first = {}
    for node in program.nodes:
        if not isinstance(node, rasp.lang.Input):
            kind = lower.module_kind(node)
            first[node] = (max((lower.earliest(kind, first[p][1], first[p][0])
                                for p in node.parents if p in first), default=0), kind)
    needed = 1 + max(layer for layer, _ in first.values())
    placed = lower.assign(program, needed + extra)
    for node, where in placed.items():
        assert where.layer < needed + extra
        for p in node.parents:
            if p in placed:
                assert lower.earliest(where.kind, placed[p].kind, placed[p].layer) <= where.layer
    spread = _widest({n: (p.layer, p.kind) for n, p in placed.items()})
    assert all(spread[k] <= w for k, w in _widest(first).items())
    if name == "most_freq":  # earliest layers: 6 + 6 heads and 15 + 15 MLPs in the widest
        assert _widest(first) == {"attn": 6, "num_attn": 6, "mlp": 15, "num_mlp": 15}
        assert extra or spread == {"attn": 6, "num_attn": 3, "mlp": 12, "num_mlp": 7}


def test_placement_names_modules_as_the_model_does():
    compiled = rasp.compile(TASKS["dyck1"].program())
    assert compiled.placed == {"opened": "num_attn_0_0", "closed": "num_attn_0_1",
                               "state": "num_mlp_0_0", "failed": "attn_1_0", "dyck1": "mlp_1_0"}
    assert compiled.ir.meta["written_names"]["attn_1_0"] == "failed"


def test_a_miscompilation_is_caught(monkeypatch):
    compiled = rasp.compile(TASKS["reverse"].program())
    pred = compiled.model.layers[1].cat_pred
    pred.data[0] = pred.data[0][::-1].copy()  # a wrong predicate in the last head
    v = rasp.verify(compiled, ("written", "model", "numpy"))
    assert v.agree["numpy"] == v.inputs and v.agree["model"] < v.inputs
    first = v.first["model"]
    assert set(first) == {"input", "position", "expected", "got"}
    real = rasp.compiler.build

    def corrupt(*args):
        model = real(*args)
        model.layers[0].cat_pred.data[0] = 0.0
        return model

    monkeypatch.setattr(rasp.compiler, "build", corrupt)
    with pytest.raises(TpcoreError, match="miscompiled 'reverse': the model engine disagrees"):
        rasp.compile(TASKS["reverse"].program())


def test_any_positive_margin_is_exact_in_the_discrete_model():
    for margin in (0.5, 3.0, 100.0):
        assert rasp.compile(TASKS["double_hist"].program(), margin=margin).check.ok


def test_a_compiled_model_is_an_ordinary_model(tmp_path):
    t = TASKS["sort"]
    compiled = rasp.compile(t.program())
    save(compiled.model, tmp_path / "sort", {"vocab": list(t.vocab()),
                                             "classes": list(t.classes())})
    again = load(tmp_path / "sort.npz")
    ids = np.array([[1, 5, 3, 4, 3, 2, 0, 0]])
    pad = ids == 0
    assert (to_host(again.forward(ids, pad).argmax(-1))
            == to_host(compiled.model.forward(ids, pad).argmax(-1))).all()
    # the hooks see the written program's variables: every node's value, one-hot
    logits, cache = compiled.model.run_with_cache(ids, pad=pad)
    env = evaluate(compiled.program, ids, (~pad).sum(axis=1))
    for node, name in compiled.placed.items():
        var = compiled.ir.variables[f"{name}_outputs"]
        node_obj = next(n for n in compiled.program.nodes if n.name == node)
        got = np.asarray(to_host(cache[f"{name}_outputs"]))
        want = env[node_obj]
        if var.kind == "categorical":
            assert (got.argmax(-1)[~pad] == want[~pad]).all(), node
        else:
            assert np.allclose(got[~pad], want[~pad]), node

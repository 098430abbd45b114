"""Counting modules: loop references, float64 gradchecks, stream placement, discrete gate."""

import numpy as np
import pytest

from tpcore.counts import EXPERTS, expert_features, prefix_counts
from tpcore.errors import TpcoreError
from tpcore.models import load
from tpcore.models.counting import (
    CountingConfig,
    CountingProgramModel,
    SparseExpertCountingNetwork,
    variant_flags,
)
from tpcore.nn.gradcheck import assert_gradients
from tpcore.nn.losses import cross_entropy_backward, cross_entropy_forward
from tpcore.nn.module import save


def _batch(rng, b=4, n=7, v=5):
    tokens = rng.integers(1, v, (b, n))
    pad = np.zeros((b, n), bool)
    pad[1, 5:] = True
    pad[2, 2:] = True
    tokens[pad] = 0
    return tokens, pad


def _loop_features(tokens, pad, v):
    """Per-sequence loops over the definitions in the module docstring."""
    b, n = tokens.shape
    prefix = np.zeros((b, n, v))
    experts = np.zeros((5, b, n))
    for s in range(b):
        seq = [int(t) for t, p in zip(tokens[s], pad[s]) if not p]
        hist = [seq.count(u) for u in range(v)]
        for t, x in enumerate(seq):
            for u in range(v):
                prefix[s, t, u] = seq[:t].count(u)
            experts[:, s, t] = (len(seq), hist[x], hist[x] == max(hist), hist[x] == 1,
                                hist[x] / len(seq))
    return prefix, experts


def test_features_match_loops(rng):
    tokens, pad = _batch(rng)
    want_p, want_e = _loop_features(tokens, pad, 5)
    np.testing.assert_array_equal(prefix_counts(tokens, 5, pad, "float64"), want_p)
    h, e = expert_features(tokens, 5, pad, "float64")
    np.testing.assert_allclose(e, want_e)
    np.testing.assert_array_equal(h.sum(axis=1), (~pad).sum(axis=1))


def _model(variant="both", **kw):
    base = dict(vocab_size=5, max_len=7, n_classes=4, n_layers=2, n_cat_heads=1, n_num_heads=1,
                n_cat_mlps=1, n_num_mlps=1, d_mlp=6, masked_classes=(3,), seed=2)
    base.update(kw)
    return CountingProgramModel(CountingConfig(**base, **variant_flags(variant)))


def test_expert_gate_gradients(rng):
    tokens, pad = _batch(rng)
    net = SparseExpertCountingNetwork(5, 0, np.random.default_rng(1), 1.0, "float64")
    r = rng.normal(size=(1, *tokens.shape))
    noise = rng.gumbel(size=(tokens.shape[0], len(EXPERTS)))

    def loss(*_):
        y, cache = net.forward(tokens, pad, lambda shape: noise, 0.7)
        return float((y * r).sum()), cache

    net.zero_grad()
    _, cache = loss()
    net.backward(r, cache)
    assert np.abs(net.w.grad).max() > 0
    for p in (net.w, net.b):
        assert_gradients(lambda *_: loss()[0], [p.data], [p.grad], tol=1e-6)


@pytest.mark.parametrize("variant", ["prefix", "both"])
def test_model_gradients(rng, variant):
    model = _model(variant).astype(np.float64)
    tokens, pad = _batch(rng)
    targets, mask = rng.integers(0, 3, tokens.shape), ~pad

    def loss_fn(*_):
        logits = model.forward(tokens, pad, rng=np.random.default_rng(7), tau=1.3)
        return cross_entropy_forward(logits, targets, mask)

    model.zero_grad()
    _, cache = loss_fn()
    model.backward(cross_entropy_backward(cache))
    for name, p in model.named_parameters():
        try:
            assert_gradients(lambda *_: loss_fn()[0], [p.data], [p.grad], tol=1e-5,
                             max_entries=15)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


def test_stream_placement(rng):
    model = _model("both")
    num = model.variable_names("numerical")
    assert num[:6] == ["ones"] + [f"prefix_count_{v}" for v in range(5)]
    assert num.index("expert_count") == 7  # after layer 0's numerical head
    l0, l1 = model.layers
    assert l0.p == 6 and l1.p == 8  # layer 0 cannot read the experts, layer 1 can
    tokens, pad = _batch(rng)
    model.forward(tokens, pad)
    xn = model.cache["xn"]
    np.testing.assert_array_equal(xn[1:6], prefix_counts(tokens, 5, pad).transpose(2, 0, 1))
    _, e = expert_features(tokens, 5, pad)
    choice = model.expert_network.choice(tokens, pad)
    np.testing.assert_allclose(xn[7], e[choice, np.arange(len(choice))])


def test_gate_learns_the_useful_expert(rng):
    """Regressing y onto E2 (token count) through the gate alone picks E2."""
    from tpcore.nn.optim import Adam

    tokens, pad = _batch(rng, b=32)
    net = SparseExpertCountingNetwork(5, 0, np.random.default_rng(0), 1.0, "float64")
    _, e = expert_features(tokens, 5, pad, "float64")
    opt = Adam(net.parameters(), lr=0.1)
    gen = np.random.default_rng(3)
    for _ in range(150):
        net.zero_grad()
        y, cache = net.forward(tokens, pad, lambda s: gen.gumbel(size=s), 1.0)
        net.backward(2 * (y - e[1][None]), cache)
        opt.step()
    assert (net.choice(tokens, pad) == 1).all()


def test_save_load_round_trip(rng, tmp_path):
    model = _model("both", seed=4)
    tokens, pad = _batch(rng)
    save(model, tmp_path / "m.npz")
    back = load(tmp_path / "m.npz")
    assert isinstance(back, CountingProgramModel) and back.config.variant == "both"
    np.testing.assert_array_equal(back.forward(tokens, pad), model.forward(tokens, pad))


def test_bad_settings():
    with pytest.raises(TpcoreError, match="expert_after"):
        _model("experts", expert_after=2)
    with pytest.raises(TpcoreError, match="variant"):
        variant_flags("all")


def test_fixed_expert_matches_enumeration():
    """The vertex rule agrees with the gate's argmax over every histogram of L content tokens."""
    import itertools

    from tpcore.counts import fixed_expert

    content, framing = [2, 3, 4], {1: 1}
    found = set()
    for seed in range(12):
        net = SparseExpertCountingNetwork(5, 0, np.random.default_rng(seed), 3.0, "float64")
        net.w.data[:, content] *= 8.0  # make input-dependent gates common
        for length in range(1, 5):
            choices = set()
            for c in itertools.product(range(length + 1), repeat=len(content)):
                if sum(c) != length:
                    continue
                h = np.zeros(5)
                h[1], h[content] = 1, c
                choices.add(int(net.gate_logits(h[None]).argmax()))
            want = choices.pop() if len(choices) == 1 else None
            assert fixed_expert(*net.host_gate(), framing, content, length) == want
            found.add(want is None)
    assert found == {True, False}  # both kinds of gate were exercised


def test_reproduction_run_and_tables():
    """A tiny length-generalisation run: context sized for N = 16, trained at N = 8."""
    from tpcore.experiments.budget import Budget
    from tpcore.experiments.counting import length_table, table, train_run

    b = Budget("tiny", dict(cells=(("hist", "base"),), lengthgen=("hist",), n_train=64, epochs=1,
                            batch_size=64, n_seeds=1, eval_every=1, arch=(3, 4, 2)))
    row = train_run("hist", "base", "experts", b, seed=0, test_regime="longer")
    assert row["n_train"] == 64 and row["steps"] == 1
    assert abs(sum(row["gate_usage"].values()) - 1) < 1e-9
    assert set(row["gate_rule"]) == {str(n) for n in range(1, 16)}
    assert 0 < row["longer_only"]["n"] < 2000
    for split in ("test", "shifted_test", "longer_only"):
        assert 0 <= row[split]["seq_acc"] <= row[split]["acc"] <= 1
    assert "| hist | base (V=8, N=8) | - | - | " in table([row])
    assert length_table([row]).count("| hist | experts |") == 1
    with pytest.raises(TpcoreError, match="same vocabulary"):
        train_run("hist", "base", "none", b, seed=0, test_regime="bigvocab")


def test_describe_names_the_fixed_expert():
    from tpcore.models.counting import describe, gate_rule

    vocab = ["<pad>", "<s>", "a", "b", "c"]
    model = _model("both")
    net = model.expert_network
    net.w.data[:] = 0.0
    net.b.data[:] = [0.0, 2.0, 0.0, 0.0, 0.0]
    assert set(gate_rule(net, vocab, 7).values()) == {"token_count"}
    text = describe(model, vocab)
    assert "prefix_count_2 = 'a'" in text and "1..6 content tokens: always token_count" in text
    assert "expert_count = [hist[tokens[t]] for t in range(len(tokens))]" in text
    net.w.data[1, 2] = -10.0  # many 'a' tokens now switch the gate away from token_count
    assert gate_rule(net, vocab, 7)[6] is None
    assert "depends on the input" in describe(model, vocab)


def test_reproduce_counting_cli(tmp_path):
    """The CLI runs a budget with other seeds and variants and records the command; bad cells
    fail with one line."""
    import json

    from tpcore.cli import main

    args = ["reproduce", "counting", "--budget", "smoke", "--variants", "none", "--seeds", "1",
            "--out", str(tmp_path)]
    assert main(args) == 0
    saved = json.loads((tmp_path / "counting.json").read_text())
    assert [(r["task"], r["seed"]) for r in saved["cells"]] == [("hist", 1)]
    assert [r["seed"] for r in saved["lengthgen"]] == [1]
    assert "--variants none" in saved["commands"][-1] and "--seeds 1" in saved["commands"][-1]
    assert main(args[:-3] + ["2", "--out", str(tmp_path)]) == 0  # a second seed joins the table
    saved = json.loads((tmp_path / "counting.json").read_text())
    assert len(saved["commands"]) == 2 and saved["cells"][0]["seeds"] == [1, 2]
    assert saved["cells"][0]["seed"] in (1, 2) and "of 2]" in (tmp_path / "counting.md").read_text()
    assert main(args[:-2] + ["--epochs", "3", "--out", str(tmp_path)]) == 2  # other length
    assert main(["reproduce", "counting", "--cells", "hist-base"]) == 2


def test_histogram_heads_finds_the_own_token_count():
    """A numerical head reading tokens with the identity predicate on content tokens is named;
    mapping one content token elsewhere, or reading positions, is not."""
    from tpcore.experiments.counting import histogram_heads

    vocab = ["<pad>", "<s>", "a", "b", "c"]
    model = _model("prefix", n_layers=1)
    layer = model.layers[0]
    cat = model.variable_names("categorical")
    gates = layer.attn_gates.data
    gates[3:5] = 0.0
    gates[3:5, cat.index("tokens")] = 10.0  # the numerical head's query and key read tokens
    layer.value_gates.data[0] = 0.0
    layer.value_gates.data[0, model.variable_names("numerical").index("ones")] = 10.0
    layer.num_pred.data[0] = 10.0 * np.eye(layer.num_pred.data.shape[-1])
    assert histogram_heads(model, vocab) == ["num_attn_0_0(ones)"]
    layer.num_pred.data[0, 4] = 0.0
    layer.num_pred.data[0, 4, 2] = 10.0  # 'c' now counts 'a'
    assert histogram_heads(model, vocab) == []
    layer.num_pred.data[0] = 10.0 * np.eye(layer.num_pred.data.shape[-1])
    gates[4, cat.index("tokens")] = 0.0
    gates[4, cat.index("positions")] = 10.0
    assert histogram_heads(model, vocab) == []


def test_reproduce_counting_arch(tmp_path):
    """--arch sets layers, heads and MLPs per layer (split between the two kinds), is recorded,
    and an out dir holding another architecture is refused."""
    import json

    from tpcore.cli import main

    args = ["reproduce", "counting", "--budget", "smoke", "--variants", "prefix", "--lengthgen",
            "--out", str(tmp_path)]
    assert main(args + ["--arch", "1", "3", "2"]) == 0
    saved = json.loads((tmp_path / "counting.json").read_text())
    c = saved["cells"][0]["config"]
    assert saved["arch"] == [1, 3, 2] and "--arch 1 3 2" in saved["commands"][0]
    assert (c["n_layers"], c["n_cat_heads"], c["n_num_heads"], c["n_cat_mlps"],
            c["n_num_mlps"]) == (1, 1, 2, 1, 1)
    assert main(args) == 2  # the default architecture does not mix into this out dir
    assert main(args + ["--arch", "1", "0", "2"]) == 2


def test_prefix_ablation_removes_what_the_classifier_reads(rng):
    """A model whose prediction is "an 'a' came before": perfect as trained, at chance of the
    other class with content prefix counts set to 0; the model is unchanged afterwards."""
    from tpcore.experiments.counting import prefix_ablation
    from tpcore.train import evaluate_supervised

    vocab = ["<pad>", "<s>", "a", "b", "c"]
    model = _model("prefix", n_layers=1, masked_classes=())
    assert prefix_ablation(_model("none"), {}, vocab) == {}
    d, m_all = model.config.width, len(model.variable_names("categorical"))
    slot = next(v.slot for v in model.variables if v.name == "prefix_count_2")
    model.w_out.data[:] = 0.0
    model.w_out.data[d * m_all + slot, 1] = 10.0  # class 1 iff some 'a' is before
    model.b_out.data[:] = [5.0, 0.0, -10.0, -10.0]
    tokens, pad = _batch(rng)
    targets = np.asarray(model.forward(tokens, pad).argmax(-1))
    split = {"tokens": tokens, "pad": pad, "targets": targets, "mask": ~pad}
    before = evaluate_supervised(model, split)
    got = prefix_ablation(model, split, vocab)
    assert before["acc"] == 1.0 and 0 < np.mean(targets[~pad] == 0) < 1
    for case in ("content_zero", "bos_one"):
        assert got[case]["acc"] == pytest.approx(np.mean(targets[~pad] == 0))
    assert evaluate_supervised(model, split) == before


def test_reproduce_counting_reuses_a_run_only_for_its_configuration(tmp_path, monkeypatch):
    """A saved run is reused for exactly its recorded configuration (runs saved before records
    existed: read from their fields); one of another budget is refused before training."""
    import dataclasses
    import json

    from tpcore.experiments import counting

    calls = []

    def fake_run(task, regime, variant, budget, seed, epochs=None, test_regime=None, out=None):
        calls.append(budget["n_train"])
        cfg = counting.learn_config(task, *counting.REGIMES[regime], budget, seed, epochs)
        return {"task": task, "regime": regime, "variant": variant, "seed": seed,
                "n_train": budget["n_train"], "epochs": cfg.epochs, "seconds": 0.0,
                "selected_at_step": 1, "val": {"acc": 0.5}, "test": {"acc": 0.5, "seq_acc": 0.1},
                "gate_usage": {}, "config": dataclasses.asdict(cfg)}

    monkeypatch.setattr(counting, "train_run", fake_run)
    kw = dict(epochs=2, variants=("none",), cells=(("hist", "base"),), lengthgen=())
    smoke, small = counting.budget("smoke"), counting.budget("small")
    counting.run(smoke, tmp_path, 0, **kw)
    counting.run(smoke, tmp_path, 0, **kw)
    assert calls == [256]
    path = tmp_path / "runs" / "hist-base-none-s0.json"
    row = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in row.items() if k != "record"}))  # an old run
    counting.run(smoke, tmp_path, 0, **kw)
    assert calls == [256]
    with pytest.raises(TpcoreError, match="n_train: 256 recorded, 4000 requested"):
        counting.run(small, tmp_path, 0, **kw)
    assert calls == [256]

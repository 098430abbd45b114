"""Counting modules: float64 gradchecks, stream placement, the discrete gate, save and load."""

import numpy as np
import pytest

from tpcore.backend import asarray, to_host
from tpcore.backend import rng as device_rng
from tpcore.counts import EXPERTS, expert_features, prefix_counts, running_counts
from tpcore.errors import TpcoreError
from tpcore.models import load
from tpcore.models.counting import (
    CountingConfig,
    CountingProgramModel,
    SparseExpertCountingNetwork,
    variant_flags,
)
from tpcore.nn.gradcheck import assert_gradients, assert_parameter_gradients
from tpcore.nn.losses import cross_entropy_backward, cross_entropy_forward
from tpcore.nn.module import save


def _batch(rng, b=4, n=7, v=5):
    """Device tokens and padding."""
    tokens = rng.integers(1, v, (b, n))
    pad = np.zeros((b, n), bool)
    pad[1, 5:] = True
    pad[2, 2:] = True
    tokens[pad] = 0
    return asarray(tokens), asarray(pad)


def _model(variant="both", **kw):
    base = dict(vocab_size=5, max_len=7, n_classes=4, n_layers=2, n_cat_heads=1, n_num_heads=1,
                n_cat_mlps=1, n_num_mlps=1, d_mlp=6, masked_classes=(3,), seed=2)
    base.update(kw)
    return CountingProgramModel(CountingConfig(**base, **variant_flags(variant)))


def test_expert_gate_gradients(rng):
    tokens, pad = _batch(rng)
    net = SparseExpertCountingNetwork(5, 0, np.random.default_rng(1), 1.0, "float64")
    r = asarray(rng.normal(size=(1, *tokens.shape)))
    noise = asarray(rng.gumbel(size=(tokens.shape[0], len(EXPERTS))))

    def loss(*_):
        y, cache = net.forward(tokens, pad, lambda shape: noise, 0.7)
        return float((y * r).sum()), cache

    net.zero_grad()
    _, cache = loss()
    net.backward(r, cache)
    assert float(abs(net.w.grad).max()) > 0
    for p in (net.w, net.b):
        assert_gradients(lambda *_: loss()[0], [p.data], [p.grad], tol=1e-6)


@pytest.mark.parametrize("variant", ["prefix", "both", "running"])
def test_model_gradients(rng, variant):
    model = _model(variant).astype(np.float64)
    tokens, pad = _batch(rng)
    targets, mask = asarray(rng.integers(0, 3, tokens.shape)), ~pad

    def loss_fn(*_):
        logits = model.forward(tokens, pad, rng=device_rng(7), tau=1.3)
        return cross_entropy_forward(logits, targets, mask)

    model.zero_grad()
    _, cache = loss_fn()
    model.backward(cross_entropy_backward(cache))
    assert_parameter_gradients(model, lambda: loss_fn()[0])


def test_stream_placement(rng):
    model = _model("both")
    num = model.variable_names("numerical")
    assert num[:6] == ["ones"] + [f"prefix_count_{v}" for v in range(5)]
    assert num.index("expert_count") == 7  # after layer 0's numerical head
    l0, l1 = model.layers
    assert l0.p == 6 and l1.p == 8  # layer 0 cannot read the experts, layer 1 can
    tokens, pad = _batch(rng)
    model.forward(tokens, pad)
    xn = to_host(model.cache["xn"])
    counts = to_host(prefix_counts(tokens, 5, pad))
    np.testing.assert_array_equal(xn[1:6], counts.transpose(2, 0, 1))
    e = to_host(expert_features(tokens, 5, pad)[1])
    choice = to_host(model.expert_network.choice(tokens, pad))
    np.testing.assert_allclose(xn[7], e[choice, np.arange(len(choice))])


def test_running_count_placement(rng):
    """The running count is one numerical variable after ``ones``, read by layer 0."""
    model = _model("running")
    num = model.variable_names("numerical")
    assert num[:2] == ["ones", "running_count"] and model.layers[0].p == 2
    tokens, pad = _batch(rng)
    model.forward(tokens, pad)
    np.testing.assert_array_equal(to_host(model.cache["xn"])[1],
                                  to_host(running_counts(tokens, 5, pad)))


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
        y, cache = net.forward(tokens, pad, lambda s: asarray(gen.gumbel(size=s)), 1.0)
        net.backward(2 * (y - e[1][None]), cache)
        opt.step()
    assert (net.choice(tokens, pad) == 1).all()


@pytest.mark.parametrize("variant", ["both", "running"])
def test_save_load_round_trip(rng, tmp_path, variant):
    model = _model(variant, seed=4)
    tokens, pad = _batch(rng)
    save(model, tmp_path / "m.npz")
    back = load(tmp_path / "m.npz")
    assert isinstance(back, CountingProgramModel) and back.config.variant == variant
    np.testing.assert_array_equal(to_host(back.forward(tokens, pad)),
                                  to_host(model.forward(tokens, pad)))


def test_bad_settings():
    with pytest.raises(TpcoreError, match="expert_after"):
        _model("experts", expert_after=2)
    with pytest.raises(TpcoreError, match="variant"):
        variant_flags("all")


def test_describe_names_the_fixed_expert():
    from tpcore.models.counting import describe, gate_rule

    vocab = ["<pad>", "<s>", "a", "b", "c"]
    model = _model("both")
    net = model.expert_network
    net.w.data[:] = 0.0
    net.b.data[:] = asarray([0.0, 2.0, 0.0, 0.0, 0.0])
    assert set(gate_rule(net, vocab, 7).values()) == {"token_count"}
    text = describe(model, vocab)
    assert "prefix_count_2 = 'a'" in text and "1..6 content tokens: always token_count" in text
    assert "expert_count = [hist[tokens[t]] for t in range(len(tokens))]" in text
    net.w.data[1, 2] = -10.0  # many 'a' tokens now switch the gate away from token_count
    assert gate_rule(net, vocab, 7)[6] is None
    assert "depends on the input" in describe(model, vocab)

"""Whole-model gradchecks, the discrete view against a plain loop interpreter, and bad input."""

import numpy as np
import pytest

from tpcore.backend import asarray, to_host
from tpcore.backend import rng as device_rng
from tpcore.errors import TpcoreError
from tpcore.models import load
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.nn.gradcheck import assert_gradients
from tpcore.nn.losses import cross_entropy_backward, cross_entropy_forward
from tpcore.nn.module import save


def _model(**kw):
    base = dict(vocab_size=5, max_len=6, n_classes=4, n_layers=2, n_cat_heads=2, n_num_heads=1,
                n_cat_mlps=1, n_num_mlps=1, d_mlp=7, masked_classes=(3,), seed=3)
    base.update(kw)
    return ProgramModel(ProgramConfig(**base))


def _batch(rng, b=3, n=6, v=5, c=3):
    tokens = rng.integers(0, v, (b, n))
    pad = np.zeros((b, n), bool)
    pad[1, 4:] = True
    return tokens, pad, rng.integers(0, c, (b, n)), ~pad


@pytest.mark.parametrize("kw", [{}, {"causal": True, "n_embed_vars": 2, "k": 3},
                                {"gate_tau": 3.0}, {"n_cat_heads": 0, "n_num_heads": 0}])
def test_model_gradients(rng, kw):
    model = _model(**kw).astype(np.float64)
    tokens, pad, targets, mask = (asarray(a) for a in _batch(rng))

    def loss_fn(*_):
        logits = model.forward(tokens, pad, rng=device_rng(7), tau=1.5)
        loss, cache = cross_entropy_forward(logits, targets, mask)
        return loss, cache

    model.zero_grad()
    _, cache = loss_fn()
    model.backward(cross_entropy_backward(cache))
    names, params = zip(*model.named_parameters())
    for name, p in zip(names, params):
        try:
            assert_gradients(lambda *_: loss_fn()[0], [p.data], [p.grad], tol=1e-5,
                             max_entries=25)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


def _interpret(prog, tokens, pad):
    """A loop-by-loop reading of DiscreteProgram (the semantics extraction relies on)."""
    n = len(tokens)
    vals = {"tokens": list(tokens), "positions": list(range(n)), "ones": [1.0] * n}
    keys = [j for j in range(n) if not pad[j]]
    for mod in prog.modules:
        if hasattr(mod, "predicate"):
            q, k = vals[mod.query], vals[mod.key]
            out = []
            for i in range(n):
                visible = [j for j in keys if not prog.causal or j <= i]
                match = [j for j in visible if mod.predicate[q[i]] == k[j]]
                if mod.kind == "numerical":
                    out.append(float(sum(vals[mod.value][j] for j in match)))
                    continue
                others = [j for j in match if j != i]
                pick = (min(others, key=lambda j: (abs(i - j), j)) if others
                        else i if i in match else 0)
                out.append(vals[mod.value][pick])
        else:
            a, b = (np.array(vals[name]) for name in mod.inputs)
            out = list(mod.lookup(a, b, prog.width))
        vals[mod.output] = out
    logits = np.tile(prog.classifier_bias, (n, 1))
    for var in prog.variables:
        w = prog.classifier_weights[var.name]
        v = np.array(vals[var.name])
        logits += w[0] * v[:, None] if var.kind == "numerical" else w[v.astype(int)]
    logits[:, list(prog.masked_classes)] = -np.inf
    return logits.argmax(-1)


@pytest.mark.parametrize("causal", [False, True])
def test_discrete_forward_matches_interpreter(rng, causal):
    model = _model(causal=causal, n_layers=3, init_std=2.0)
    tokens, pad, _, mask = _batch(rng, b=8)
    pred = model.forward(tokens, pad).argmax(-1)
    prog = model.discrete()
    for i in range(len(tokens)):
        expect = _interpret(prog, tokens[i], pad[i])
        assert pred[i][mask[i]].tolist() == expect[mask[i]].tolist()


def test_save_load_roundtrip(tmp_path, rng):
    model = _model(n_embed_vars=2, k=3)
    tokens, pad, _, _ = _batch(rng)
    save(model, tmp_path / "m")
    again = load(tmp_path / "m")
    np.testing.assert_array_equal(to_host(model.forward(tokens, pad)),
                                  to_host(again.forward(tokens, pad)))


@pytest.mark.parametrize("tokens,msg", [([[0, 9]], "token id 9"), ([[0] * 7], "length 7")])
def test_bad_tokens(tokens, msg):
    with pytest.raises(TpcoreError, match=msg):
        _model().forward(np.array(tokens))


def test_bad_config():
    with pytest.raises(TpcoreError, match="masked class 7"):
        _model(masked_classes=(7,))
    with pytest.raises(TpcoreError, match="n_cat_heads"):
        _model(n_cat_heads=-1)
    for bad in (0.0, float("nan")):
        with pytest.raises(TpcoreError, match="gate_tau must be a finite number > 0"):
            _model(gate_tau=bad)


def test_gate_tau_softens_only_the_read_gates(rng):
    """With ``gate_tau = 3`` a training forward samples the read gates as a plain softmax of
    their logits over ``3 tau``, and predicates (and everything else) at ``tau``: the same
    model with its gate logits divided by 3 gives the same output; the discrete view ignores
    the setting."""
    tokens, pad, _, _ = (asarray(a) for a in _batch(rng))
    soft, plain = _model(gate_tau=3.0), _model()
    for a, b in zip(soft.layers, plain.layers):
        for name in ("attn_gates", "value_gates", "mlp_gates", "num_mlp_gates"):
            getattr(b, name).data[...] = getattr(a, name).data / 3.0
    out = to_host(soft.forward(tokens, pad, rng=None, tau=0.7))
    assert np.allclose(out, to_host(plain.forward(tokens, pad, rng=None, tau=0.7)), atol=1e-5)
    assert not np.allclose(out, to_host(_model().forward(tokens, pad, rng=None, tau=0.7)))
    assert np.array_equal(to_host(soft.forward(tokens, pad)), to_host(_model().forward(tokens,
                                                                                       pad)))

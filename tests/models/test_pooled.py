"""MeanPooled: equals the transformer's own mean readout, and its backward passes a float64
finite-difference check through a Transformer Program."""

import numpy as np

from tpcore.backend import asarray, to_host
from tpcore.models.pooled import MeanPooled
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.models.transformer import Transformer, TransformerConfig
from tpcore.nn.gradcheck import assert_gradients, random_like


def _batch(rng, b=3, n=6, v=7):
    tokens = rng.integers(0, v, (b, n))
    pad = np.zeros((b, n), bool)
    pad[1, 4:] = True
    pad[2, 2:] = True
    return asarray(tokens), asarray(pad)


def test_mean_pooled_equals_mean_readout(rng):
    tokens, pad = _batch(rng)
    cfg = dict(vocab_size=7, max_len=6, n_classes=3, d_model=8, n_layers=1, n_heads=2, d_mlp=16,
               dtype="float64", seed=1)
    ref = Transformer(TransformerConfig(readout="mean", **cfg))
    pooled = MeanPooled(Transformer(TransformerConfig(readout="token", **cfg)))
    pooled.inner.load_state_dict(ref.state_dict())
    assert np.allclose(to_host(pooled.forward(tokens, pad)), to_host(ref.forward(tokens, pad)))
    g = random_like(asarray(np.zeros((3, 3))), seed=2)
    ref.backward(g)
    pooled.backward(g)
    for (name, p), (_, q) in zip(ref.named_parameters(), pooled.inner.named_parameters()):
        assert np.allclose(to_host(p.grad), to_host(q.grad)), name


def test_mean_pooled_gradcheck_through_program(rng):
    tokens, pad = _batch(rng)
    model = MeanPooled(ProgramModel(ProgramConfig(
        vocab_size=7, max_len=6, n_classes=3, n_layers=1, n_cat_heads=1, n_num_heads=0,
        n_cat_mlps=1, n_num_mlps=0, k=4, n_embed_vars=2, d_mlp=5, dtype="float64", seed=0)))
    g = random_like(asarray(np.zeros((3, 3))), seed=3)
    emb, w_out = model.inner.embedding.data, model.inner.w_out.data

    def loss(e, w):
        return float((model.forward(tokens, pad, tau=1.0) * g).sum())

    model.zero_grad()
    model.forward(tokens, pad, tau=1.0)
    model.backward(g)
    assert_gradients(loss, [emb, w_out], [model.inner.embedding.grad, model.inner.w_out.grad],
                     tol=1e-5, max_entries=40)

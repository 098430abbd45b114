"""Circuit read-outs checked against the model's own forward pass."""

import math

import numpy as np
import pytest

from tpcore.analysis.circuits import (
    attention_pattern,
    bos_attention,
    format_table,
    ov_circuit,
    qk_matrix,
    standardise_rows,
    upper_triangularity,
)
from tpcore.backend import asarray, to_host
from tpcore.errors import TpcoreError
from tpcore.experiments.sorting import model_config
from tpcore.models.transformer import Transformer, TransformerConfig
from tpcore.tasks.sorting import TASKS, encode


@pytest.fixture(params=["causal", "bidirectional"])
def setting(request):
    task = TASKS[request.param]
    model = Transformer(model_config(task, seed=1)).astype(np.float64)
    return task, model


def test_qk_matrix_gives_the_attention_logits(setting, rng):
    task, model = setting
    lists = rng.integers(0, task.n_values, (1, task.length))
    enc = encode(task, lists)
    tokens = enc["tokens"][0]
    pattern = to_host(attention_pattern(model, tokens, enc.get("pad", [None])[0]))
    n = len(tokens)
    for p in (task.first_target, n - 2):
        scores = np.array([to_host(qk_matrix(model, p, j))[tokens[p], tokens[j]]
                           for j in range(n)])
        scores = scores / math.sqrt(model.config.d_model)
        keep = np.ones(n, bool)
        if task.causal:
            keep[p + 1 :] = False
        if "pad" in enc:
            keep &= ~enc["pad"][0]
        expect = np.where(keep, np.exp(scores - scores[keep].max()), 0.0)
        np.testing.assert_allclose(pattern[p], expect / expect.sum(), rtol=1e-9, atol=1e-12)


def test_bos_key_uses_position_zero(setting):
    task, model = setting
    at_zero = qk_matrix(model, 3, 0)
    np.testing.assert_allclose(to_host(qk_matrix(model, 3, 1, task.bos)[:, task.bos]),
                               to_host(at_zero[:, task.bos]))


def test_ov_circuit_decomposes_the_logits(rng):
    """Without position embeddings: logits[p] = E[t_p] U + sum_j P[p, j] OV[t_j]."""
    cfg = TransformerConfig(vocab_size=7, max_len=6, n_classes=5, d_model=8, n_layers=1,
                            n_heads=1, layer_norm="none", attn_only=True, causal=True, seed=2)
    model = Transformer(cfg).astype(np.float64)
    model.pos_emb.data[:] = 0
    tokens = rng.integers(0, 7, (3, 6))
    logits = model.forward(tokens)
    pattern = model.cache["attn"][0][:, 0]
    ov = ov_circuit(model)
    direct = model.tok_emb.data[tokens] @ model.unembed.w.data
    np.testing.assert_allclose(to_host(logits), to_host(direct + pattern @ ov[tokens]),
                               rtol=1e-9, atol=1e-9)


def test_bos_attention_ratio_matches_exponent(setting):
    task, model = setting
    res = bos_attention(model, [task.first_target], [0, 1, 2], task.bos, [4])
    qk = qk_matrix(model, task.first_target, 1, task.bos)
    diff = qk[4, task.bos] - qk[4, [0, 1, 2]].mean()
    np.testing.assert_allclose(to_host(res["ratio"]), [math.exp(diff / math.sqrt(56))])


def test_standardise_and_triangularity():
    m = asarray(np.array([[0.0, 5.0, 1.0], [2.0, 0.0, -500.0], [1.0, 1.0, 0.0]]))
    s = standardise_rows(m)
    assert s.max(axis=1).tolist() == [0.0, 0.0, 0.0] and s.min() == -99.0
    assert upper_triangularity(m) == 0.5  # row 0 prefers key 1 > 0; row 1 prefers key 0 < 1


def test_format_table_and_bad_model():
    text = format_table(np.eye(2), ["a", "b"], ["x", "y"])
    assert text.splitlines()[2] == "| a | 1.0 | 0.0 |"
    with pytest.raises(TpcoreError, match="labels"):
        format_table(np.eye(2), ["a"], ["x", "y"])
    cfg = TransformerConfig(vocab_size=5, max_len=4, n_layers=2, n_heads=2)
    with pytest.raises(TpcoreError, match=r"head \(1, 0\): .* expected \(0, h\)"):
        ov_circuit(Transformer(cfg), head=(1, 0))
    with pytest.raises(TpcoreError, match="heads 0..1 per layer"):
        qk_matrix(Transformer(cfg), 1, head=(0, 2))


@pytest.mark.parametrize("layer_norm", ["pre", "post", "none"])
def test_first_layer_heads_of_any_transformer(layer_norm, rng):
    """Each head of layer 0 of a 2-layer, 3-head model with MLPs: the QK table is its score."""
    cfg = TransformerConfig(vocab_size=7, max_len=6, d_model=12, n_layers=2, n_heads=3,
                            d_mlp=16, layer_norm=layer_norm, positions="sinusoidal", seed=3)
    model = Transformer(cfg).astype(np.float64)
    tokens = rng.integers(0, 7, (1, 6))
    _, cache = model.run_with_cache(tokens)
    scores = to_host(cache["attn_scores", 0])[0]                  # (head, query, key)
    for h in range(3):
        for p, j in ((1, 4), (5, 0), (3, 3)):
            qk = to_host(qk_matrix(model, p, j, head=(0, h)))
            assert qk[tokens[0, p], tokens[0, j]] / math.sqrt(4) == pytest.approx(
                scores[h, p, j], rel=1e-10, abs=1e-12)
        assert ov_circuit(model, head=(0, h)).shape == (7, 7)

"""Parameter bookkeeping, save/load, optimisers and schedules."""

import json
import math

import numpy as np
import pytest

from tpcore.backend import asarray, to_host, xp_of
from tpcore.errors import TpcoreError
from tpcore.models import load
from tpcore.models.transformer import Transformer, TransformerConfig
from tpcore.nn import optim
from tpcore.nn.module import Parameter, save


def _tiny(**kw):
    return Transformer(TransformerConfig(vocab_size=5, max_len=4, d_model=8, n_heads=2, **kw))


def test_named_parameters_walk_blocks_in_order():
    names = [n for n, _ in _tiny().named_parameters()]
    assert names[:3] == ["tok_emb", "pos_emb", "blocks.0.attn.wq"]
    assert "blocks.1.mlp.fc2.b" in names and names[-1] == "unembed.b"


def test_save_load_round_trip(tmp_path):
    model = _tiny(seed=3)
    save(model, tmp_path / "m", {"note": "x"})
    assert json.loads((tmp_path / "m.json").read_text())["config"]["seed"] == 3
    again = load(tmp_path / "m.npz")
    t = np.arange(8).reshape(2, 4) % 5
    assert np.array_equal(to_host(model.forward(t)), to_host(again.forward(t)))
    assert not list(tmp_path.glob(".*tmp"))  # atomic writes leave no temporaries


def test_load_names_mismatched_and_missing_parameters(tmp_path):
    model = _tiny()
    state = model.state_dict()
    state["unembed.w"] = np.zeros((3, 3), np.float32)
    with pytest.raises(TpcoreError, match="'unembed.w' has shape"):
        model.load_state_dict(state)
    del state["unembed.w"]
    with pytest.raises(TpcoreError, match="'unembed.w' missing"):
        model.load_state_dict(state)
    with pytest.raises(TpcoreError, match="not found"):
        load(tmp_path / "absent.npz")


def _quadratic_steps(opt_cls, steps=300, **kw):
    """Minimise ||w - 3||^2 and return the final w (on the host)."""
    p = Parameter(asarray(np.zeros(4)))
    opt = opt_cls([p], **kw)
    for _ in range(steps):
        p.grad = 2 * (p.data - 3.0)
        opt.step()
    return to_host(p.data)


@pytest.mark.parametrize("cls,kw", [(optim.SGD, dict(lr=0.1)),
                                    (optim.SGD, dict(lr=0.05, momentum=0.9)),
                                    (optim.Adam, dict(lr=0.1)),
                                    (optim.AdamW, dict(lr=0.1, weight_decay=0.0))])
def test_optimisers_converge(cls, kw):
    assert np.allclose(_quadratic_steps(cls, **kw), 3.0, atol=1e-2)


@pytest.mark.parametrize("cls,kw", [(optim.SGD, dict(lr=0.1, momentum=0.9)),
                                    (optim.Adam, dict(lr=0.1)),
                                    (optim.AdamW, dict(lr=0.1))])
def test_optimiser_state_dict_resumes_exactly(cls, kw):
    """Six steps, or three then a fresh optimiser loaded from the state dict and three more:
    the same weights bit for bit (moments, step count and lr restored)."""
    def grad(p):
        p.grad = 2 * (p.data - 3.0) + xp_of(p.data).sin(p.data)

    whole, half = Parameter(asarray(np.zeros(4))), Parameter(asarray(np.zeros(4)))
    opt = cls([whole], **kw)
    for _ in range(6):
        grad(whole)
        opt.step()
    first = cls([half], **kw)
    for _ in range(3):
        grad(half)
        first.step()
    state = first.state_dict()
    second = cls([half], **{**kw, "lr": 1.0})
    second.load_state_dict(state)
    assert second.t == 3 and second.lr == kw["lr"]
    for _ in range(3):
        grad(half)
        second.step()
    assert np.array_equal(to_host(whole.data), to_host(half.data))
    state["buffers"] = {k: np.zeros(5) for k in state["buffers"]}
    with pytest.raises(TpcoreError, match=r"buffer \w+\.0 has shape \(5,\)"):
        second.load_state_dict(state)


def test_adam_first_step_is_lr_times_sign():
    g = np.array([2.0, -0.5, 1e-3])
    p = Parameter(asarray(np.zeros(3)))
    p.grad = asarray(g)
    optim.Adam([p], lr=0.01).step()
    assert np.allclose(to_host(p.data), -0.01 * np.sign(g), rtol=1e-3)


def test_adamw_decay_is_decoupled():
    """With a zero gradient, AdamW shrinks w by (1 - lr wd); Adam's L2 form moves by ~lr."""
    for cls, expected in ((optim.AdamW, 1.0 * (1 - 0.1 * 0.5)), (optim.Adam, 1.0 - 0.1)):
        p = Parameter(asarray(np.ones(1)))
        p.grad = asarray(np.zeros(1))
        cls([p], lr=0.1, weight_decay=0.5).step()
        assert np.isclose(float(p.data[0]), expected, rtol=1e-3), cls


@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW])
def test_adam_in_one_buffer_equals_adam_per_parameter(rng, cls):
    """The flat update (every gradient present) and the per-parameter one (a gradient missing,
    or parameters of two dtypes) give the same parameters and moments, bit for bit; a view cut
    by loading a state is laid out again."""
    def model():
        return _tiny()

    flat_model, loop_model = model(), model()
    flat, loop = cls(flat_model.parameters(), lr=0.01), cls(loop_model.parameters(), lr=0.01)
    assert flat.flat is not None
    loop.flat = None  # the per-parameter path
    for step in range(4):
        grads = [rng.standard_normal(p.shape).astype(np.float32)
                 for p in flat_model.parameters()]
        for params in (flat_model.parameters(), loop_model.parameters()):
            for p, g in zip(params, grads):
                p.grad = asarray(g)
        flat.step()
        loop.step()
        if step == 1:  # a state loaded into the model replaces its arrays
            flat_model.load_state_dict(flat_model.state_dict())
            assert not flat.flat.intact()
    assert flat.flat.intact()
    for a, b in zip(flat_model.state_dict().values(), loop_model.state_dict().values()):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(flat.state_dict()["buffers"].values(), loop.state_dict()["buffers"].values()):
        np.testing.assert_array_equal(a, b)
    flat_model.parameters()[0].grad = None  # a missing gradient: the others update one by one
    before = flat_model.state_dict()
    flat.step()
    after = flat_model.state_dict()
    names = list(before)
    assert np.array_equal(before[names[0]], after[names[0]])
    assert not np.array_equal(before[names[1]], after[names[1]])


def test_clip_grad_norm():
    ps = [Parameter(asarray(np.zeros(2))), Parameter(asarray(np.zeros(1)))]
    ps[0].grad, ps[1].grad = asarray(np.array([3.0, 0.0])), asarray(np.array([4.0]))
    assert optim.clip_grad_norm(ps, 1.0) == 5.0
    assert np.isclose(math.sqrt(sum(float((p.grad**2).sum()) for p in ps)), 1.0)


def test_schedules():
    assert optim.step_decay(1.0, 10, 0.5)(25) == 0.25
    drop = optim.piecewise(1e-3, {5000: 1e-4})
    assert drop(4999) == 1e-3 and drop(5000) == 1e-4
    cos = optim.cosine(1.0, 100, warmup=10)
    assert cos(0) == 0.1 and cos(10) == 1.0 and abs(cos(100)) < 1e-12
    tau = optim.geometric(3.0, 0.01, 101)
    assert tau(0) == 3.0 and np.isclose(tau(100), 0.01) and np.isclose(tau(50), math.sqrt(0.03))
    assert tau(500) == tau(100)
    with pytest.raises(TpcoreError, match="positive"):
        optim.geometric(0.0, 1.0, 10)


def test_load_rebuilds_any_model_class_in_a_fresh_process(tmp_path):
    """``tpcore.models.load`` knows every model class: no prior import of the class is needed."""
    import subprocess
    import sys

    from tpcore.models.program import ProgramConfig, ProgramModel

    save(ProgramModel(ProgramConfig(vocab_size=5, max_len=6, n_classes=5)), tmp_path / "p")
    code = f"from tpcore.models import load; print(type(load({str(tmp_path / 'p')!r})).__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ProgramModel"


@pytest.mark.parametrize("field, value", [("d_model", 65536), ("vocab_size", 10**9)])
def test_load_refuses_a_config_far_larger_than_its_weights(tmp_path, field, value):
    import time

    model = Transformer(TransformerConfig(vocab_size=5, max_len=4, d_model=8, n_heads=2))
    save(model, tmp_path / "m.npz")
    meta = json.loads((tmp_path / "m.json").read_text())
    meta["config"][field] = value
    (tmp_path / "m.json").write_text(json.dumps(meta))
    start = time.perf_counter()
    with pytest.raises(TpcoreError, match="describes about .* bytes of parameters"):
        load(tmp_path / "m.npz")
    assert time.perf_counter() - start < 2.0


def test_load_refuses_an_npz_of_python_objects(tmp_path):
    model = Transformer(TransformerConfig(vocab_size=5, max_len=4, d_model=8, n_heads=2))
    save(model, tmp_path / "m.npz")
    np.savez(tmp_path / "m.npz", tok_emb=np.array([object()], dtype=object))
    with pytest.raises(TpcoreError, match="Python objects"):
        load(tmp_path / "m.npz")

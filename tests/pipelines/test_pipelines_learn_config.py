"""A learn run's settings (:mod:`tpcore.pipelines.learn_config`), the one memory estimate of a
program model's training (:meth:`ProgramConfig.memory_estimate`) and the names
:mod:`tpcore.pipelines.learn` keeps for the modules split out of it."""

from __future__ import annotations

from pathlib import Path

import pytest

import tpcore.pipelines.learn as learn
from tpcore.errors import TpcoreError
from tpcore.experiments.text_models import PREDICT_BATCH, ProgramSettings
from tpcore.pipelines import learn_config, learn_recipes, learn_runs
from tpcore.pipelines.learn import EVAL_BATCH, LearnConfig, recorded_config, task_config
from tpcore.pipelines.records import read_records

RESULTS = Path(__file__).resolve().parents[2] / "results"

LEARN_ESTIMATES = [
    ("default", {}, 241701760, 241701760),
    ("induction", "induction", 34032704, 78292160),
    ("double_hist", "double_hist", 175513120, 175513120),
    ("hist_big", dict(task="hist", vocab_size=30, max_len=40, n_samples=50000, batch_size=2048),
     7653287296, 7653287296),
    ("dyck2_small", dict(task="dyck2", n_layers=1, n_cat_heads=1, n_num_heads=0, n_cat_mlps=0,
                         n_num_mlps=0, n_samples=100, d_mlp=8), 2794640, 2794640),
    ("most_freq_wide", dict(task="most_freq", n_layers=4, n_cat_heads=8, n_num_heads=2,
                            n_cat_mlps=3, n_num_mlps=1, d_mlp=128), 502350848, 502350848),
    ("sort_grow", dict(task="sort", n_cat_heads=2, grow=6, select_after=5, epochs=20),
     213364864, 270042112),
]
"""Configurations with their estimate and their wider model's (:meth:`LearnConfig.grown`), in
bytes, as computed before the estimate moved to :class:`ProgramConfig`: they decide refusals,
so they must not change."""

TEXT_ESTIMATES = [
    (ProgramSettings(), (5000, 40, 9), 668758560),
    (ProgramSettings(n_layers=3, n_heads=8, n_mlps=0, n_embed_vars=8, k=64, batch_size=1024),
     (20000, 64, 2), 8084367680),
    (ProgramSettings(n_layers=1, n_heads=1, n_mlps=2, n_embed_vars=2, k=4, d_mlp=16),
     (30, 5, 3), 4090192),
]
"""NLP program settings, corpus sizes ``(words, tokens, labels)`` and their estimate in bytes,
as computed before the move."""


@pytest.mark.parametrize("name, spec, estimate, grown", LEARN_ESTIMATES,
                         ids=[e[0] for e in LEARN_ESTIMATES])
def test_learn_memory_estimates_are_unchanged(name, spec, estimate, grown):
    cfg = task_config(spec) if isinstance(spec, str) else LearnConfig(**spec)
    assert cfg.memory_estimate() == estimate
    assert cfg.grown().memory_estimate() == grown


def test_learn_estimate_is_the_models_plus_the_generated_data():
    cfg = LearnConfig(task="hist", n_samples=300, batch_size=64)
    V, N = cfg.task_size()
    model = cfg.program_config().memory_estimate(min(EVAL_BATCH, cfg.n_samples))
    assert cfg.memory_estimate() == model + cfg.n_samples * N * (64 + 2 * V)


@pytest.mark.parametrize("settings, sizes, estimate", TEXT_ESTIMATES)
def test_nlp_program_memory_estimates_are_unchanged(settings, sizes, estimate):
    assert settings.memory_estimate(*sizes) == estimate
    batch = max(settings.batch_size, PREDICT_BATCH)
    assert settings.model_config(*sizes).memory_estimate(batch) == estimate


def test_the_model_estimate_grows_with_batch_and_size():
    base = LearnConfig().program_config()
    assert base.memory_estimate(1) < base.memory_estimate(2)
    wider = LearnConfig(n_cat_heads=8).program_config()
    assert base.memory_estimate(64) < wider.memory_estimate(64)


@pytest.mark.parametrize("fields, message", [
    (dict(n_layers=0), "n_layers must be >= 1, got 0"),
    (dict(d_mlp=0), "d_mlp must be >= 1, got 0"),
    (dict(n_cat_heads=-1), "n_cat_heads must be >= 0, got -1"),
    (dict(n_num_heads=-1, n_num_mlps=0), "n_num_heads must be >= 0, got -1"),
    (dict(n_cat_mlps=-2), "n_cat_mlps must be >= 0, got -2"),
    (dict(n_num_mlps=-1), "n_num_mlps must be >= 0, got -1"),
    (dict(gate_tau=0.0), "gate_tau must be a finite number > 0, got 0.0"),
    (dict(vocab_size=-1), "vocab_size must be >= 0, got -1"),
    (dict(epochs=0), "epochs must be >= 1, got 0"),
])
def test_model_sizes_are_refused_in_one_line_naming_the_value(fields, message):
    """The model's own sizes are checked by :class:`ProgramConfig`, worded as before."""
    with pytest.raises(TpcoreError) as info:
        LearnConfig(**fields).check()
    assert str(info.value) == message
    with pytest.raises(TpcoreError) as info:
        LearnConfig.from_json({**LearnConfig().settings(), **fields}, "m.json")
    assert str(info.value) == f"m.json: config: {message}"


def packed_records() -> list[tuple[str, dict]]:
    return [(f"{path}:{key}", record) for path in sorted(RESULTS.rglob("runs.json.gz"))
            for key, record in read_records(path).items() if "config" in record]


@pytest.mark.host_only("reads the run records committed in results/")
def test_committed_run_records_load_and_keep_their_settings():
    """Every packed learn record under results/ reads back; its configuration agrees with the
    record on every recorded key, and keys recorded before a field existed take its default."""
    records = packed_records()
    if not records:
        pytest.skip("no packed run records in this checkout")
    defaults = LearnConfig().settings()
    for where, record in records:
        settings = recorded_config(record, where).settings()
        assert settings == {**defaults, **record["config"]}, where
        assert LearnConfig.from_json(settings, where) == recorded_config(record, where)


def test_learn_keeps_every_name_of_the_modules_split_out_of_it():
    for module in (learn_config, learn_recipes, learn_runs):
        for name in module.__all__:
            if name != "json_kind":
                assert getattr(learn, name) is getattr(module, name), name
    assert set(learn.__all__) <= set(dir(learn))

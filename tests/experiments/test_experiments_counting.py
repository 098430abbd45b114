"""`tpcore reproduce counting`: a run and its tables, the CLI's seeds, variants and
architecture, reuse of saved runs, runs cut into calls by --hours, and the analyses of a trained
model (histogram heads, prefix-count ablation)."""

import numpy as np
import pytest

from tpcore.backend import asarray, to_host
from tpcore.errors import TpcoreError
from tpcore.models.counting import CountingConfig, CountingProgramModel, variant_flags


def _model(variant, **kw):
    """A two-layer counting model of the given variant (``kw`` overrides its settings)."""
    base = dict(vocab_size=5, max_len=7, n_classes=4, n_layers=2, n_cat_heads=1, n_num_heads=1,
                n_cat_mlps=1, n_num_mlps=1, d_mlp=6, masked_classes=(3,), seed=2)
    return CountingProgramModel(CountingConfig(**{**base, **kw}, **variant_flags(variant)))


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
    from tpcore.experiments.counting_probes import histogram_heads

    vocab = ["<pad>", "<s>", "a", "b", "c"]
    model = _model("prefix", n_layers=1)
    layer = model.layers[0]
    cat = model.variable_names("categorical")
    gates = layer.attn_gates.data
    gates[3:5] = 0.0
    gates[3:5, cat.index("tokens")] = 10.0  # the numerical head's query and key read tokens
    layer.value_gates.data[0] = 0.0
    layer.value_gates.data[0, model.variable_names("numerical").index("ones")] = 10.0
    layer.num_pred.data[0] = asarray(10.0 * np.eye(layer.num_pred.data.shape[-1]))
    assert histogram_heads(model, vocab) == ["num_attn_0_0(ones)"]
    layer.num_pred.data[0, 4] = 0.0
    layer.num_pred.data[0, 4, 2] = 10.0  # 'c' now counts 'a'
    assert histogram_heads(model, vocab) == []
    layer.num_pred.data[0] = asarray(10.0 * np.eye(layer.num_pred.data.shape[-1]))
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
    assert "config" not in saved["cells"][0]  # the run's own record keeps it
    record = next(p for p in sorted((tmp_path / "runs").glob("*-prefix-s0.json"))
                  if not p.name.startswith("length-"))
    c = json.loads(record.read_text())["config"]
    assert saved["arch"] == [1, 3, 2] and "--arch 1 3 2" in saved["commands"][0]
    assert (c["n_layers"], c["n_cat_heads"], c["n_num_heads"], c["n_cat_mlps"],
            c["n_num_mlps"]) == (1, 1, 2, 1, 1)
    assert main(args) == 2  # the default architecture does not mix into this out dir
    assert main(args + ["--arch", "1", "0", "2"]) == 2


def test_prefix_ablation_removes_what_the_classifier_reads(rng):
    """A model whose prediction is "an 'a' came before": perfect as trained, at chance of the
    other class with content prefix counts set to 0; the model is unchanged afterwards."""
    from tpcore.experiments.counting_probes import prefix_ablation
    from tpcore.train import evaluate_supervised

    vocab = ["<pad>", "<s>", "a", "b", "c"]
    model = _model("prefix", n_layers=1, masked_classes=())
    assert prefix_ablation(_model("none"), {}, vocab) == {}
    d, m_all = model.config.width, len(model.variable_names("categorical"))
    slot = next(v.slot for v in model.variables if v.name == "prefix_count_2")
    model.w_out.data[:] = 0.0
    model.w_out.data[d * m_all + slot, 1] = 10.0  # class 1 iff some 'a' is before
    model.b_out.data[:] = asarray([5.0, 0.0, -10.0, -10.0])
    tokens = rng.integers(1, 5, (4, 7))
    pad = np.zeros((4, 7), bool)
    pad[1, 5:], pad[2, 2:] = True, True
    tokens[pad] = 0
    targets = to_host(model.forward(tokens, pad).argmax(-1))
    split = {"tokens": tokens, "pad": pad, "targets": targets, "mask": ~pad}
    before = evaluate_supervised(model, split)
    got = prefix_ablation(model, split, vocab)
    assert before["acc"] == 1.0 and 0 < np.mean(targets[~pad] == 0) < 1
    for case in ("content_zero", "bos_one"):
        assert got[case]["acc"] == pytest.approx(np.mean(targets[~pad] == 0))
    assert evaluate_supervised(model, split) == before


def test_reproduce_counting_reuses_a_run_only_for_its_configuration(tmp_path, monkeypatch):
    """A saved run is reused for exactly its recorded configuration; one without a current
    record, or of another budget, is refused before training."""
    import json

    from tpcore.experiments import counting

    calls = []

    def fake_run(task, regime, variant, budget, seed, epochs=None, test_regime=None, out=None,
                 seconds=None):
        calls.append(budget["n_train"])
        cfg = counting.learn_config(task, *counting.REGIMES[regime], budget, seed, epochs)
        return {"task": task, "regime": regime, "variant": variant, "seed": seed,
                "n_train": budget["n_train"], "epochs": cfg.epochs, "seconds": 0.0,
                "selected_at_step": 1, "val": {"acc": 0.5}, "test": {"acc": 0.5, "seq_acc": 0.1},
                "gate_usage": {}, "config": cfg.settings()}

    monkeypatch.setattr(counting, "train_run", fake_run)
    kw = dict(epochs=2, variants=("none",), cells=(("hist", "base"),), lengthgen=())
    smoke, small = counting.budget("smoke"), counting.budget("small")
    counting.run(smoke, tmp_path, 0, **kw)
    counting.run(smoke, tmp_path, 0, **kw)
    assert calls == [256]
    path = tmp_path / "runs" / "hist-base-none-s0.json"
    row = json.loads(path.read_text())
    with pytest.raises(TpcoreError, match="n_train: 256 recorded, 4000 requested"):
        counting.run(small, tmp_path, 0, **kw)
    path.write_text(json.dumps({k: v for k, v in row.items() if k != "record"}))  # an old run
    with pytest.raises(TpcoreError, match="written by another tpcore"):
        counting.run(smoke, tmp_path, 0, **kw)
    assert calls == [256]



def test_hours_cut_a_run_into_calls_that_end_as_one(tmp_path, capsys):
    """--hours stops a call after its first step and keeps the run's state (no record); the
    same command goes on, and the finished run is the one trained in a single call, bit for bit.
    A paused state of other settings is refused before training."""
    import json

    from tpcore.cli import main

    args = ["reproduce", "counting", "--budget", "smoke", "--variants", "prefix", "--lengthgen"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert main([*args, "--out", str(whole)]) == 0
    for _ in range(2):
        assert main([*args, "--out", str(cut), "--hours", "1e-9"]) == 0
        assert "paused hist-base-prefix-s0 at step" in capsys.readouterr().out
        assert (cut / "runs" / ".hist-base-prefix-s0-model.npz.partial").is_dir()
        assert not (cut / "runs" / "hist-base-prefix-s0.json").exists()
    assert main([*args, "--out", str(cut)]) == 0
    assert not list((cut / "runs").glob(".*"))
    a, b = (json.loads((d / "runs" / "hist-base-prefix-s0.json").read_text())
            for d in (whole, cut))
    for key in ("steps", "history", "test", "val", "selected_at_step", "gate_usage"):
        assert a[key] == b[key], key
    (cut / "runs" / "hist-base-prefix-s0.json").unlink()
    paused = cut / "runs" / ".hist-base-prefix-s0-model.npz.partial"
    assert main([*args, "--out", str(cut), "--hours", "1e-9"]) == 0
    record = json.loads((paused / "run.json").read_text())
    record["config"]["n_train"] = 5
    (paused / "run.json").write_text(json.dumps(record))
    capsys.readouterr()
    assert main([*args, "--out", str(cut)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "n_train" in err and "own --out" in err


def _cell(task, regime, variant, acc, usage=None):
    """A selected run as ``counting.json`` holds it, reduced to what tables and figures read."""
    return {"task": task, "regime": regime, "variant": variant,
            "test": {"acc": acc, "seq_acc": acc / 2}, "gate_usage": usage or {}}


GAINS_CELLS = [
    # a module ties the base: at or above (the paper's row ties too: 99.95 each)
    *(_cell("hist", "base", v, a) for v, a in
      (("none", 0.5), ("prefix", 0.5), ("experts", 0.4), ("both", 0.3))),
    # every module below the base (the paper's too: 97.76 best against 99.88)
    *(_cell("double_hist", "base", v, a) for v, a in
      (("none", 0.9), ("prefix", 0.8), ("experts", 0.85), ("both", 0.7))),
    # only the running count, which Section 5.3 does not count, beats the base
    *(_cell("most_freq", "base", v, a) for v, a in
      (("none", 0.6), ("prefix", 0.5), ("experts", 0.5), ("both", 0.5), ("running", 0.9))),
    # not finished: a module missing, or the base missing
    _cell("sort", "longer", "none", 0.5), _cell("sort", "longer", "prefix", 0.6),
    *(_cell("reverse", "longer", v, 0.9) for v in ("prefix", "experts", "both")),
]


def test_module_gains_counts_finished_settings_ties_included():
    """Section 5.3's count: only settings with the base and all three modules; a tie counts;
    the paper's count over the same settings and over all 15 (13, as the paper says)."""
    from tpcore.experiments.counting import PAPER_ACC
    from tpcore.experiments.counting_figures import module_gains

    gains = module_gains(GAINS_CELLS, PAPER_ACC)
    assert gains.settings == (("hist", "base"), ("double_hist", "base"), ("most_freq", "base"))
    assert gains.ours == (("hist", "base"),)
    assert gains.paper == (("hist", "base"), ("most_freq", "base"))
    assert (gains.paper_all, gains.n_paper) == (13, 15)
    assert gains.cells == 4 + 4 + 4 + 2 + 3  # the running count is no cell of the paper's
    assert gains.cells_text() == ("17 of the paper's 60 cells run (15 settings, each without a "
                                  "module and with prefix / experts / both)")
    assert gains.text() == ("Best module (prefix / experts / both) at or above the base in 1 of "
                            "3 finished settings; the paper: 2 of 3 over the same settings, "
                            "13 of 15 over all")
    assert module_gains(GAINS_CELLS[-5:], PAPER_ACC).settings == ()


def test_collapsed_gate_means_every_sequence_to_one_expert():
    from tpcore.experiments.counting_figures import collapsed

    assert collapsed({"token_count": 1.0, "seen_once": 0.0})
    assert not collapsed({"token_count": 0.9995, "seen_once": 0.0005})


def test_counting_md_states_the_module_count(tmp_path, monkeypatch):
    """``counting.md`` says how many of the paper's cells are run, and carries Section 5.3's
    count below the table once a setting is finished, and not before."""
    from tpcore.experiments import counting

    acc = {"none": 0.5, "prefix": 0.4, "experts": 0.6, "both": 0.3}

    def fake_run(task, regime, variant, budget, seed, epochs=None, test_regime=None, out=None,
                 seconds=None):
        cfg = counting.learn_config(task, *counting.REGIMES[regime], budget, seed, epochs)
        return {**_cell(task, regime, variant, acc[variant]), "seed": seed, "epochs": cfg.epochs,
                "n_train": budget["n_train"], "seconds": 0.0, "selected_at_step": 1,
                "val": {"acc": 0.5}, "config": cfg.settings()}

    monkeypatch.setattr(counting, "train_run", fake_run)
    monkeypatch.setattr(counting, "figures", lambda result, out: [])
    kw = dict(epochs=2, cells=(("sort", "base"),), lengthgen=())
    counting.run(counting.budget("smoke"), tmp_path, 0, variants=("none", "prefix"), **kw)
    assert "at or above the base" not in (tmp_path / "counting.md").read_text()
    assert "2 of the paper's 60 cells run" in (tmp_path / "counting.md").read_text()
    counting.run(counting.budget("smoke"), tmp_path, 0, variants=tuple(acc), **kw)
    assert ("at or above the base in 1 of 1 finished settings; the paper: 1 of 1 over the same "
            "settings, 13 of 15 over all.") in (tmp_path / "counting.md").read_text()
    assert "4 of the paper's 60 cells run" in (tmp_path / "counting.md").read_text()

"""`tpcore reproduce fig10`: the smoke budget end to end, both models on the same splits, the
table agreeing with the JSON, reruns that train nothing, budgets that say what they run, and bad
input refused in one line before any work."""

import json
import shutil

import numpy as np
import pytest

from tpcore.cli import main
from tpcore.experiments import fig10, table1
from tpcore.pipelines import learn as program_train
from tpcore.pipelines.learn import make_data, recorded_run


def _no_work(*args, **kwargs):
    raise AssertionError("a model was trained")


def _md_rows(md: str) -> dict[tuple[str, str], list[str]]:
    """The table's cells per (task, setting) row."""
    rows = {}
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and cells[0] in fig10.TASKS:
            rows[cells[0], cells[1]] = cells
    return rows


def test_reproduce_fig10_smoke_same_splits_table_and_rerun(tmp_path, capsys, monkeypatch):
    seen = []

    def recording(splits, **kwargs):
        seen.append(splits)
        return real(splits, **kwargs)

    real = fig10.train_transformer
    monkeypatch.setattr(fig10, "train_transformer", recording)
    args = ["reproduce", "fig10", "--budget", "smoke", "--out", str(tmp_path)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    saved = json.loads((tmp_path / "fig10.json").read_text())
    md = (tmp_path / "fig10.md").read_text()
    assert md.strip() == printed.strip() and "reductions against the paper" in md
    assert [(r["task"], r["setting"]) for r in saved["rows"]] == [
        ("sort", [8, 8]), ("sort", [8, 16]), ("sort", [16, 16]), ("dyck1", [8, 8]),
        ("dyck1", [8, 16]), ("dyck1", [16, 16])]
    assert saved["rows"][3]["skipped"] and "cell" not in saved["rows"][3]
    assert saved["rows"][4]["cell"] == saved["rows"][5]["cell"] == "N16"  # one Dyck cell

    # every transformer run learnt the splits of its cell's program run: 4 cells, 4 runs
    cells = [r for r in saved["rows"] if "cell" in r]
    assert len(seen) == 4
    for row, splits in zip(cells[:4], seen):
        run = tmp_path / "runs" / row["task"] / row["cell"] / row["program"]["selected"]["run"]
        program = make_data(recorded_run(run)[1]).splits
        assert splits.keys() == program.keys() == {"train", "val", "test"}
        for name, split in program.items():
            assert split.keys() == splits[name].keys()
            for key, array in split.items():
                np.testing.assert_array_equal(splits[name][key], array)
    size = tuple(saved["rows"][2]["size"])
    assert size == (16, 16) and seen[2]["train"]["tokens"].shape[1] == 16
    record = json.loads((tmp_path / "transformers/sort/V16_N16/L2_H2_s0.json").read_text())
    assert record["record"]["config"]["data"]["vocab_size"] == 16
    assert not list((tmp_path / "transformers").rglob("*.npz"))  # lean records, no weights

    # the table says what the JSON holds
    table = _md_rows(md)
    assert len(table) == len(saved["rows"])
    for r in saved["rows"]:
        cells_md = table[r["task"], ", ".join(map(str, r["setting"]))]
        if "skipped" in r:
            assert cells_md[2].startswith("not run")
            continue
        assert cells_md[5] == f"{r['program']['test_acc']:.2f}"
        assert cells_md[6] == f"{r['program']['test_accs'][0]:.2f}"  # its one run
        assert cells_md[9] == f"{r['transformer']['test_acc']:.2f}"
        assert float(cells_md[10]) == pytest.approx(
            r["program"]["test_acc"] - r["transformer"]["test_acc"], abs=0.006)
    if (tmp_path / "fig10.png").exists():
        assert 5_000 < (tmp_path / "fig10.png").stat().st_size < 70_000

    # a repeated command trains nothing and gives the same table
    monkeypatch.setattr(program_train, "train", _no_work)
    monkeypatch.setattr(fig10, "train_transformer", _no_work)
    assert main(args) == 0
    again = json.loads((tmp_path / "fig10.json").read_text())
    assert [r.get("program", {}).get("selected") for r in again["rows"]] == [
        r.get("program", {}).get("selected") for r in saved["rows"]]
    assert [r.get("transformer") for r in again["rows"]] == [r.get("transformer") for r in
                                                             saved["rows"]]
    assert again["commands"] == [f"tpcore reproduce fig10 --budget smoke --out {tmp_path}"]


def test_reproduce_fig10_refuses_other_settings_before_training(tmp_path, capsys, monkeypatch):
    args = ["reproduce", "fig10", "--budget", "smoke", "--tasks", "sort", "--settings", "8,8",
            "--out", str(tmp_path)]
    assert main(args) == 0
    saved = json.loads((tmp_path / "fig10.json").read_text())
    assert [r["setting"] for r in saved["rows"]] == [[8, 8]]
    assert saved["commands"] == [f"tpcore reproduce fig10 --budget smoke --tasks sort "
                                 f"--out {tmp_path} --settings 8,8"]
    capsys.readouterr()
    monkeypatch.setattr(program_train, "train", _no_work)
    monkeypatch.setattr(fig10, "train_transformer", _no_work)
    assert main([*args, "--epochs", "3"]) == 2  # the transformer record is checked first
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "epochs: 2 recorded, 3 requested" in err


def test_reproduce_fig10_adds_program_seeds_to_packed_runs(tmp_path, monkeypatch):
    args = ["reproduce", "fig10", "--budget", "smoke", "--tasks", "sort", "--settings", "8,8",
            "--out", str(tmp_path)]
    assert main(args) == 0
    assert main(["pack", str(tmp_path)]) == 0
    shutil.rmtree(tmp_path / "runs")  # a committed results folder: records, no run folders
    trained = []
    real = program_train.train

    def recording(cfg, *a, **kw):
        trained.append(cfg.seed)
        return real(cfg, *a, **kw)

    monkeypatch.setattr(program_train, "train", recording)
    monkeypatch.setattr(fig10, "train_transformer", _no_work)
    assert main([*args, "--seeds", "0", "1", "--transformer-seeds", "0"]) == 0
    assert trained == [1]  # seed 0 read from runs.json.gz, the transformer from its record
    (row,) = json.loads((tmp_path / "fig10.json").read_text())["rows"]
    assert row["program"]["seeds"] == [0, 1] and row["transformer"]["seeds"] == [0]
    assert max(row["program"]["test_accs"]) >= row["program"]["test_acc"] >= min(
        row["program"]["test_accs"])
    md = (tmp_path / "fig10.md").read_text()
    assert "1 architecture x 2 seeds" in md and "--transformer-seeds 0" in md
    first, second = row["program"]["test_accs"]
    assert f"{first:.2f} / {second:.2f} (mean {(first + second) / 2:.2f})" in md


@pytest.mark.host_only("refused before any work: no arrays")
@pytest.mark.parametrize("bad, message", [
    (["--tasks", "srot"], "unknown task 'srot'; did you mean 'sort'?"),
    (["--tasks", "in-context"], "unknown task of Fig. 10 'induction'"),
    (["--settings", "8,12"], "unknown setting 8,12 of Fig. 10"),
    (["--settings", "8"], "unknown setting 8 of Fig. 10")])
def test_reproduce_fig10_refuses_bad_input_in_one_line(bad, message, tmp_path, capsys,
                                                       monkeypatch):
    monkeypatch.setattr(program_train, "make_data", _no_work)
    monkeypatch.setattr(fig10, "train_transformer", _no_work)
    assert main(["reproduce", "fig10", "--budget", "smoke", *bad, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err
    assert not (tmp_path / "fig10.json").exists()


@pytest.mark.host_only("configurations: no arrays")
def test_fig10_budgets_run_what_they_say():
    small, paper = fig10.budget("small"), fig10.budget("paper")
    assert small["tasks"] == paper["tasks"] == fig10.TASKS
    for task in fig10.TASKS:
        for setting in fig10.SETTINGS:
            size = fig10.cell_size(task, setting)
            if size is None:
                assert task.startswith("dyck") and setting == (8, 8)
                continue
            configs = fig10.program_configs(task, size, small)
            assert len(configs) == 1  # Table 1's architecture of the task, one seed
            c = configs[0]
            layers, heads, mlps = table1.PAPER_ARCH[task]
            assert (c.n_layers, c.n_cat_heads + c.n_num_heads, c.n_cat_mlps + c.n_num_mlps,
                    c.epochs, c.seed) == (layers, heads, mlps, 20, 0)
            assert (c.vocab_size, c.max_len) == size and c.n_samples == 20000
            (t,) = fig10.transformer_configs(c, small)
            assert (t["n_layers"], t["n_heads"], t["d_model"], t["epochs"]) == (2, 4, 256, 20)
            assert t["data"] == {k: getattr(c, k) for k in fig10.DATA_FIELDS}
    assert fig10.cell_size("dyck2", (16, 16)) == fig10.cell_size("dyck2", (8, 16)) == (0, 16)
    programs = fig10.program_configs("hist", (16, 16), paper, seed=3)
    assert len(programs) == 40 and {c.seed for c in programs} == set(range(3, 8))
    assert {(c.n_layers, c.n_cat_heads + c.n_num_heads, c.n_cat_mlps + c.n_num_mlps, c.epochs)
            for c in programs} == {(n, h, m, 250) for n in (2, 3) for h in (4, 8)
                                   for m in (2, 4)}
    transformers = fig10.transformer_configs(programs[0], paper)
    assert {(t["n_layers"], t["n_heads"]) for t in transformers} == {
        (n, h) for n in (2, 3) for h in (4, 8)}
    assert {(t["d_model"], t["lr"], t["batch_size"], t["epochs"]) for t in transformers} == {
        (256, 3e-4, 50, 100)}

"""train_transformer: a standard transformer on a task or on one's own arrays, saved and loaded
back; sizes derived from the data or refused."""

from pathlib import Path

import numpy as np
import pytest

import tpcore
from tpcore.backend import to_host
from tpcore.errors import TpcoreError
from tpcore.pipelines.transformer import derived_config, train_transformer

SORT_RUN = Path(__file__).resolve().parents[2] / "results" / "learn_sort"
SMALL = dict(d_model=32, n_heads=2, d_mlp=64, lr=3e-3)


def sorting(n: int, seed: int) -> dict:
    tokens = np.random.default_rng(seed).integers(1, 6, (n, 6))
    return {"tokens": tokens, "targets": np.sort(tokens, axis=1)}


def test_own_arrays_train_select_and_report():
    splits = {"train": sorting(1500, 0), "val": sorting(200, 1), "test": sorting(200, 2)}
    model, report = train_transformer(splits, epochs=8, **SMALL)
    assert report["test"]["acc"] > 0.95 and set(report) >= {"train", "val", "test", "history"}
    assert [h["step"] for h in report["history"]] == [23 * (e + 1) for e in range(8)]
    assert report["config"]["vocab_size"] == 6 and report["config"]["n_classes"] == 6
    best = max(h["acc"] for h in report["history"])
    assert report["val"]["acc"] == pytest.approx(best)   # the best validation model is kept
    again = train_transformer(splits, epochs=8, **SMALL)[1]
    assert again["history"] == report["history"]        # one seed, one run


def test_sequence_labels_read_out_the_mean():
    data = sorting(1200, 3)
    data["targets"] = data["tokens"][:, 0].copy()       # the label of a sequence: its first token
    model, report = train_transformer({"train": data}, epochs=6, **SMALL)
    assert report["config"]["readout"] == "mean" and report["train"]["acc"] > 0.9
    assert to_host(model.forward(data["tokens"][:4])).shape == (4, 6)


def test_sizes_are_derived_from_every_split_or_refused():
    train, test = sorting(50, 0), sorting(10, 1)
    test["tokens"][0, 0] = 9
    cfg = derived_config({"train": train, "test": test}, {})
    assert cfg.vocab_size == 10 and cfg.max_len == 6 and cfg.readout == "token"
    assert derived_config({"train": train}, {"n_classes": 8}).n_classes == 8
    with pytest.raises(TpcoreError, match="test tokens hold id 9; vocab_size is 6"):
        derived_config({"train": train, "test": test}, {"vocab_size": 6})
    with pytest.raises(TpcoreError, match="readout 'token' with targets of shape"):
        derived_config({"train": {**train, "targets": train["targets"][:, 0]}},
                       {"readout": "token"})


@pytest.mark.parametrize("splits, message", [
    ({"val": sorting(10, 0)}, "with a 'train' split"),
    ({"train": sorting(10, 0), "dev": sorting(10, 0)}, "unknown split 'dev'"),
    ({"train": {"tokens": np.zeros((3, 4), int)}}, "expected tokens and targets"),
    ({"train": {"tokens": np.zeros((3, 4)), "targets": np.zeros((3, 4), int)}},
     "expected integer ids"),
    ({"train": {"tokens": np.zeros((3, 4), int), "targets": np.zeros((3, 5), int)}},
     r"train targets: shape \(3, 5\)"),
    ({"train": {**sorting(3, 0), "mask": np.ones((3, 6))}}, "train mask: .* expected booleans"),
    ({"train": {"tokens": -np.ones((3, 4), int), "targets": np.zeros((3, 4), int)}},
     "negative id -1"),
])
def test_bad_splits_are_one_line(splits, message):
    with pytest.raises(TpcoreError, match=message):
        train_transformer(splits, epochs=1)


def test_bad_settings_are_one_line():
    splits = {"train": sorting(20, 0)}
    with pytest.raises(TpcoreError, match="unknown transformer option 'width'"):
        train_transformer(splits, epochs=1, width=3)
    with pytest.raises(TpcoreError, match="epochs 0: expected an integer >= 1"):
        train_transformer(splits, epochs=0)
    with pytest.raises(TpcoreError, match="n_samples sizes a generated task"):
        tpcore.train_transformer(splits, n_samples=10)


def test_a_task_by_name_saved_and_loaded(tmp_path):
    model, report = tpcore.train_transformer("sort", epochs=2, n_samples=600, **SMALL)
    assert report["config"]["pad_token"] == 0 and report["test"]["acc"] > 0.3
    path = tpcore.save(model, tmp_path / "sorter")
    assert path.suffix == ".npz" and path.with_suffix(".json").is_file()
    back = tpcore.load(path)
    tokens = tpcore.load(SORT_RUN).to_tokens(["d a c b", "e a"])
    np.testing.assert_array_equal(to_host(back.forward(tokens)), to_host(model.forward(tokens)))

"""The wall time of a sweep run in chunks: every chunk's seconds, per rung, kept in wall.json."""

import json
import time

import pytest

from tpcore.errors import TpcoreError
from tpcore.pipelines.learn import LearnConfig
from tpcore.pipelines.sweep import halve
from tpcore.pipelines.wall_clock import EARLIER, WALL_FILE, WallClock, read_phases

TINY = dict(task="induction", n_layers=2, n_cat_heads=1, n_num_heads=0, n_cat_mlps=0,
            n_num_mlps=0, batch_size=64, eval_every=1, n_samples=300, epochs=9)
NAP = 0.05


def _slow_learn(done, stop_at):
    """A learn that trains nothing but takes NAP seconds for each (seed, epochs) it has not
    done before, and stops the sweep (an exception) the first time it reaches ``stop_at``."""
    def fake(cfg, out, quiet=True, overwrite=False, threads=None, pause_after=None):
        if pause_after == stop_at and stop_at not in {e for _, e in done}:
            done.add((cfg.seed, pause_after))
            raise KeyboardInterrupt
        if (cfg.seed, pause_after) not in done:
            time.sleep(NAP)
            done.add((cfg.seed, pause_after))
        history = [{"step": 2 * e, "acc": cfg.seed / 10, "loss": 1.0}
                   for e in range(1, pause_after + 1)]
        return {"steps": 2 * pause_after, "steps_per_epoch": 2, "history": history,
                "train_seconds": 0.0}
    return fake


def test_a_halving_sweep_stopped_and_run_again_counts_both_chunks(tmp_path, monkeypatch):
    done = set()
    monkeypatch.setattr("tpcore.pipelines.learn.learn", _slow_learn(done, stop_at=3))
    configs = [LearnConfig(**TINY, seed=s) for s in range(6)]
    with pytest.raises(KeyboardInterrupt):             # stopped in rung 1
        halve(configs, tmp_path, eta=3, rungs=3)
    first = read_phases(tmp_path)
    assert first["rung 0: 1 epochs"] >= 6 * NAP
    finals, record = halve(configs, tmp_path, eta=3, rungs=3)   # rung 0 is all reused now
    rung0, rung1 = record["rungs"]
    assert rung0["wall_seconds"] >= first["rung 0: 1 epochs"] >= 6 * NAP
    assert rung1["wall_seconds"] >= NAP                 # one of its two runs trained in chunk 2
    saved = json.loads((tmp_path / WALL_FILE).read_text())["phases"]
    assert saved == {"rung 0: 1 epochs": rung0["wall_seconds"],
                     "rung 1: 3 epochs": rung1["wall_seconds"]}
    # an overwriting sweep starts the clock again
    assert WallClock(tmp_path, fresh=True).total == 0


def test_a_folder_without_a_clock_starts_from_its_sweep_json(tmp_path):
    assert read_phases(tmp_path) == {}
    (tmp_path / "sweep.json").write_text('{"wall_seconds": 12.5}')
    assert read_phases(tmp_path) == {EARLIER: 12.5}
    clock = WallClock(tmp_path)
    clock.tick("final")
    assert clock.total >= 12.5 and read_phases(tmp_path)[EARLIER] == 12.5
    for bad in ('{"wall_seconds": "a lot"}', '{"wall_seconds": -3}', '[1]', 'not json'):
        (tmp_path / WALL_FILE).unlink(missing_ok=True)
        (tmp_path / "sweep.json").write_text(bad)
        assert read_phases(tmp_path) == {}


@pytest.mark.parametrize("text", [
    "not json", "[]", '{"phases": [1]}', '{"phases": {"final": -1}}',
    '{"phases": {"final": NaN}}', '{"phases": {"final": true}}', '{"phases": {"final": "1"}}',
    json.dumps({"phases": {f"p{i}": 1 for i in range(65)}}),
    json.dumps({"phases": {"x" * 65: 1}}),
])
def test_a_bad_clock_file_is_refused_in_one_line(tmp_path, text):
    (tmp_path / WALL_FILE).write_text(text)
    with pytest.raises(TpcoreError, match="wall.json: .*delete it to start the clock again"):
        read_phases(tmp_path)

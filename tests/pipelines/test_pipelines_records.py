"""Run records packed into a study's runs.json.gz: every committed one reads back as learn runs'
records, packing keeps what is packed and adds what is on disk, a run is found by its path either
way, and a file that is not a packed record is refused in one line."""

import gzip
import json
import shutil
from pathlib import Path

import pytest

from tpcore.cli import main
from tpcore.errors import TpcoreError
from tpcore.io import TEXT_BYTES
from tpcore.pipelines.learn import read_metrics
from tpcore.pipelines.records import MAX_RUNS, RECORDS, find_record, pack, read_records

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "table1" / "runs" / "induction" / "L2_H1+0_M0+0_s0"


def test_every_committed_runs_json_reads_back():
    files = sorted((ROOT / "results").rglob(RECORDS))
    assert len(files) >= 10 and not list((ROOT / "results").rglob("runs.json"))
    for path in files:
        runs = read_records(path)
        assert runs and all(m["config"]["task"] == m["task"] for m in runs.values())


def _study(tmp_path: Path, names: list[str]) -> Path:
    study = tmp_path / "study"
    for name in names:
        (study / name).mkdir(parents=True)
        shutil.copy(RUN / "metrics.json", study / name / "metrics.json")
    return study


def test_pack_then_find_each_run_by_its_path(tmp_path):
    study = _study(tmp_path, ["a/s0", "a/s1", ".a.partial/s2"])
    result = pack(study)
    assert (result["runs"], result["on_disk"]) == (2, 2)  # the hidden (paused) run is left out
    assert set(read_records(study / RECORDS)) == {"a/s0", "a/s1"}
    packed = (study / RECORDS).read_bytes()
    assert pack(study)["runs"] == 2 and (study / RECORDS).read_bytes() == packed  # same bytes
    shutil.rmtree(study / "a" / "s1")
    record, where = find_record(study / "a" / "s1")
    assert record == read_metrics(RUN) and where.endswith("run 'a/s1'")
    assert find_record(study / "a" / "s0")[1] == str(study / "a" / "s0" / "metrics.json")
    # packing again keeps the record whose folder is gone and adds a new run
    (study / "b").mkdir()
    shutil.copy(RUN / "metrics.json", study / "b" / "metrics.json")
    assert pack(study)["runs"] == 3
    with pytest.raises(TpcoreError, match="has no record of run 'a/s9'"):
        find_record(study / "a" / "s9")


def test_bad_records_are_one_line(tmp_path, capsys):
    assert main(["pack", str(tmp_path)]) == 2
    assert "no learn run records" in capsys.readouterr().err
    study = _study(tmp_path, ["s0"])
    path = study / RECORDS
    record = read_metrics(RUN)
    bad = {"not a tpcore-runs file": {"format": "x", "version": 1, "runs": {}},
           "version 9": {"format": "tpcore-runs", "version": 9, "runs": {}},
           "not a relative folder path": {"format": "tpcore-runs", "version": 1,
                                          "runs": {"../up": record}},
           "at most": {"format": "tpcore-runs", "version": 1,
                       "runs": {f"r{i}": {} for i in range(MAX_RUNS + 1)}},
           "no config": {"format": "tpcore-runs", "version": 1, "runs": {"r": {"task": "x"}}}}
    bad = {words: gzip.compress(json.dumps(doc).encode()) for words, doc in bad.items()}
    bad["not readable gzip"] = json.dumps(record).encode()  # plain text under a .gz name
    bad["not readable gzip "] = gzip.compress(b"{}")[:12]  # cut short
    bad["larger than the limit"] = gzip.compress(b" " * (TEXT_BYTES + 1))
    for words, data in bad.items():
        path.write_bytes(data)
        assert main(["pack", str(study)]) == 2, words
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and str(path) in err and words.strip() in err, err
        assert path.read_bytes() == data  # left untouched
    shutil.rmtree(study / "s0")
    assert main(["rebuild", str(study / "s0"), "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()
    assert main(["rebuild", str(tmp_path / "elsewhere"), "--out", str(tmp_path / "o")]) == 2
    assert "no runs.json.gz above it" in capsys.readouterr().err

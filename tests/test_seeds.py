"""Seeds derived by name: stable across machines and processes, distinct per name."""

import subprocess
import sys

import pytest

from tpcore.seeds import derive_seed

pytestmark = pytest.mark.host_only("seeds: no arrays")


def test_derive_seed_is_stable_and_named():
    assert derive_seed(0, "bp-table", "data", 0) == 1454568759  # the same on every machine
    seeds = {derive_seed(s, "sorting", task, part) for s in (0, 1)
             for task in ("causal", "distinct") for part in ("validation", "test")}
    assert len(seeds) == 8 and all(0 <= s < 2**32 for s in seeds)


def test_derive_seed_is_the_same_in_another_process():
    code = "from tpcore.seeds import derive_seed; print(derive_seed(7, 'a', 1))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"PYTHONHASHSEED": "123"})
    assert int(out.stdout) == derive_seed(7, "a", 1)

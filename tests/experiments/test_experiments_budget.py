"""The one shape of a reproduction: budgets, seeds derived by name, and ``tpcore reproduce NAME``
mapped to ``tpcore.experiments.NAME``."""

import inspect

import pytest

from tpcore.commands.reproduce import EXPERIMENTS
from tpcore.errors import TpcoreError
from tpcore.experiments.budget import Budget, preset, scaled

pytestmark = pytest.mark.host_only("budget presets: no arrays")


def test_budgets_refuse_bad_values_with_a_tpcore_error():
    presets = {"small": Budget("small", {"steps": 10})}
    assert preset("small", presets)["steps"] == 10
    with pytest.raises(TpcoreError, match="unknown budget 'smal'; did you mean 'small'"):
        preset("smal", presets)
    assert scaled("0.5") == Budget("0.5", {"scale": 0.5}) and scaled(1).name == "1.0"
    for bad in ("0", "-1", "nan", "inf", "x"):
        with pytest.raises(TpcoreError, match="budget"):
            scaled(bad)


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_reproduction_has_the_one_shape(name):
    module = EXPERIMENTS[name]
    assert module.__name__ == f"tpcore.experiments.{name.replace('-', '_')}"
    assert list(inspect.signature(module.run).parameters)[:3] == ["budget", "out", "seed"]
    for attr in ("budget", "report"):
        assert callable(getattr(module, attr))
    for text in getattr(module, "BUDGETS", {"1.0": None}):
        assert isinstance(module.budget(text), Budget)
    with pytest.raises(TpcoreError, match="budget"):
        module.budget("bogus")

"""Each reproduction declares its command-line options beside its ``run``: every option names
a keyword argument of ``run``, the command's defaults are the function's, and the command
builds them."""

import argparse
import inspect

import pytest

from tpcore.commands.reproduce import EXPERIMENTS, add_reproduction
from tpcore.experiments.options import Option, Reproduction

pytestmark = pytest.mark.host_only("command-line declarations: no arrays")


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_options_are_the_keyword_arguments_of_run(name):
    module = EXPERIMENTS[name]
    assert isinstance(module.CLI, Reproduction)
    params = list(inspect.signature(module.run).parameters)
    assert params[:3] == ["budget", "out", "seed"]
    assert set(module.CLI.names) <= set(params[3:])  # run may take more from Python
    parser = argparse.ArgumentParser()
    add_reproduction(parser, module)
    args = parser.parse_args([] if name != "published-programs" else ["--programs", "p"])
    assert args.out == module.CLI.out and module.budget(str(args.budget)).name
    for option, dest in zip(module.CLI.options, module.CLI.names):
        default = inspect.signature(module.run).parameters[dest].default
        if not option.required and dest != "quiet":  # the command shows progress, Python not
            assert getattr(args, dest) == default, option.flag


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind 'number'"):
        Option("--x", "x", "number")

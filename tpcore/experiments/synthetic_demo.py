"""The NLP comparisons on the built-in synthetic corpora (:mod:`tpcore.tasks.synthetic_text`):
what ``tpcore reproduce ner-demo`` and ``classify-demo`` share. Minutes on two cores."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tpcore.experiments.budget import Budget, scaled
from tpcore.experiments.options import Option, Reproduction
from tpcore.experiments.text_models import (
    ProgramSettings,
    TransformerSettings,
    comparison_report,
    read_results,
    settings_config,
)
from tpcore.rundir import RunDir
from tpcore.tasks.nlp import Corpus

SIZES = {"train": 4000, "dev": 500, "test": 500}
"""Sentences per split of the synthetic corpus."""
PROGRAM = ProgramSettings(n_layers=2, n_heads=4, n_embed_vars=4, k=32, epochs=10)
TRANSFORMER = TransformerSettings(d_model=64, n_layers=2, n_heads=4, epochs=10)
"""The demos' models at budget 1 (a budget scales their epochs)."""


def budget(text: str | float) -> Budget:
    """``--budget``: a positive number scaling the training epochs."""
    return scaled(text)


def cli(title: str, out: str) -> Reproduction:
    """A demo's command-line face: ``--budget`` scales the epochs; ``--overwrite``,
    ``--quiet``."""
    return Reproduction(title, out, 1.0, "scales the training epochs",
                        (Option("--overwrite", "replace a run of other settings in --out",
                                "switch"),
                         Option("--quiet", "no progress bar", "switch")))


def settings(budget: Budget, seed: int) -> tuple[ProgramSettings, TransformerSettings]:
    """The demo models at ``budget`` (epochs scaled) with ``seed``."""
    return (dataclasses.replace(PROGRAM, epochs=PROGRAM.epochs * budget["scale"], seed=seed),
            dataclasses.replace(TRANSFORMER, epochs=TRANSFORMER.epochs * budget["scale"],
                                seed=seed))


def config(name: str, program: ProgramSettings, transformer: TransformerSettings,
           seed: int) -> dict[str, Any]:
    """A demo run's configuration: the corpus (its sizes and seed) and the model settings."""
    return {"demo": name, "corpus": {"sizes": SIZES, "seed": seed},
            **settings_config(program, transformer)}


def run_demo(name: str, corpus: Callable[..., dict[str, list]],
             prepare: Callable[[dict[str, list]], Corpus], compare: Callable[..., dict[str, Any]],
             budget: Budget, out: Path, seed: int, quiet: bool,
             overwrite: bool) -> dict[str, Any]:
    """``compare`` on ``prepare(corpus(*SIZES, seed=seed))`` with the demo settings at
    ``budget``, into the run directory ``out``: a finished run of this configuration there is
    reused before any work, one of other settings refused unless ``overwrite``. The results
    record the command that reproduces them."""
    program, transformer = settings(budget, seed)
    run_dir = RunDir(out, config(name, program, transformer, seed), overwrite)
    if run_dir.finished:
        return read_results(run_dir)
    data = prepare(corpus(*SIZES.values(), seed=seed))
    command = f"tpcore reproduce {name} --budget {budget.name} --seed {seed}"
    return compare(data, program, transformer, run_dir=run_dir, quiet=quiet,
                   extra={"command": command})


def report(name: str, results: dict[str, Any], table: str, out: Path) -> str:
    """What ``tpcore reproduce NAME`` prints for a demo."""
    return comparison_report(name, results, table, out)

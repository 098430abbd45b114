"""``tpcore reproduce ner-demo``: the NER comparison of :mod:`tpcore.experiments.ner` (unigram vs
standard transformer vs Transformer Program) on the synthetic corpus of
:func:`tpcore.tasks.synthetic_text.ner_corpus`, with the demo settings of
:mod:`tpcore.experiments.synthetic_demo`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tpcore.experiments import synthetic_demo
from tpcore.experiments.budget import Budget
from tpcore.experiments.ner import compare_ner, ner_table
from tpcore.tasks.nlp import prepare_ner
from tpcore.tasks.synthetic_text import ner_corpus

budget = synthetic_demo.budget


CLI = synthetic_demo.cli("synthetic NER: program vs transformer vs baseline",
                         "results/ner-demo")
"""``tpcore reproduce ner-demo``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int, quiet: bool = True,
        overwrite: bool = False) -> dict[str, Any]:
    """The comparison on the corpus of ``seed``, epochs scaled by ``budget``: the run directory
    ``out`` holds ``results.json``, ``table.md``, the models and the decompiled program; a
    finished run of these settings there is reused, one of other settings refused unless
    ``overwrite``."""
    return synthetic_demo.run_demo("ner-demo", ner_corpus, prepare_ner, compare_ner, budget,
                                   out, seed, quiet, overwrite)


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce ner-demo`` prints."""
    return synthetic_demo.report("ner-demo", result, ner_table(result), out)

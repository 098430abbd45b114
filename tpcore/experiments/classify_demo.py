"""``tpcore reproduce classify-demo``: the classification comparison of
:mod:`tpcore.experiments.text_classification` (Naive Bayes vs mean-pooled transformer vs
mean-pooled Transformer Program) on the synthetic sentiment corpus of
:func:`tpcore.tasks.synthetic_text.classification_corpus`, with the demo settings of
:mod:`tpcore.experiments.synthetic_demo`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tpcore.experiments import synthetic_demo
from tpcore.experiments.budget import Budget
from tpcore.experiments.text_classification import classification_table, compare_classification
from tpcore.tasks.nlp import prepare_classification
from tpcore.tasks.synthetic_text import classification_corpus

budget = synthetic_demo.budget


CLI = synthetic_demo.cli("synthetic sentiment: program vs transformer vs baseline",
                         "results/classify-demo")
"""``tpcore reproduce classify-demo``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int, quiet: bool = True,
        overwrite: bool = False) -> dict[str, Any]:
    """The comparison on the corpus of ``seed``, epochs scaled by ``budget``, in the run
    directory ``out`` (as :func:`tpcore.experiments.ner_demo.run`)."""
    return synthetic_demo.run_demo("classify-demo", classification_corpus,
                                   prepare_classification, compare_classification, budget, out,
                                   seed, quiet, overwrite)


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce classify-demo`` prints."""
    return synthetic_demo.report("classify-demo", result, classification_table(result), out)

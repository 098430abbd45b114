"""Text classification, Table 6 of "Learning Transformer Programs": multinomial Naive Bayes, the
standard transformer and the Transformer Program, both mean-pooled
(:class:`tpcore.models.pooled.MeanPooled`: the mean of the final stream over tokens, then the
linear classifier), on labelled sentences (``tpcore learn classify`` for ``LABEL<TAB>TEXT``
files, ``tpcore reproduce classify-demo`` for the synthetic corpus).

Host-side orchestration; the models run on the active backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tpcore.baselines import NaiveBayes
from tpcore.experiments.text_models import (
    Grid,
    Settings,
    build_model,
    check_sizes,
    data_summary,
    extract_program,
    kinds,
    predict,
    run_comparison,
    train,
    train_best,
)
from tpcore.io import write_text
from tpcore.metrics import accuracy
from tpcore.models.pooled import MeanPooled
from tpcore.nn.module import save
from tpcore.pipelines.fidelity import agreement
from tpcore.programs import ir
from tpcore.programs.describe import embedding_table
from tpcore.programs.ir import Program
from tpcore.programs.source import writer
from tpcore.rundir import RunDir
from tpcore.tasks.nlp import BOS, EOS, PAD, ClassificationData


def train_classifier(data: ClassificationData, kind: str, settings: Settings,
                     glove: str | Path | None = None, quiet: bool = True,
                     ) -> tuple[MeanPooled, dict[str, Any]]:
    """Train a mean-pooled ``"program"`` or ``"transformer"`` classifier on ``data``; returns the
    selected model and ``{settings, ..., dev, test}`` (accuracy in percent per split)."""
    model = MeanPooled(build_model(data, kind, settings, glove))

    def score(split: str) -> float:
        a = data.splits[split]
        return accuracy(a["targets"].tolist(), predict(model, a).tolist())

    info = train(model, data.splits, settings, lambda m: {"score": score("dev")}, quiet,
                 f"classify {kind}")
    for split in data.splits:
        if split != "train":
            info[split] = {"accuracy": score(split)}
    return model, info


def classification_fidelity(model: MeanPooled, program: Program,
                            split: dict[str, np.ndarray]) -> dict[str, float]:
    """Agreement of the mean-pooled program (the interpreter's per-token classifier logits,
    NumPy reference, averaged over non-pad tokens) with the discrete model on ``split``. The
    per-token program is exactly what the interpreter runs; the pooling is the readout."""
    return agreement(model, program, split, engines=("numpy",))


def naive_bayes(data: ClassificationData) -> dict[str, Any]:
    """Multinomial Naive Bayes accuracy on every non-training split (specials not counted)."""
    tr = data.splits["train"]
    ignore = tuple(data.vocab.index[w] for w in (PAD, BOS, EOS))
    nb = NaiveBayes.fit(tr["tokens"], tr["targets"], len(data.vocab), len(data.labels),
                        ignore=ignore)
    return {split: {"accuracy": accuracy(a["targets"].tolist(),
                                         nb.predict(a["tokens"]).tolist())}
            for split, a in data.splits.items() if split != "train"}


def compare_classification(data: ClassificationData, program: Grid, transformer: Grid,
                           glove: str | Path | None = None,
                           run_dir: RunDir | None = None, quiet: bool = True,
                           extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Naive Bayes vs standard transformer vs Transformer Program (a column of Table 6; grids
    and None as in :func:`tpcore.experiments.ner.compare_ner`, selected on dev accuracy); with
    ``run_dir``, the models, the program and ``results.json`` + ``table.md`` are written there
    as a unit, or a finished run reused. Sizes are checked before any training; ``extra``
    entries join the results."""
    check_sizes(data, program, transformer)

    def compare(folder: Path | None, named: Path | None) -> dict[str, Any]:
        results: dict[str, Any] = {"data": data_summary(data), "naive_bayes": naive_bayes(data)}
        for kind, grid in kinds(program, transformer):
            model, info = train_best(
                lambda s, k=kind: train_classifier(data, k, s, glove, quiet), grid, "accuracy")
            if kind == "program":
                prog = extract_program(model, data.vocab, data.labels.names, "classify")
                info["written"] = {"fidelity": classification_fidelity(model, prog,
                                                                       data.splits["test"])}
            if folder is not None:
                save(model.inner, folder / kind / f"{kind}.npz",
                     {"vocab": data.vocab.words, "classes": data.labels.names,
                      "readout": "mean"})
                if kind == "program":
                    ir.save(prog, folder / kind / "program.json")
                    writer.write(prog, folder / kind / "program" / "classify.py")
                    write_text(folder / kind / "embeddings.md", embedding_table(prog))
            results[kind] = info
        return {**results, **(extra or {})}

    return run_comparison(run_dir, compare, classification_table)


def classification_table(results: dict[str, Any]) -> str:
    """Markdown table of :func:`compare_classification` results (test accuracy)."""
    rows = [(name, results[key]) for name, key in (
        ("Bag of words (Naive Bayes)", "naive_bayes"), ("Standard Transformer", "transformer"),
        ("Transformer Program", "program")) if key in results]
    lines = ["| Model | dev accuracy | test accuracy |", "|---|---|---|"]
    lines += [f"| {name} | {r['dev']['accuracy']:.1f} | {r['test']['accuracy']:.1f} |"
              for name, r in rows]
    return "\n".join(lines) + "\n"

"""Named entity recognition, Table 2 of "Learning Transformer Programs": the unigram baseline,
the standard transformer and the Transformer Program on a tagged corpus (``tpcore learn
conll`` for CoNLL-2003 files, ``tpcore reproduce ner-demo`` for the synthetic corpus).

The decompiled program is run through the program interpreter (NumPy reference and numba
kernel) and its agreement with the discrete model is reported as ``fidelity``; its classifier
weights give the paper's Figure 7. Host-side orchestration; the models run on the active backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tpcore.baselines import UnigramTagger
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
from tpcore.metrics import conll_scores
from tpcore.nn.module import Module, save
from tpcore.pipelines.fidelity import agreement
from tpcore.programs import ir
from tpcore.programs.describe import embedding_table
from tpcore.programs.ir import Program
from tpcore.programs.source import writer
from tpcore.rundir import RunDir, check_out_dir
from tpcore.tasks.nlp import NerData, tag_sequences

PAPER_TABLE2 = {
    "Unigram baseline": {"D": "-", "L": "-", "H": "-", "precision": 82.8, "recall": 55.1,
                         "f1": 66.2},
    "Standard Transformer": {"D": "128", "L": 3, "H": 4, "precision": 80.4, "recall": 62.7,
                             "f1": 70.5},
    "Transformer Program": {"D": "32x4", "L": 2, "H": 8, "precision": 81.0, "recall": 71.8,
                            "f1": 76.1},
}
"""The paper's Table 2 (CoNLL-2003 English test set, entity-level, percent)."""


def ner_scores(data: NerData, split: str, pred: np.ndarray) -> dict[str, Any]:
    """conlleval scores of tag ids ``pred (S, L)`` on ``split``."""
    a = data.splits[split]
    gold = tag_sequences(a["targets"], a["mask"], data.labels)
    return conll_scores(gold, tag_sequences(pred, a["mask"], data.labels)).as_dict()


def train_ner(data: NerData, kind: str, settings: Settings, glove: str | Path | None = None,
              quiet: bool = True) -> tuple[Module, dict[str, Any]]:
    """Train a ``"program"`` or ``"transformer"`` tagger on ``data``; returns the selected model
    and ``{settings, steps, ..., history, dev, test}`` (conlleval scores per split)."""
    model = build_model(data, kind, settings, glove)

    def evaluate(m: Module) -> dict[str, float]:
        return {"score": ner_scores(data, "dev", predict(m, data.splits["dev"]))["f1"]}

    info = train(model, data.splits, settings, evaluate, quiet, f"ner {kind}")
    for split in data.splits:
        if split != "train":
            info[split] = ner_scores(data, split, predict(model, data.splits[split]))
    return model, info


def unigram_ner(data: NerData) -> dict[str, Any]:
    """The unigram baseline's conlleval scores on every non-training split."""
    tr = data.splits["train"]
    tagger = UnigramTagger.fit(tr["tokens"], tr["targets"], tr["mask"], len(data.vocab),
                               len(data.labels))
    return {split: ner_scores(data, split, tagger.predict(a["tokens"]))
            for split, a in data.splits.items() if split != "train"}


def ner_fidelity(model: Module, program: Program,
                 split: dict[str, np.ndarray]) -> dict[str, float]:
    """Agreement of the interpreter (NumPy reference and numba kernel) with the discrete model
    at the word positions of ``split``."""
    return agreement(model, program, split, engines=("numpy", "numba"))


def class_gap_table(program: Program, first: str = "B-LOC", second: str = "B-ORG",
                    top: int = 15) -> str:
    """The paper's Figure 7 (a): the classifier features (variable = value) whose weight for
    ``first`` minus its weight for ``second`` is largest in magnitude, as Markdown; for an
    embedding variable or a head copying one, the words taking that value are listed (7 c)."""
    c = program.classifier
    a, b = c.classes.index(first), c.classes.index(second)
    words = program.variables["tokens"].values
    lookups = {m.output: np.asarray(m.table) for m in program.modules
               if getattr(m, "inputs", None) == ("tokens",)}
    source = {m.output: m.value for m in program.modules if hasattr(m, "value")}
    rows = []
    for f in c.features:
        w = c.weights[f]
        for i in range(w.shape[0]):
            rows.append((float(w[i, a] - w[i, b]), f, i))
    rows.sort(key=lambda r: -abs(r[0]))
    out = [f"| feature | value | weight({first}) - weight({second}) | words with that value |",
           "|---|---|---|---|"]
    for gap, f, i in rows[:top]:
        var = program.variables[f]
        label = var.values[i] if var.kind == "categorical" else "(numerical)"
        table = lookups.get(source.get(f, f))
        shown = ""
        if table is not None and var.kind == "categorical":
            ids = np.flatnonzero(table == var.values[i])
            shown = ", ".join(str(words[j]) for j in ids[:8]) + (" ..." if len(ids) > 8 else "")
        out.append(f"| {f} | {label} | {gap:+.2f} | {shown} |")
    return "\n".join(out) + "\n"


def write_ner_run(out: Path, named: Path, model: Module, data: NerData,
                  kind: str) -> dict[str, Any]:
    """Save a trained NER model (and for a program its IR, Python source, Figure 7 table and
    fidelity) into ``out``; returns what was written, named under ``named``."""
    check_out_dir(out)
    save(model, out / f"{kind}.npz", {"vocab": data.vocab.words, "classes": data.labels.names})
    written: dict[str, Any] = {"model": str(named / f"{kind}.npz")}
    if kind == "program":
        program = extract_program(model, data.vocab, data.labels.names, "ner")
        ir.save(program, out / "program.json")
        writer.write(program, out / "program" / "ner.py")
        write_text(out / "embeddings.md", embedding_table(program))
        if {"B-LOC", "B-ORG"} <= set(data.labels.names):
            write_text(out / "figure7.md", class_gap_table(program))
        written.update(program=str(named / "program" / "ner.py"),
                       ir=str(named / "program.json"), lines=writer.line_counts(program),
                       fidelity=ner_fidelity(model, program, data.splits["test"]))
    return written


def compare_ner(data: NerData, program: Grid, transformer: Grid,
                glove: str | Path | None = None, run_dir: RunDir | None = None,
                quiet: bool = True, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Unigram vs standard transformer vs Transformer Program on ``data`` (Table 2's rows; each
    model's settings may be a grid, selected on dev F1; None skips it). With ``run_dir``, the
    models, the program and ``results.json`` + ``table.md`` are written there as a unit, or a
    finished run reused (:func:`tpcore.experiments.text_models.run_comparison`). Sizes are
    checked before any training; ``extra`` entries (the command behind a run) join the
    results."""
    check_sizes(data, program, transformer)

    def compare(folder: Path | None, named: Path | None) -> dict[str, Any]:
        results: dict[str, Any] = {"data": data_summary(data), "unigram": unigram_ner(data)}
        for kind, grid in kinds(program, transformer):
            model, info = train_best(lambda s, k=kind: train_ner(data, k, s, glove, quiet),
                                     grid, "f1")
            if folder is not None:
                info["written"] = write_ner_run(folder / kind, named / kind, model, data, kind)
            elif kind == "program":
                prog = extract_program(model, data.vocab, data.labels.names, "ner")
                info["written"] = {"fidelity": ner_fidelity(model, prog, data.splits["test"])}
            results[kind] = info
        return {**results, **(extra or {})}

    return run_comparison(run_dir, compare, ner_table)


def ner_table(results: dict[str, Any], paper: bool = False) -> str:
    """Markdown table of :func:`compare_ner` results (test split), optionally beside Table 2."""
    rows = [("Unigram baseline", "-", "-", "-", results["unigram"]["test"])]
    if "transformer" in results:
        t = results["transformer"]["settings"]
        rows.append(("Standard Transformer", t["d_model"], t["n_layers"], t["n_heads"],
                     results["transformer"]["test"]))
    if "program" in results:
        p = results["program"]["settings"]
        rows.append(("Transformer Program", f"{p['k']}x{p['n_embed_vars']}", p["n_layers"],
                     p["n_heads"], results["program"]["test"]))
    head = "| Model | D | L | H | Precision | Recall | F1 |"
    if paper:
        head += " paper P | paper R | paper F1 |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, d, layers, heads, s in rows:
        line = (f"| {name} | {d} | {layers} | {heads} | {s['precision']:.1f} | "
                f"{s['recall']:.1f} | {s['f1']:.1f} |")
        if paper:
            q = PAPER_TABLE2[name]
            line += f" {q['precision']} | {q['recall']} | {q['f1']} |"
        lines.append(line)
    return "\n".join(lines) + "\n"

"""NLP experiments of "Learning Transformer Programs" (section 4.3, appendices B.3 and C.4):
named entity recognition (Table 2) and text classification (Table 6), for files a user has and
for the built-in synthetic corpora.

Models (each trained through :func:`tpcore.train.fit`, selected on the validation split):

- **Transformer Program** for NER: learned factored word embeddings (``n_embed_vars`` variables
  of cardinality ``k``), categorical heads only, one categorical MLP per layer (the paper's NER
  setting), per-token classification; Adam, Gumbel temperature 3.0 -> 0.01 geometric per step,
  the discrete model (argmax everywhere) evaluated and selected on validation F1;
- **standard transformer** (:mod:`tpcore.models.transformer`) on the same data;
- for classification both are wrapped in :class:`tpcore.models.pooled.MeanPooled` (mean of the
  final stream over tokens, then the linear classifier);
- baselines: the unigram tagger and multinomial Naive Bayes (:mod:`tpcore.baselines`).

Word embeddings of both models can start from a GloVe text file (:mod:`tpcore.tasks.glove`).
The decompiled NER program is run through the program interpreter (NumPy reference and numba
kernel) and its agreement with the discrete model is reported as ``fidelity``.

:func:`ner_demo` is the reproduction ``tpcore reproduce ner-demo``: the synthetic NER corpus,
program vs standard transformer vs unigram, written to ``results.json`` and ``table.md``.
Host-side orchestration; the models' compute runs on the active backend.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.backend import asarray, to_host
from tpcore.errors import TpcoreError
from tpcore.metrics import accuracy, conll_scores
from tpcore.pipelines.fidelity import agreement
from tpcore.programs.analysis import embedding_table
from tpcore.rundir import check_out_dir
from tpcore.tasks.nlp import (
    BOS,
    EOS,
    PAD,
    ClassificationData,
    NerData,
    Vocab,
    tag_sequences,
)

PAPER_TABLE2 = {
    "Unigram baseline": {"D": "-", "L": "-", "H": "-", "precision": 82.8, "recall": 55.1,
                         "f1": 66.2},
    "Standard Transformer": {"D": "128", "L": 3, "H": 4, "precision": 80.4, "recall": 62.7,
                             "f1": 70.5},
    "Transformer Program": {"D": "32x4", "L": 2, "H": 8, "precision": 81.0, "recall": 71.8,
                            "f1": 76.1},
}
"""The paper's Table 2 (CoNLL-2003 English test set, entity-level, percent)."""

PAPER_TABLE6 = {
    "Bag of words": {"TREC": 74.8, "MR": 77.8, "Subj": 92.6, "AG": 89.6},
    "Standard Transformer": {"TREC": 88.6, "MR": 77.2, "Subj": 92.3, "AG": 91.7},
    "Transformer Program": {"TREC": 85.6, "MR": 77.9, "Subj": 93.0, "AG": 90.8},
}
"""The paper's Table 6 (test accuracy, percent)."""


@dataclass
class ProgramSettings:
    """A Transformer Program run: architecture (per layer: ``n_heads`` categorical heads and
    ``n_mlps`` categorical MLPs, one in the paper's NER setting) and training (``epochs`` over
    the training split, validation every ``eval_every`` epochs). The paper: k = 32 (NER) or 64
    (classification), m in {2, 4, 8}, layers {1, 2, 3}, heads {4, 8}, batch 32, 30-100
    epochs."""

    n_layers: int = 2
    n_heads: int = 4
    n_mlps: int = 1
    n_embed_vars: int = 4
    k: int = 32
    d_mlp: int = 64
    epochs: float = 10.0
    batch_size: int = 32
    lr: float = 0.05
    eval_every: float = 1.0
    seed: int = 0


@dataclass
class TransformerSettings:
    """A standard transformer run (pre-LayerNorm encoder, GELU MLP of width ``4 d_model``). The
    paper searches d_model {64, 128, 256}, layers {1, 2, 3}, heads {4, 8}, batch 32, up to 100
    epochs."""

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    dropout: float = 0.1
    epochs: float = 10.0
    batch_size: int = 32
    lr: float = 1e-3
    eval_every: float = 1.0
    seed: int = 0


# ---------------------------------------------------------------------------- models
def build_program(s: ProgramSettings, vocab_size: int, max_len: int, n_classes: int,
                  embedding: np.ndarray | None = None) -> Any:
    """A ``ProgramModel`` with learned embeddings, categorical heads and categorical MLPs;
    ``embedding (V, m k)`` (e.g. projected GloVe) replaces the initial embedding logits."""
    from tpcore.models.program import ProgramConfig, ProgramModel

    model = ProgramModel(ProgramConfig(
        vocab_size=vocab_size, max_len=max_len, n_classes=n_classes, n_layers=s.n_layers,
        n_cat_heads=s.n_heads, n_num_heads=0, n_cat_mlps=s.n_mlps, n_num_mlps=0, k=s.k,
        d_mlp=s.d_mlp, n_embed_vars=s.n_embed_vars, seed=s.seed))
    if embedding is not None:
        shape = model.embedding.shape
        model.embedding.data[...] = asarray(embedding.reshape(shape), model.embedding.data.dtype)
    return model


def build_transformer(s: TransformerSettings, vocab_size: int, max_len: int, n_classes: int,
                      embedding: np.ndarray | None = None) -> Any:
    """A standard transformer with per-token logits; ``embedding (V, d_model)`` replaces the
    initial token embedding."""
    from tpcore.models.transformer import Transformer, TransformerConfig

    model = Transformer(TransformerConfig(
        vocab_size=vocab_size, max_len=max_len, n_classes=n_classes, d_model=s.d_model,
        n_layers=s.n_layers, n_heads=s.n_heads, d_mlp=4 * s.d_model, dropout=s.dropout,
        seed=s.seed))
    if embedding is not None:
        model.tok_emb.data[...] = asarray(embedding, model.tok_emb.data.dtype)
    return model


def glove_init(path: str | Path | None, vocab: Vocab, width: int, seed: int) -> np.ndarray | None:
    """Projected GloVe vectors ``(V, width)`` for ``vocab`` (None without a file)."""
    if path is None:
        return None
    from tpcore.tasks.glove import project, read_glove

    vectors, found = read_glove(path, vocab.words)
    return project(vectors, found, width, seed)


def build_model(data: NerData, kind: str, settings: Any, glove: str | Path | None) -> Any:
    """A per-token ``"program"`` or ``"transformer"`` for ``data`` (GloVe-initialised when a
    file is given)."""
    v, c = len(data.vocab), len(data.labels)
    if kind == "program":
        emb = glove_init(glove, data.vocab, settings.n_embed_vars * settings.k, settings.seed)
        return build_program(settings, v, data.max_len, c, emb)
    if kind == "transformer":
        emb = glove_init(glove, data.vocab, settings.d_model, settings.seed)
        return build_transformer(settings, v, data.max_len, c, emb)
    raise TpcoreError(f"model kind {kind!r} unknown; expected 'program' or 'transformer'")


def _is_program(model: Any) -> bool:
    inner = getattr(model, "inner", model)
    return hasattr(inner, "discrete")


def _forward_kwargs(model: Any) -> dict[str, Any]:
    """Evaluation mode: the discrete program (``tau=None``), or no dropout."""
    return {"tau": None} if _is_program(model) else {}


def predict(model: Any, split: dict[str, np.ndarray], batch_size: int = 512) -> np.ndarray:
    """Host predictions of the evaluation-mode model: ``(S, L)`` tag ids or ``(S,)`` classes."""
    out = []
    kw = _forward_kwargs(model)
    for i in range(0, len(split["tokens"]), batch_size):
        logits = model.forward(asarray(split["tokens"][i:i + batch_size]),
                               asarray(split["pad"][i:i + batch_size]), **kw)
        out.append(np.asarray(to_host(logits.argmax(axis=-1))))
    return np.concatenate(out)


def ner_scores(data: NerData, split: str, pred: np.ndarray) -> dict[str, Any]:
    """conlleval scores of tag ids ``pred (S, L)`` on ``split``."""
    a = data.splits[split]
    gold = tag_sequences(a["targets"], a["mask"], data.labels)
    return conll_scores(gold, tag_sequences(pred, a["mask"], data.labels)).as_dict()


def _train(model: Any, splits: dict[str, dict[str, np.ndarray]], s: Any, evaluate: Any,
           quiet: bool, desc: str) -> dict[str, Any]:
    """Adam through :func:`fit`, selecting on ``evaluate(model)["score"]``; program models get
    the Gumbel schedule and the one-sample program step."""
    from tpcore.backend import blas_threads
    from tpcore.nn.optim import Adam
    from tpcore.pipelines.learn import program_step
    from tpcore.train import TrainConfig, fit, shuffled_batches, supervised_step

    blas_threads(1)
    train = splits["train"]
    per_epoch = max(1, len(train["tokens"]) // min(s.batch_size, len(train["tokens"])))
    steps = max(1, int(round(s.epochs * per_epoch)))
    every = max(1, int(round(s.eval_every * per_epoch)))
    if _is_program(model):
        def step(m: Any, b: Any, ctx: Any) -> float:
            if "mask" in b:
                return program_step(m, b, ctx)
            return supervised_step(m, b, ctx, rng=ctx.rng, tau=ctx.tau)
        tau = (3.0, 0.01)
    else:
        def step(m: Any, b: Any, ctx: Any) -> float:
            return supervised_step(m, b, ctx, reduction="sequence_mean", rng=ctx.rng)
        tau = None
    cfg = TrainConfig(steps=steps, tau=tau, eval_every=every, select="score", seed=s.seed,
                      quiet=quiet, desc=desc)
    result = fit(model, Adam(model.parameters(), lr=s.lr),
                 shuffled_batches(train, s.batch_size, s.seed), step, cfg, evaluate)
    return {"settings": dataclasses.asdict(s), "steps": result.steps,
            "train_seconds": result.seconds, "ms_per_step": 1000 * result.seconds / result.steps,
            "selected_at_step": result.best.get("step"), "history": result.history}


# ---------------------------------------------------------------------------- NER
def train_ner(data: NerData, kind: str, settings: Any, glove: str | Path | None = None,
              quiet: bool = True) -> tuple[Any, dict[str, Any]]:
    """Train a ``"program"`` or ``"transformer"`` tagger on ``data``; returns the selected model
    and ``{settings, steps, ..., history, dev, test}`` (conlleval scores per split)."""
    model = build_model(data, kind, settings, glove)

    def evaluate(m: Any) -> dict[str, float]:
        return {"score": ner_scores(data, "dev", predict(m, data.splits["dev"]))["f1"]}

    info = _train(model, data.splits, settings, evaluate, quiet, f"ner {kind}")
    for split in data.splits:
        if split != "train":
            info[split] = ner_scores(data, split, predict(model, data.splits[split]))
    return model, info


def unigram_ner(data: NerData) -> dict[str, Any]:
    """The unigram baseline's conlleval scores on every non-training split."""
    from tpcore.baselines import UnigramTagger

    tr = data.splits["train"]
    tagger = UnigramTagger.fit(tr["tokens"], tr["targets"], tr["mask"], len(data.vocab),
                               len(data.labels))
    return {split: ner_scores(data, split, tagger.predict(a["tokens"]))
            for split, a in data.splits.items() if split != "train"}


def extract_program(model: Any, vocab: Vocab, classes: list[str], name: str) -> Any:
    """The program IR of a trained (per-token) Transformer Program."""
    from tpcore.models.extract import extract

    inner = getattr(model, "inner", model)
    return extract(inner, vocab.words, classes, name=name, bos=BOS, eos=EOS, pad=PAD)


def ner_fidelity(model: Any, program: Any, split: dict[str, np.ndarray]) -> dict[str, float]:
    """Agreement of the interpreter (NumPy reference and numba kernel) with the discrete model
    at the word positions of ``split``."""
    return agreement(model, program, split, engines=("numpy", "numba"))


def class_gap_table(program: Any, first: str = "B-LOC", second: str = "B-ORG", top: int = 15,
                    ) -> str:
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


def write_ner_run(out: Path, model: Any, data: NerData, kind: str,
                  info: dict[str, Any]) -> dict[str, Any]:
    """Save a trained NER model (and for a program its IR, Python source, Figure 7 table and
    fidelity) under ``out``; returns what was written."""
    from tpcore.io import write_text
    from tpcore.nn.module import save

    out.mkdir(parents=True, exist_ok=True)
    save(model, out / f"{kind}.npz", {"vocab": data.vocab.words, "classes": data.labels.names})
    written: dict[str, Any] = {"model": str(out / f"{kind}.npz")}
    if kind == "program":
        from tpcore.programs import codegen, ir

        program = extract_program(model, data.vocab, data.labels.names, "ner")
        ir.save(program, out / "program.json")
        py, _ = codegen.write(program, out / "program" / "ner.py")
        write_text(out / "embeddings.md", embedding_table(program))
        if {"B-LOC", "B-ORG"} <= set(data.labels.names):
            write_text(out / "figure7.md", class_gap_table(program))
        written.update(program=str(py), ir=str(out / "program.json"),
                       lines=codegen.line_counts(program),
                       fidelity=ner_fidelity(model, program, data.splits["test"]))
    return written


Grid = Any
"""One settings object, a list of them (a grid search), or None (model skipped)."""


def _kinds(program: Grid, transformer: Grid) -> list[tuple[str, list]]:
    pairs = (("transformer", transformer), ("program", program))
    return [(k, s if isinstance(s, list) else [s]) for k, s in pairs if s]


def train_best(train: Any, grid: list, metric: str) -> tuple[Any, dict[str, Any]]:
    """Train ``train(settings)`` for every point of ``grid`` (the paper's grid search over
    architectures, epochs and seeds) and keep the model with the best validation ``metric``;
    its info gets ``grid``: each point's settings with its dev and test score."""
    best: Any = None
    best_info: dict[str, Any] = {}
    rows = []
    for settings in grid:
        model, info = train(settings)
        rows.append({"settings": info["settings"], "dev": info["dev"][metric],
                     "test": info["test"][metric]})
        if best is None or info["dev"][metric] > best_info["dev"][metric]:
            best, best_info = model, info
    best_info["grid"] = rows
    return best, best_info


def compare_ner(data: NerData, program: Grid, transformer: Grid,
                glove: str | Path | None = None, out: str | Path | None = None,
                quiet: bool = True) -> dict[str, Any]:
    """Unigram vs standard transformer vs Transformer Program on ``data`` (Table 2's rows; each
    model's settings may be a grid, selected on dev F1; None skips it); with ``out``, the
    models, the program and ``results.json`` + ``table.md`` are written (``out`` is checked to
    be writable first; nothing in it is reused)."""
    if out is not None:
        check_out_dir(out)
    start = time.perf_counter()
    results: dict[str, Any] = {"data": data_summary(data), "unigram": unigram_ner(data)}
    for kind, grid in _kinds(program, transformer):
        model, info = train_best(lambda s, k=kind: train_ner(data, k, s, glove, quiet), grid,
                                 "f1")
        if out is not None:
            info["written"] = write_ner_run(Path(out) / kind, model, data, kind, info)
        elif kind == "program":
            prog = extract_program(model, data.vocab, data.labels.names, "ner")
            info["written"] = {"fidelity": ner_fidelity(model, prog, data.splits["test"])}
        results[kind] = info
    results["seconds"] = time.perf_counter() - start
    if out is not None:
        write_results(out, results, ner_table(results))
    return results


def data_summary(data: NerData) -> dict[str, Any]:
    """Sizes of a prepared corpus for the results file."""
    return {"vocab_size": len(data.vocab), "labels": data.labels.names, "max_len": data.max_len,
            "sizes": {k: int(len(v["tokens"])) for k, v in data.splits.items()},
            "dropped": data.dropped}


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


def write_results(out: str | Path, results: dict[str, Any], table: str) -> None:
    """``results.json`` and ``table.md`` under ``out``, atomically."""
    from tpcore.io import write_json, write_text

    out = Path(out)
    write_json(out / "results.json", results)
    write_text(out / "table.md", table)


# ---------------------------------------------------------------------------- classification
def train_classifier(data: ClassificationData, kind: str, settings: Any,
                     glove: str | Path | None = None, quiet: bool = True,
                     ) -> tuple[Any, dict[str, Any]]:
    """Train a mean-pooled ``"program"`` or ``"transformer"`` classifier on ``data``; returns the
    selected model and ``{settings, ..., dev, test}`` (accuracy in percent per split)."""
    from tpcore.models.pooled import MeanPooled

    model = MeanPooled(build_model(data, kind, settings, glove))

    def score(split: str) -> float:
        a = data.splits[split]
        return accuracy(a["targets"].tolist(), predict(model, a).tolist())

    info = _train(model, data.splits, settings, lambda m: {"score": score("dev")}, quiet,
                  f"classify {kind}")
    for split in data.splits:
        if split != "train":
            info[split] = {"accuracy": score(split)}
    return model, info


def classification_fidelity(model: Any, program: Any, split: dict[str, np.ndarray],
                            ) -> dict[str, float]:
    """Agreement of the mean-pooled program (the interpreter's per-token classifier logits,
    NumPy reference, averaged over non-pad tokens) with the discrete model on ``split``. The
    per-token program is exactly what the interpreter runs; the pooling is the readout."""
    return agreement(model, program, split, engines=("numpy",))


def naive_bayes(data: ClassificationData) -> dict[str, Any]:
    """Multinomial Naive Bayes accuracy on every non-training split (specials not counted)."""
    from tpcore.baselines import NaiveBayes

    tr = data.splits["train"]
    ignore = tuple(data.vocab.index[w] for w in (PAD, BOS, EOS))
    nb = NaiveBayes.fit(tr["tokens"], tr["targets"], len(data.vocab), len(data.labels),
                        ignore=ignore)
    return {split: {"accuracy": accuracy(a["targets"].tolist(),
                                         nb.predict(a["tokens"]).tolist())}
            for split, a in data.splits.items() if split != "train"}


def compare_classification(data: ClassificationData, program: Grid, transformer: Grid,
                           glove: str | Path | None = None, out: str | Path | None = None,
                           quiet: bool = True) -> dict[str, Any]:
    """Naive Bayes vs standard transformer vs Transformer Program (a column of Table 6; grids
    and None as in :func:`compare_ner`, selected on dev accuracy); with ``out``, the models and
    ``results.json`` + ``table.md`` are written (``out`` is checked to be writable first;
    nothing in it is reused)."""
    from tpcore.nn.module import save

    if out is not None:
        check_out_dir(out)
    start = time.perf_counter()
    results: dict[str, Any] = {"data": data_summary(data), "naive_bayes": naive_bayes(data)}
    for kind, grid in _kinds(program, transformer):
        model, info = train_best(
            lambda s, k=kind: train_classifier(data, k, s, glove, quiet), grid, "accuracy")
        if kind == "program":
            prog = extract_program(model, data.vocab, data.labels.names, "classify")
            info["written"] = {"fidelity": classification_fidelity(model, prog,
                                                                   data.splits["test"])}
        if out is not None:
            save(model.inner, Path(out) / kind / f"{kind}.npz",
                 {"vocab": data.vocab.words, "classes": data.labels.names, "readout": "mean"})
            if kind == "program":
                from tpcore.io import write_text
                from tpcore.programs import codegen, ir

                ir.save(prog, Path(out) / kind / "program.json")
                codegen.write(prog, Path(out) / kind / "program" / "classify.py")
                write_text(Path(out) / kind / "embeddings.md", embedding_table(prog))
        results[kind] = info
    results["seconds"] = time.perf_counter() - start
    if out is not None:
        write_results(out, results, classification_table(results))
    return results


def classification_table(results: dict[str, Any]) -> str:
    """Markdown table of :func:`compare_classification` results (test accuracy)."""
    rows = [(name, results[key]) for name, key in (
        ("Bag of words (Naive Bayes)", "naive_bayes"), ("Standard Transformer", "transformer"),
        ("Transformer Program", "program")) if key in results]
    lines = ["| Model | dev accuracy | test accuracy |", "|---|---|---|"]
    lines += [f"| {name} | {r['dev']['accuracy']:.1f} | {r['test']['accuracy']:.1f} |"
              for name, r in rows]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- demo
DEMO_SIZES = {"train": 4000, "dev": 500, "test": 500}
DEMO_PROGRAM = ProgramSettings(n_layers=2, n_heads=4, n_embed_vars=4, k=32, epochs=10)
DEMO_TRANSFORMER = TransformerSettings(d_model=64, n_layers=2, n_heads=4, epochs=10)


def _demo(name: str, data: Any, compare: Any, table: Any, out_dir: str | Path, budget: float,
          seed: int, quiet: bool) -> dict[str, Any]:
    """Run ``compare`` with the demo settings (epochs scaled by ``budget``) and write the
    results with the command that reproduces them."""
    prog = dataclasses.replace(DEMO_PROGRAM, epochs=DEMO_PROGRAM.epochs * budget, seed=seed)
    trans = dataclasses.replace(DEMO_TRANSFORMER, epochs=DEMO_TRANSFORMER.epochs * budget,
                                seed=seed)
    results = compare(data, prog, trans, out=out_dir, quiet=quiet)
    results["command"] = f"tpcore reproduce {name} --budget {budget} --seed {seed}"
    write_results(out_dir, results, table(results))
    return results


def _check_budget(budget: float) -> None:
    if budget <= 0:
        raise TpcoreError(f"budget must be > 0, got {budget}")


def ner_demo(out_dir: str | Path = "results/ner-demo", budget: float = 1.0, seed: int = 0,
             quiet: bool = True) -> dict[str, Any]:
    """The synthetic NER comparison (``tpcore reproduce ner-demo``): corpus of
    :func:`tpcore.tasks.synthetic_text.ner_corpus` (``seed``), the demo settings with their
    epochs scaled by ``budget``; writes ``results.json`` and ``table.md`` (plus the models and the
    decompiled program) under ``out_dir``."""
    from tpcore.tasks.nlp import prepare_ner
    from tpcore.tasks.synthetic_text import ner_corpus

    _check_budget(budget)
    check_out_dir(out_dir)
    data = prepare_ner(ner_corpus(*DEMO_SIZES.values(), seed=seed))
    return _demo("ner-demo", data, compare_ner, ner_table, out_dir, budget, seed, quiet)


def classify_demo(out_dir: str | Path = "results/classify-demo", budget: float = 1.0,
                  seed: int = 0, quiet: bool = True) -> dict[str, Any]:
    """The synthetic sentiment comparison (``tpcore reproduce classify-demo``): corpus of
    :func:`tpcore.tasks.synthetic_text.classification_corpus`, Naive Bayes vs mean-pooled
    transformer vs mean-pooled program (k = 32, epochs scaled by ``budget``)."""
    from tpcore.tasks.nlp import prepare_classification
    from tpcore.tasks.synthetic_text import classification_corpus

    _check_budget(budget)
    check_out_dir(out_dir)
    data = prepare_classification(classification_corpus(*DEMO_SIZES.values(), seed=seed))
    return _demo("classify-demo", data, compare_classification, classification_table, out_dir,
                 budget, seed, quiet)

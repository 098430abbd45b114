"""The models of the NLP experiments of "Learning Transformer Programs" (section 4.3,
appendices B.3 and C.4) and what every NLP comparison shares: settings, building, training,
grid search, memory checks, results files.

- **Transformer Program**: learned factored word embeddings (``n_embed_vars`` variables of
  cardinality ``k``), categorical heads only, categorical MLPs (one per layer in the paper's NER
  setting); Adam, Gumbel temperature 3.0 -> 0.01 geometric per step, the discrete model (argmax
  everywhere) evaluated and selected on the validation split;
- **standard transformer** (:mod:`tpcore.models.transformer`) on the same data.

Both train through :func:`tpcore.train.fit`; word embeddings of both can start from a GloVe text
file (:mod:`tpcore.tasks.glove`). Host-side orchestration; the models run on the active backend.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.backend import asarray, to_host
from tpcore.errors import TpcoreError
from tpcore.io import write_json, write_text
from tpcore.limits import check_memory
from tpcore.models.extract import extract
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.models.transformer import Transformer, TransformerConfig
from tpcore.nn.module import Module
from tpcore.nn.optim import Adam
from tpcore.pipelines.learn import program_step
from tpcore.programs.ir import Program
from tpcore.rundir import RunDir
from tpcore.tasks.glove import project, read_glove
from tpcore.tasks.nlp import BOS, EOS, PAD, Corpus, Vocab
from tpcore.train import Batch, StepContext, TrainConfig, fit, shuffled_batches, supervised_step

PREDICT_BATCH = 512
"""Sentences per forward pass when predicting."""


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

    def model_config(self, vocab_size: int, max_len: int, n_classes: int) -> ProgramConfig:
        """The model of these settings for a corpus of ``vocab_size`` words, sentences of
        ``max_len`` tokens and ``n_classes`` labels."""
        return ProgramConfig(
            vocab_size=vocab_size, max_len=max_len, n_classes=n_classes,
            n_layers=self.n_layers, n_cat_heads=self.n_heads, n_num_heads=0,
            n_cat_mlps=self.n_mlps, n_num_mlps=0, k=self.k, d_mlp=self.d_mlp,
            n_embed_vars=self.n_embed_vars, seed=self.seed)

    def memory_estimate(self, vocab_size: int, max_len: int, n_classes: int) -> int:
        """Bytes of the largest arrays training allocates (float32; a bound): the model's
        estimate (:meth:`ProgramConfig.memory_estimate`) at the larger of the training and the
        prediction batch."""
        config = self.model_config(vocab_size, max_len, n_classes)
        return config.memory_estimate(max(self.batch_size, PREDICT_BATCH))


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

    def model_config(self, vocab_size: int, max_len: int, n_classes: int) -> TransformerConfig:
        """The model of these settings for a corpus (as :meth:`ProgramSettings.model_config`)."""
        return TransformerConfig(
            vocab_size=vocab_size, max_len=max_len, n_classes=n_classes, d_model=self.d_model,
            n_layers=self.n_layers, n_heads=self.n_heads, d_mlp=4 * self.d_model,
            dropout=self.dropout, seed=self.seed)

    def memory_estimate(self, vocab_size: int, max_len: int, n_classes: int) -> int:
        """Bytes of the largest arrays training allocates (float32; a bound): parameters with
        gradients and two Adam moments; at the larger of the training and the prediction
        batch, one forward's activations and as many again for the gradients: per token and
        layer the stream, norms, queries, keys, values and outputs (``8 d``), the MLP's hidden
        units (``2 x 4 d``) and per head ``3 N`` attention scores, probabilities and dropout
        mask."""
        c = self.model_config(vocab_size, max_len, n_classes)
        d, N = self.d_model, max_len
        per_token = self.n_layers * (8 * d + 8 * d + 3 * self.n_heads * N) + 2 * d
        batch = max(self.batch_size, PREDICT_BATCH)
        return 4 * 4 * c.n_parameters() + 2 * 4 * batch * N * per_token


Settings = ProgramSettings | TransformerSettings
Grid = Settings | list[Settings] | None
"""One settings object, a list of them (a grid search), or None (model skipped)."""


def kinds(program: Grid, transformer: Grid) -> list[tuple[str, list[Settings]]]:
    """The models to train, transformer first, each with its list of settings."""
    pairs = (("transformer", transformer), ("program", program))
    return [(k, s if isinstance(s, list) else [s]) for k, s in pairs if s]


def check_sizes(data: Corpus, program: Grid, transformer: Grid) -> None:
    """Refuse, before any training, settings whose :meth:`memory_estimate` on ``data`` exceeds
    the memory limit (:func:`tpcore.limits.check_memory`)."""
    sizes = (len(data.vocab), data.max_len, len(data.labels))
    for kind, grid in kinds(program, transformer):
        for s in grid:
            check_memory(s.memory_estimate(*sizes), f"a {kind} of {s.n_layers} layers x "
                         f"{s.n_heads} heads, batch {s.batch_size}, on a vocabulary of "
                         f"{sizes[0]} words and sentences of {sizes[1]} tokens", device=True)


def glove_init(path: str | Path | None, vocab: Vocab, width: int, seed: int) -> np.ndarray | None:
    """Projected GloVe vectors ``(V, width)`` for ``vocab`` (None without a file)."""
    if path is None:
        return None
    vectors, found = read_glove(path, vocab.words)
    return project(vectors, found, width, seed)


def build_program(s: ProgramSettings, vocab_size: int, max_len: int, n_classes: int,
                  embedding: np.ndarray | None = None) -> ProgramModel:
    """A ``ProgramModel`` with learned embeddings, categorical heads and categorical MLPs;
    ``embedding (V, m k)`` (e.g. projected GloVe) replaces the initial embedding logits."""
    model = ProgramModel(s.model_config(vocab_size, max_len, n_classes))
    if embedding is not None:
        shape = model.embedding.shape
        model.embedding.data[...] = asarray(embedding.reshape(shape), model.embedding.data.dtype)
    return model


def build_transformer(s: TransformerSettings, vocab_size: int, max_len: int, n_classes: int,
                      embedding: np.ndarray | None = None) -> Transformer:
    """A standard transformer with per-token logits; ``embedding (V, d_model)`` replaces the
    initial token embedding."""
    model = Transformer(s.model_config(vocab_size, max_len, n_classes))
    if embedding is not None:
        model.tok_emb.data[...] = asarray(embedding, model.tok_emb.data.dtype)
    return model


def build_model(data: Corpus, kind: str, settings: Settings,
                glove: str | Path | None) -> Module:
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


def is_program(model: Module) -> bool:
    """Whether ``model`` (or the model it pools) is a Transformer Program."""
    return hasattr(getattr(model, "inner", model), "discrete")


def predict(model: Module, split: dict[str, np.ndarray],
            batch_size: int = PREDICT_BATCH) -> np.ndarray:
    """Host predictions of the evaluation-mode model (the discrete program, ``tau=None``, or no
    dropout): ``(S, L)`` tag ids or ``(S,)`` classes."""
    out = []
    kw = {"tau": None} if is_program(model) else {}
    for i in range(0, len(split["tokens"]), batch_size):
        logits = model.forward(asarray(split["tokens"][i:i + batch_size]),
                               asarray(split["pad"][i:i + batch_size]), **kw)
        out.append(np.asarray(to_host(logits.argmax(axis=-1))))
    return np.concatenate(out)


def _program_step(m: Module, b: Batch, ctx: StepContext) -> Any:
    if "mask" in b:
        return program_step(m, b, ctx)
    return supervised_step(m, b, ctx, rng=ctx.rng, tau=ctx.tau, checked=True)


def _transformer_step(m: Module, b: Batch, ctx: StepContext) -> Any:
    return supervised_step(m, b, ctx, reduction="sequence_mean", rng=ctx.rng)


def train(model: Module, splits: dict[str, dict[str, np.ndarray]], s: Settings,
          evaluate: Callable[[Module], dict[str, float]], quiet: bool,
          desc: str) -> dict[str, Any]:
    """Adam through :func:`fit`, selecting on ``evaluate(model)["score"]``; program models get
    the Gumbel schedule and the one-sample program step. Returns the settings, steps, timing,
    the step selected and the history."""
    tr = splits["train"]
    per_epoch = max(1, len(tr["tokens"]) // min(s.batch_size, len(tr["tokens"])))
    steps = max(1, int(round(s.epochs * per_epoch)))
    every = max(1, int(round(s.eval_every * per_epoch)))
    program = is_program(model)
    if program:
        getattr(model, "inner", model).check_tokens(tr["tokens"])
    cfg = TrainConfig(steps=steps, tau=(3.0, 0.01) if program else None, eval_every=every,
                      select="score", seed=s.seed, quiet=quiet, desc=desc)
    result = fit(model, Adam(model.parameters(), lr=s.lr),
                 shuffled_batches(tr, s.batch_size, s.seed),
                 _program_step if program else _transformer_step, cfg, evaluate)
    return {"settings": dataclasses.asdict(s), "steps": result.steps,
            "train_seconds": result.seconds, "ms_per_step": 1000 * result.seconds / result.steps,
            "selected_at_step": result.best.get("step"), "history": result.history}


def train_best(train_one: Callable[[Settings], tuple[Module, dict[str, Any]]],
               grid: list[Settings], metric: str) -> tuple[Module, dict[str, Any]]:
    """Train ``train_one(settings)`` for every point of ``grid`` (the paper's grid search over
    architectures, epochs and seeds) and keep the model with the best validation ``metric``;
    its info gets ``grid``: each point's settings with its dev and test score."""
    best: Any = None
    best_info: dict[str, Any] = {}
    rows = []
    for settings in grid:
        model, info = train_one(settings)
        rows.append({"settings": info["settings"], "dev": info["dev"][metric],
                     "test": info["test"][metric]})
        if best is None or info["dev"][metric] > best_info["dev"][metric]:
            best, best_info = model, info
    best_info["grid"] = rows
    return best, best_info


def extract_program(model: Module, vocab: Vocab, classes: list[str], name: str) -> Program:
    """The program IR of a trained (per-token) Transformer Program."""
    return extract(getattr(model, "inner", model), vocab.words, classes, name=name, bos=BOS,
                   eos=EOS, pad=PAD)


def data_summary(data: Corpus) -> dict[str, Any]:
    """Sizes of a prepared corpus for the results file."""
    return {"vocab_size": len(data.vocab), "labels": data.labels.names, "max_len": data.max_len,
            "sizes": {k: int(len(v["tokens"])) for k, v in data.splits.items()},
            "dropped": data.dropped}


def file_record(path: str | Path) -> dict[str, Any]:
    """How a run configuration names an input file: its path, size and SHA-256, so that a run
    of the same path with other contents is not reused."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"path": str(path), "bytes": Path(path).stat().st_size,
            "sha256": digest.hexdigest()}


def settings_config(program: Grid, transformer: Grid) -> dict[str, Any]:
    """The model settings of a comparison as its run configuration records them."""
    return {kind: [dataclasses.asdict(s) for s in grid]
            for kind, grid in kinds(program, transformer)}


Compare = Callable[[Path | None, Path | None], dict[str, Any]]
"""``compare(folder, named)``: train and measure, writing the run's files into ``folder``
(nothing when None) and naming them in the results as they will be found, under ``named``."""


def run_comparison(run_dir: RunDir | None, compare: Compare,
                   table: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    """``compare`` writing into ``run_dir`` (:class:`tpcore.rundir.RunDir`, made by the caller
    before any work, which refuses a run of other settings there unless told to overwrite it):
    a finished run of its configuration is reused (its ``results.json``); a new run is built in
    a temporary folder with ``results.json`` and ``table.md`` and renamed into place when
    complete. Without a run directory nothing is written. The results record the seconds
    ``compare`` took."""
    def timed(folder: Path | None, named: Path | None) -> dict[str, Any]:
        start = time.perf_counter()
        results = compare(folder, named)
        results["seconds"] = time.perf_counter() - start
        return results

    if run_dir is None:
        return timed(None, None)
    if run_dir.finished:
        return read_results(run_dir)
    with run_dir.build() as tmp:
        results = timed(tmp, run_dir.path)
        write_results(tmp, results, table(results))
    return results


def read_results(run_dir: RunDir) -> dict[str, Any]:
    """The ``results.json`` of a finished run directory."""
    return json.loads((run_dir.path / "results.json").read_text())


def write_results(out: str | Path, results: dict[str, Any], table: str) -> None:
    """``results.json`` and ``table.md`` under ``out``, atomically."""
    out = Path(out)
    write_json(out / "results.json", results)
    write_text(out / "table.md", table)


def comparison_report(name: str, results: dict[str, Any], table: str, out: str | Path) -> str:
    """What the command of the comparison ``name`` prints: the corpus, the table and the
    fidelity of the decompiled program."""
    d = results["data"]
    lines = [f"{name}: vocabulary {d['vocab_size']}, labels {d['labels']}, sentences "
             f"{d['sizes']} (dropped over --max-words: {d['dropped']}) -> {out}", table.rstrip()]
    fid = results.get("program", {}).get("written", {}).get("fidelity")
    if fid:
        lines.append("decompiled program vs discrete model on test: " + ", ".join(
            f"{engine} {100 * v:.2f}%" for engine, v in fid.items()) + " agreement")
    return "\n".join(lines)

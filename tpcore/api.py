"""tpcore's Python API: train, load, read and run Transformer Programs, and the other
capabilities, in a few calls (``docs/api.md`` is its guide). ``import tpcore`` exposes these
names (:data:`__all__`), importing this module on first use::

    import tpcore

    run = tpcore.learn("sort", layers=2, epochs=60)   # a Run: runs/sort, as `tpcore learn sort`
    prog = run.program                                 # a TransformerProgram
    prog.run("d a c b")                                # ['a', 'b', 'c', 'd']
    print(prog.head("attn_1_0"))                       # one head's predicate as a table

Every function here wraps the library's own (:mod:`tpcore.pipelines.learn`,
:mod:`tpcore.programs`, :mod:`tpcore.models`, ...); nothing is computed twice.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from tpcore import subleq, trees
from tpcore.analysis.html_view import program_html
from tpcore.analysis.program_figures import example_input
from tpcore.backend import to_host
from tpcore.errors import TpcoreError
from tpcore.experiments.sorting import sort_list
from tpcore.experiments.sorting import train_setting as train_sorter
from tpcore.io import write_text
from tpcore.models import load as load_model
from tpcore.models.lens import from_lens, to_lens
from tpcore.models.transformer import Transformer
from tpcore.nn.module import Module
from tpcore.nn.module import save as save_module
from tpcore.pipelines import learn as pipeline
from tpcore.pipelines.decompile import load_program
from tpcore.pipelines.score import evaluate_on_data, evaluate_on_task
from tpcore.pipelines.transformer import train_transformer as train_on_splits
from tpcore.programs import describe, ir
from tpcore.programs.interpret import ENGINES, check_tokens, encode, run_tokens
from tpcore.programs.source import writer
from tpcore.rundir import check_out_dir
from tpcore.tasks.data import TaskData

__all__ = ["Run", "Text", "TransformerProgram", "from_lens", "learn", "load", "save", "sort_list",
           "subleq", "to_lens", "train_sorter", "train_transformer", "trees"]

OPTIONS = {"layers": "n_layers", "cat_heads": "n_cat_heads", "num_heads": "n_num_heads",
           "cat_mlps": "n_cat_mlps", "num_mlps": "n_num_mlps"}
""":func:`learn`'s option names that differ from :class:`~tpcore.pipelines.learn.LearnConfig`'s
fields (the CLI's names: ``--layers``, ``--cat-heads``, ...)."""


class Text(str):
    """Text that a notebook or the REPL shows as it reads (its ``repr`` is itself)."""

    def __repr__(self) -> str:
        return str(self)


class TransformerProgram:
    """A discrete Transformer Program: run it, read it, export it. ``ir`` is its program IR
    (:class:`tpcore.programs.ir.Program`), which the lower-level functions take."""

    def __init__(self, program: ir.Program):
        self.ir = program

    @classmethod
    def read(cls, path: str | Path) -> TransformerProgram:
        """The program stored at ``path``: a run directory, an IR ``.json``, a program file
        (``.py``, tpcore's or the authors' published format, read without running it) or a
        saved program model (``.npz``, extracted)."""
        return cls(load_program(path))

    @property
    def name(self) -> str:
        return self.ir.name

    @property
    def vocabulary(self) -> tuple[str, ...]:
        """The input tokens, framing tokens included."""
        return tuple(str(t) for t in self.ir.tokens.values)

    @property
    def heads(self) -> list[str]:
        """The names of the attention heads, in program order (``attn_L_H``, ``num_attn_L_H``)."""
        return [m.name for m in self.ir.modules if isinstance(m, ir.Head)]

    def run(self, tokens: str | Sequence[str], engine: str = "numpy") -> list[str]:
        """The output for one input, given as its tokens (a list, or one string split on
        spaces) without the ``<s>``/``</s>`` framing, which is added and taken off here;
        ``engine``: ``"numpy"`` or ``"numba"`` (:func:`tpcore.programs.interpret.run_tokens`).
        A token outside the vocabulary raises a :class:`TpcoreError` naming it."""
        if engine not in ENGINES:
            raise TpcoreError(f"unknown engine {engine!r}; expected one of {ENGINES}")
        return run_tokens(self.ir, tokens.split() if isinstance(tokens, str) else tokens, engine)

    def source(self, full: bool = False) -> Text:
        """The readable Python program (standard library only); ``full``: before compression
        (one branch per query value)."""
        return Text(writer.source(self.ir, compress=not full))

    def export(self, folder: str | Path, full: bool = False) -> tuple[Path, Path]:
        """Write ``NAME.py`` and its weights CSV into ``folder`` (created if needed); the program
        runs on its own: ``python NAME.py d a c b``. Returns both paths."""
        return writer.write(self.ir, check_out_dir(folder), compress=not full)

    def html(self, path: str | Path, tokens: str | Sequence[str] | None = None,
             full: bool = False) -> Path:
        """Write one self-contained HTML page to ``path``: the source beside every head's
        attention on ``tokens`` (content tokens as :meth:`run` takes them; default an example of
        the longest length) and its predicate; hovering a token shows what each head reads
        there (:mod:`tpcore.analysis.html_view`). Returns ``path``."""
        if tokens is None:
            framed = example_input(self.ir)
        else:
            framed = check_tokens(self.ir, tokens.split() if isinstance(tokens, str) else tokens)
        write_text(path, program_html(self.ir, framed, full=full))
        return Path(path)

    def head(self, name: str) -> Text:
        """Head ``name``'s predicate as a table: a row per query value, a column per key value,
        ``x`` where the query selects the key (:func:`tpcore.programs.describe.head_table`)."""
        return Text(describe.head_table(self.ir, name))

    def graph(self) -> Text:
        """The dependency graph: which variables each head and MLP reads."""
        return Text(describe.dependency_text(self.ir))

    def explain(self, tokens: str | Sequence[str], position: int) -> list[dict[str, Any]]:
        """The classifier's score per feature at ``position`` of the framed input (0 is
        ``<s>``), largest first for the predicted class (the paper's Figure 7)."""
        words = tokens.split() if isinstance(tokens, str) else list(tokens)
        framed = self.ir.frame(words)
        if type(position) is not int or not 0 <= position < len(framed):
            raise TpcoreError(f"position {position!r:.20} outside the framed input's positions "
                              f"0..{len(framed) - 1}")
        return describe.contributions(self.ir, framed, position)

    def evaluate(self, task: str, split: str = "test", n_samples: int = 20000,
                 seed: int = 0, engine: str = "numpy") -> dict[str, Any]:
        """Token and sequence accuracy on a split of ``task`` generated at the program's size
        from ``n_samples`` and ``seed`` (:func:`tpcore.pipelines.score.evaluate_on_task`): a
        fresh split, not a learn run's own; :meth:`Run.evaluate` scores a run's program on the
        data the run was trained on."""
        if type(seed) is not int or seed < 0:
            raise TpcoreError(f"seed {seed!r:.20}: expected an integer >= 0")
        return evaluate_on_task(self.ir, task, split, n_samples, seed, engine)

    def save(self, path: str | Path) -> None:
        """Write the program IR as JSON (read back by :func:`load`)."""
        ir.save(self.ir, path)

    def __repr__(self) -> str:
        return (f"TransformerProgram({self.name!r}: {len(self.ir.modules)} modules, "
                f"vocabulary {len(self.vocabulary)}, max length {self.ir.max_len})")


class Run:
    """A finished ``tpcore learn`` run directory: its ``metrics`` (``metrics.json``), ``config``
    (the :class:`~tpcore.pipelines.learn.LearnConfig` it records, type- and size-checked),
    trained ``model``, decompiled ``program`` and regenerated ``data``."""

    def __init__(self, path: str | Path, reused: bool | None = None):
        self.path = Path(path)
        if not pipeline.is_run(self.path):
            raise TpcoreError(f"{self.path}: not a finished learn run (no metrics.json and "
                              "model.npz)")
        self.metrics, self.config = pipeline.recorded_run(self.path)
        self.reused = reused

    @property
    def task(self) -> str:
        return self.config.task

    def accuracy(self, split: str = "test") -> float:
        """Token accuracy of the discrete model on ``split`` (``train``, ``val``, ``test``)."""
        if split not in ("train", "val", "test"):
            raise TpcoreError(f"unknown split {split!r}; expected train, val or test")
        return pipeline.recorded_accuracy(self.metrics, split, self.path / "metrics.json")

    @cached_property
    def program(self) -> TransformerProgram:
        """The decompiled program (``program.json``, or extracted from the model)."""
        return TransformerProgram.read(self.path)

    @cached_property
    def model(self) -> Module:
        """The trained model (:class:`tpcore.models.program.ProgramModel`)."""
        return load_model(self.path / "model.npz")

    @cached_property
    def data(self) -> TaskData:
        """The task's generated splits, as the run saw them (regenerated from its seeds)."""
        return pipeline.make_data(self.config)

    def evaluate(self, split: str = "test", engine: str = "numpy") -> dict[str, Any]:
        """The decompiled program's token and sequence accuracy on the run's own ``split``
        (regenerated from the run's data settings and seeds), so that it compares with
        :meth:`accuracy` (:func:`tpcore.pipelines.score.evaluate_on_data`)."""
        if engine not in ENGINES:
            raise TpcoreError(f"unknown engine {engine!r}; expected one of {ENGINES}")
        return evaluate_on_data(self.program.ir, self.data, split, engine)

    def encode(self, tokens: str | Sequence[str]) -> np.ndarray:
        """One input (its tokens, or one string split on spaces, without ``<s>``/``</s>``) as the
        model's token ids ``(1, N)``, framed: what ``run.model.forward`` and the hook functions
        of :mod:`tpcore.models.hooks` take. Several inputs: :meth:`to_tokens`."""
        return self.encode_batch([tokens])[0]

    def encode_batch(self, inputs: Sequence[str | Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Several inputs (each as :meth:`encode` takes one) as token ids ``(B, N)`` and the
        padding mask ``pad (B, N)`` (True after a shorter input's ``</s>``), ``N`` the longest
        framed input: ``run.model.forward(ids, pad)`` and ``decode(logits, pad)`` take them. A
        token outside the vocabulary, or a framing token (``<s>``, ``</s>``, ``<pad>``) inside
        an input, raises naming its input, position and token."""
        if isinstance(inputs, str):
            raise TpcoreError("encode_batch takes a list of inputs; encode takes one string")
        prog = self.program.ir
        special = {t for t in (prog.bos, prog.eos, prog.pad) if t is not None}
        framed = []
        for b, tokens in enumerate(inputs):
            words = tokens.split() if isinstance(tokens, str) else list(tokens)
            for i, word in enumerate(words):
                if word not in prog.tokens.lookup or word in special:
                    raise TpcoreError(f"token {word!r} (input {b}, position {i}) is not in the "
                                      "vocabulary of inputs "
                                      f"{[t for t in prog.tokens.values if t not in special]}")
            framed.append(prog.frame(words))
        if not framed:
            raise TpcoreError("encode_batch got no inputs")
        ids, lengths = encode(prog, framed)
        pad = np.arange(ids.shape[1]) >= lengths[:, None]
        if pad.any():
            if prog.pad is None:
                raise TpcoreError(f"inputs of {len(set(lengths.tolist()))} lengths, and the "
                                  "program has no padding token; encode them one at a time")
            ids[pad] = prog.tokens.lookup[prog.pad]
        return ids, pad

    def to_tokens(self, input: str | Sequence[str]) -> np.ndarray:
        """Token ids as TransformerLens's ``to_tokens`` gives them: one string (tokens split on
        spaces) -> ``(1, N)``; a list of strings, one input each -> ``(B, N)``, framed with
        ``<s>``/``</s>`` and the shorter ones padded with ``<pad>`` (:meth:`pad_mask` reads the
        padding back; :meth:`__call__` and ``decode(logits, tokens=...)`` do so themselves)."""
        if isinstance(input, str):
            return self.encode(input)
        if not all(isinstance(x, str) for x in input):
            raise TpcoreError("to_tokens takes a string or a list of strings (one input each); "
                              "the tokens of one input as a list: encode(tokens)")
        return self.encode_batch(list(input))[0]

    def _ids(self, tokens: Any) -> np.ndarray:
        """``tokens`` as host ids ``(B, N)``: a string or a list of strings through
        :meth:`to_tokens`, ids of one input ``(N,)`` given a batch axis."""
        if isinstance(tokens, str) or (isinstance(tokens, list | tuple) and tokens
                                       and all(isinstance(x, str) for x in tokens)):
            return self.to_tokens(tokens)
        ids = np.asarray(to_host(tokens))
        if ids.ndim == 1:
            ids = ids[None]
        if ids.ndim != 2 or ids.dtype.kind not in "iu":
            raise TpcoreError(f"tokens of shape {ids.shape} and dtype {ids.dtype}; expected "
                              "integer ids (B, N) or (N,), a string or a list of strings")
        return ids

    def pad_mask(self, tokens: Any) -> np.ndarray:
        """``(B, N)`` True where ``tokens`` (ids, :meth:`to_tokens`) hold the ``<pad>`` token."""
        prog = self.program.ir
        ids = self._ids(tokens)
        if prog.pad is None:
            return np.zeros(ids.shape, dtype=bool)
        return ids == prog.tokens.lookup[prog.pad]

    def __call__(self, input: Any) -> np.ndarray:
        """Logits ``(B, N, C)`` of the trained model in its discrete mode, as TransformerLens's
        ``model(input)``: ``input`` a string, a list of strings or token ids; padding is read
        from the ``<pad>`` tokens (:meth:`pad_mask`)."""
        ids = self._ids(input)
        return to_host(self.model.forward(ids, self.pad_mask(ids)))

    def to_str_tokens(self, input: Any) -> list[str] | list[list[str]]:
        """The framed tokens of one input as strings (``["<s>", "d", ..., "</s>"]``), from a
        string or its ids ``(N,)`` / ``(1, N)``; of several, ids ``(B, N)`` or a list of
        strings, a list per input. Padding is left out."""
        rows = self._str_rows(self._ids(input))
        return rows[0] if len(rows) == 1 and not self._is_batch(input) else rows

    def to_string(self, tokens: Any) -> str | list[str]:
        """Token ids back to the input they encode (tokens joined by spaces, framing and padding
        left out): one string for ``(N,)`` / ``(1, N)``, a list for ``(B, N)``."""
        prog = self.program.ir
        text = [" ".join(t for t in row if t not in (prog.bos, prog.eos))
                for row in self._str_rows(self._ids(tokens))]
        return text[0] if len(text) == 1 and not self._is_batch(tokens) else text

    def _str_rows(self, ids: np.ndarray) -> list[list[str]]:
        """Each row of the ids ``(B, N)`` as token strings, padding left out."""
        values, keep = self.program.ir.tokens.values, ~self.pad_mask(ids)
        return [[values[int(t)] for t, k in zip(row, kept) if k] for row, kept in zip(ids, keep)]

    @staticmethod
    def _is_batch(input: Any) -> bool:
        """Whether ``input`` names several inputs: a list of strings, or ids with ``B > 1``."""
        if isinstance(input, str):
            return False
        if isinstance(input, list | tuple):
            return bool(input) and all(isinstance(x, str) for x in input)
        return np.ndim(input) == 2 and np.shape(input)[0] > 1

    def predict(self, input: str | Sequence[str]) -> list[str] | list[list[str]]:
        """The trained model's labels of each content position: of one input (a string), a
        list; of a list of strings, a list per input (padding handled)."""
        ids = self._ids(input)
        labels = self.decode(self(ids), tokens=ids)
        return labels[0] if isinstance(input, str) else labels

    def decode(self, logits: Any, pad: Any = None, tokens: Any = None
               ) -> list[str] | list[list[str]]:
        """The predicted labels (argmax) of the content positions, the ``<s>``/``</s>``
        positions and padding left out: of one input from ``logits (1, N, C)``, a list; of
        several from ``logits (B, N, C)`` with their ``pad (B, N)`` mask (:meth:`encode_batch`)
        or their ``tokens`` (:meth:`to_tokens`, whose ``<pad>`` ids give it), a list per input.
        Logits of several inputs with neither are refused: where each input ends cannot be
        read from them."""
        prog = self.program.ir
        pred = to_host(logits).argmax(axis=-1)
        if pad is None and tokens is not None:
            pad = self.pad_mask(tokens)
        if pad is None and len(pred) > 1:
            raise TpcoreError(f"logits of {len(pred)} inputs: give their pad mask or tokens "
                              "(decode(logits, pad) or decode(logits, tokens=ids)) so that "
                              "each input's end is known")
        keep = (np.ones(pred.shape, dtype=bool) if pad is None
                else ~np.asarray(to_host(pad), dtype=bool))
        if keep.shape != pred.shape:
            raise TpcoreError(f"pad has shape {keep.shape}; the logits hold {pred.shape}")
        first, labels = int(prog.bos is not None), prog.classifier.classes
        rows = []
        for row, kept in zip(pred, keep):
            last = int(kept.sum()) - int(prog.eos is not None)
            rows.append([str(labels[int(c)]) for c in row[first:last]])
        return rows[0] if pad is None else rows

    def __repr__(self) -> str:
        c = self.config
        counting = "" if c.counting == "none" else f", counting {c.counting}"
        return (f"Run({str(self.path)!r}: {c.task}, {c.n_layers} layer"
                f"{'s' * (c.n_layers != 1)}, {c.n_cat_heads}+{c.n_num_heads} heads, "
                f"{c.n_cat_mlps}+{c.n_num_mlps} MLPs{counting}, seed {c.seed}; test token "
                f"accuracy {100 * self.accuracy():.2f} %)")


def learn(task: str, out: str | Path | None = None, *, overwrite: bool = False,
          quiet: bool = True, threads: int | None = None, **options: Any) -> Run:
    """Train a Transformer Program on ``task`` and decompile it, as ``tpcore learn TASK`` does:
    the run directory ``out`` (default ``runs/TASK``) is reused when it holds a finished run of
    these settings, refused when it holds one of others (unless ``overwrite``).

    ``options``: the CLI's ``layers``, ``cat_heads``, ``num_heads``, ``cat_mlps``, ``num_mlps``
    and every other :class:`~tpcore.pipelines.learn.LearnConfig` field (``epochs``, ``lr``,
    ``seed``, ``n_samples``, ...; the task's architecture where not given,
    :func:`~tpcore.pipelines.learn.task_config`); ``quiet=False`` shows a progress bar on a
    terminal; ``threads``: BLAS threads (default: ``TPCORE_THREADS``, else up to 2
    cores, :func:`tpcore.cpu.default_threads`)."""
    if not isinstance(task, str):
        raise TpcoreError(f"task {task!r:.40}: expected a task name (a string)")
    fields = {f.name for f in dataclasses.fields(pipeline.LearnConfig)} - {"task"}
    settings, names = {}, {}
    for key, value in options.items():
        name = OPTIONS.get(key, key)
        if name not in fields:
            raise TpcoreError(f"unknown learn option {key!r}; expected one of "
                              f"{sorted(set(OPTIONS) | fields - set(OPTIONS.values()))}")
        settings[name], names[name] = value, key
    pipeline.LearnConfig.check_types(settings, "learn option ", names, repr)
    cfg = pipeline.task_config(task, **settings)
    cfg.check()
    out = Path(out or Path("runs") / cfg.task)
    metrics = pipeline.learn(cfg, out, quiet=quiet, overwrite=overwrite, threads=threads)
    return Run(out, reused=metrics["reused"])


def train_transformer(data: str | dict[str, dict[str, Any]], *, epochs: int = 20,
                      batch_size: int = 64, lr: float = 1e-3, seed: int = 0,
                      n_samples: int | None = None, quiet: bool = True,
                      threads: int | None = None, **options: Any) -> tuple[Transformer, dict]:
    """Train a standard transformer and return it with its report (the configuration, steps,
    time, the validation history, and loss, token and sequence accuracy per split).

    ``data``: a task name (``"sort"``, ``"hist"``, ...: its generated train / val / test
    splits, ``n_samples`` inputs in all, padding and causality as the task has them) or the
    caller's own splits, ``{"train": {"tokens": ..., "targets": ...[, "mask", "pad"]},
    "val": ..., "test": ...}`` (:mod:`tpcore.pipelines.transformer` says what each holds and
    which sizes are derived). ``options``: :class:`~tpcore.models.transformer.TransformerConfig`
    fields (``d_model``, ``n_layers``, ``n_heads``, ``d_mlp``, ``causal``, ...). ``save(model,
    path)`` writes it and ``load(path)`` reads it back."""
    if isinstance(data, str):
        settings = {} if n_samples is None else {"n_samples": n_samples}
        task = pipeline.make_data(pipeline.task_config(data, **settings))
        splits: dict[str, Any] = task.splits
        pad = task.vocab.index(task.pad) if task.pad is not None else None
        options = {"pad_token": pad, "causal": task.causal, "max_len": task.max_len, **options}
    elif n_samples is not None:
        raise TpcoreError("n_samples sizes a generated task; own splits have their own size")
    else:
        splits = data
    return train_on_splits(splits, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed,
                           quiet=quiet, threads=threads, **options)


def save(model: Module, path: str | Path) -> Path:
    """Write a model (a :class:`~tpcore.models.transformer.Transformer`, a program model) as
    ``path`` with suffix ``.npz`` (the weights) and ``.json`` (its class and configuration),
    each atomically; :func:`load` reads it back. Returns the ``.npz`` path."""
    if not isinstance(model, Module):
        raise TpcoreError(f"save({type(model).__name__}): expected a tpcore model")
    path = Path(path).with_suffix(".npz")
    save_module(model, path)
    return path


def load(path: str | Path) -> Run | TransformerProgram | Module:
    """What ``path`` holds: a learn run directory gives a :class:`Run`; a program (IR ``.json``,
    program ``.py``, a folder with one) a :class:`TransformerProgram`; a saved model (``.npz``
    beside its ``.json``: a sorting transformer, a program model) the model, on the active
    backend."""
    if not isinstance(path, str | os.PathLike):
        raise TpcoreError(f"load({path!r:.40}): expected a path")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if path.is_dir() and pipeline.is_run(path):
        return Run(path)
    if path.suffix == ".npz":
        return load_model(path)
    return TransformerProgram.read(path)

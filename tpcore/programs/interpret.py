"""Run a program IR on a batch of sequences: a vectorised array reference and a numba kernel.

Inputs are token indices ``ids: (B, N)`` (any value past a sequence's length is ignored) and
``lengths: (B,)``. Categorical variables are carried as index arrays ``(B, N)`` (int64), numerical
ones as ``(B, N)`` float64. Predictions are indices into :meth:`Program.output_labels`, ``-1`` past
each sequence's length. The semantics of every module are in :mod:`tpcore.programs.modules`, whose
kinds each evaluate themselves in the reference; the two engines give identical outputs (tested).
The reference takes its array module from ``ids``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpcore.backend import to_host, xp_of
from tpcore.errors import TpcoreError
from tpcore.programs.ir import Head, Program
from tpcore.programs.modules import Batch
from tpcore.programs.values import LIMITS

__all__ = [
    "ENGINES", "check_framing", "check_tokens", "check_work", "compile_program", "encode",
    "evaluate", "feature_logits", "key_mask", "passthrough", "predict", "run_ids",
    "run_reference", "run_tokens",
]

ENGINES = ("numpy", "numba")


def encode(program: Program, sequences: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """Framed token strings -> ``(ids (B, N), lengths (B,))`` with ``N`` the longest sequence.

    Raises naming the token or sequence when a token is unknown, a sequence is too long, or it
    is not framed as the program's inputs are (starting with its ``bos``, ending with its ``eos``
    where it has them): a program's predictions on unframed input mean nothing.
    """
    vocab = {t: i for i, t in enumerate(program.tokens.values)}
    n = max((len(s) for s in sequences), default=0)
    if n > program.max_len:
        raise TpcoreError(f"sequence of length {n} exceeds the program's maximum length "
                          f"{program.max_len}")
    ids = np.zeros((len(sequences), max(n, 1)), dtype=np.int64)
    lengths = np.zeros(len(sequences), dtype=np.int64)
    for b, seq in enumerate(sequences):
        if len(seq) == 0:
            raise TpcoreError(f"sequence {b} is empty")
        for i, tok in enumerate(seq):
            if tok not in vocab:
                raise TpcoreError(f"token {tok!r} (sequence {b}, position {i}) is not in the "
                                  f"vocabulary {list(vocab)}")
            ids[b, i] = vocab[tok]
        check_framing(program, seq, b)
        lengths[b] = len(seq)
    return ids, lengths


def check_framing(program: Program, tokens: Sequence[str], b: int = 0) -> None:
    """Raise unless ``tokens`` (sequence ``b`` of a batch) starts with the program's ``bos`` and
    ends with its ``eos`` (where it has them), naming what it found and how to frame it."""
    for token, found, where in ((program.bos, tokens[0], "start"),
                                (program.eos, tokens[-1], "end")):
        if token is not None and found != token:
            raise TpcoreError(f"sequence {b} does not {where} with {token!r} (found {found!r}): "
                              f"the program's inputs are framed as {program.frame(['...'])}; "
                              "frame them with Program.frame(tokens)")


def key_mask(lengths: Any, n: int, causal: bool) -> Any:
    """``mask[b, i, j]``: key ``j`` is visible from query ``i``: ``j < length`` (``j <= i`` if
    causal). ``lengths: (B,)``; returns ``(B, N, N)`` bool."""
    xp = xp_of(lengths)
    j = xp.arange(n)
    mask = xp.broadcast_to(j[None, None, :] < lengths[:, None, None], (lengths.shape[0], n, n))
    if causal:
        mask = mask & (j[None, :, None] >= j[None, None, :])
    return mask


def evaluate(program: Program, ids: Any, lengths: Any) -> dict[str, Any]:
    """All variables of ``program`` on a batch: ``{name: (B, N) array}`` (array reference: each
    module's ``evaluate``)."""
    xp = xp_of(ids)
    bsz, n = ids.shape
    env: dict[str, Any] = {
        "tokens": ids,
        "positions": xp.broadcast_to(xp.arange(n), (bsz, n)),
        "ones": xp.ones((bsz, n), dtype=np.float64),
    }
    batch = Batch(lengths, key_mask(lengths, n, program.causal), program.variables)
    for m in program.modules:
        env[m.output] = m.evaluate(env, batch)
    return env


def feature_logits(program: Program, env: dict[str, Any]) -> Any:
    """Classifier logits ``(B, N, C)`` in float64, summed in ``features`` order; masked classes
    get ``-inf`` (the classifier's ``evaluate``)."""
    return program.classifier.evaluate(env, program.variables)


def passthrough(program: Program, ids: Any, lengths: Any, pred: Any) -> Any:
    """Apply the BOS/EOS pass-through and mark positions past each length with ``-1``."""
    xp = xp_of(ids)
    bsz, n = ids.shape
    labels = program.output_labels()
    tok = program.tokens.values
    rows = xp.arange(bsz)
    if program.passthrough and program.bos is not None:
        pred[:, 0] = xp.where(ids[:, 0] == tok.index(program.bos), labels.index(program.bos),
                              pred[:, 0])
    if program.passthrough and program.eos is not None:
        last = lengths - 1
        is_eos = ids[rows, last] == tok.index(program.eos)
        pred[rows, last] = xp.where(is_eos, labels.index(program.eos), pred[rows, last])
    pred[xp.arange(n)[None, :] >= lengths[:, None]] = -1
    return pred


def run_reference(program: Program, ids: Any, lengths: Any,
                  env: dict[str, Any] | None = None) -> Any:
    """Predictions ``(B, N)`` with the array reference; ``env``: the batch's variables, where
    :func:`evaluate` has already given them."""
    env = evaluate(program, ids, lengths) if env is None else env
    pred = feature_logits(program, env).argmax(axis=-1)
    return passthrough(program, ids, lengths, pred)


def check_work(program: Program, batch: int, n: int) -> None:
    """Refuse a run whose work (``LIMITS.work``: ``N^2`` entries per head and ``N`` per other
    module and the classifier, for each of ``batch`` sequences of length ``n``) is over the
    limit, naming both, before anything is computed."""
    heads = sum(isinstance(m, Head) for m in program.modules)
    work = batch * (heads * n * n + (len(program.modules) - heads + 1) * n)
    if work > LIMITS.work:
        raise TpcoreError(f"running program {program.name!r} ({heads} heads, "
                          f"{len(program.modules) - heads} other modules) on {batch} sequences "
                          f"of length {n} computes about {work:.3g} entries; the limit is "
                          f"{LIMITS.work:.3g}")


def run_ids(program: Program, ids: Any, lengths: Any, engine: str = "numba") -> Any:
    """Predictions ``(B, N)`` (indices into ``output_labels()``) with the chosen engine, within
    the work limit (:func:`check_work`)."""
    check_work(program, *ids.shape)
    if engine == "numpy":
        return run_reference(program, ids, lengths)
    if engine == "numba":
        from tpcore.kernels.programs import run_compiled

        return run_compiled(compile_program(program), to_host(ids), to_host(lengths))
    raise TpcoreError(f"unknown engine {engine!r}; expected one of {ENGINES}")


def predict(program: Program, sequences: Sequence[Sequence[str]],
            engine: str = "numba") -> list[list[str]]:
    """Predicted labels for each sequence (token strings in, label strings out)."""
    ids, lengths = encode(program, sequences)
    pred = to_host(run_ids(program, ids, lengths, engine))
    labels = program.output_labels()
    return [[labels[int(x)] for x in pred[b, : lengths[b]]] for b in range(len(sequences))]


def check_tokens(program: Program, tokens: Sequence[str]) -> list[str]:
    """``tokens`` (one input's content tokens) framed with the program's ``bos``/``eos`` where
    missing (:meth:`Program.frame`); a token outside the vocabulary, or the padding token, raises
    naming it and its position."""
    framing = {program.bos, program.eos} - {None}
    content = [t for t in program.tokens.values if t not in framing and t != program.pad]
    for i, tok in enumerate(tokens):
        if tok not in program.tokens.lookup or tok == program.pad:
            raise TpcoreError(f"token {tok!r} (position {i}) is not in the vocabulary of "
                              f"program {program.name!r}: {content}")
    return program.frame(tokens)


def run_tokens(program: Program, tokens: Sequence[str], engine: str = "numpy") -> list[str]:
    """The program's output for one input given as its content tokens (:func:`check_tokens`),
    returned for the positions that hold content tokens (the framing tokens carry no target)."""
    framing = {program.bos, program.eos} - {None}
    framed = check_tokens(program, tokens)
    pred = predict(program, [framed], engine)[0]
    return [y for t, y in zip(framed, pred) if t not in framing]


def compile_program(program: Program) -> dict[str, np.ndarray]:
    """Flatten ``program`` into the arrays the numba kernel reads (host, NumPy).

    Variables get slots in two stores (categorical, numerical) in definition order. ``ops`` rows:
    ``(opcode, a, b, c, out, param_offset, stride, flag)``: the module's opcode
    (:mod:`tpcore.kernels.program_opcodes`), the operands ``a, b, c``, its output slot, the
    offset of its integer parameters in ``params``, then ``stride`` and ``flag``; its kind's
    ``kernel_op`` gives the operands, ``stride``, ``flag`` and parameters
    (:class:`~tpcore.programs.modules.base.KernelOp`, and each kind's ``kernel_op`` for what
    they hold: a head's query, key and value slots and predicate, an MLP's input slots and
    table, a prefix count's token, an expert gate's weights in ``fparams``). ``num_vals`` holds
    the numerical variables' sorted values one after the other (slot ``s`` at ``num_off[s]``,
    ``num_size[s]`` of them; ``num_lo`` the first one when they are consecutive integers, else
    NaN); ``cat_off[s]`` is where categorical slot ``s``'s values start in one row of per-value
    position masks (``cat_off[n_cat]`` in all); ``fparams`` the expert gates' float64
    parameters; ``inputs`` the slots of ``tokens``, ``positions`` and ``ones``; ``allowed`` the
    classes that can be predicted; ``n_tokens`` the vocabulary size. Every array grows with the
    program's values, not with the number of variables times the largest value set.
    """
    v = program.variables
    cat = {n: i for i, n in enumerate(x for x in v if v[x].kind == "categorical")}
    num = {n: i for i, n in enumerate(x for x in v if v[x].kind == "numerical")}
    slot = {**cat, **num}
    params: list[np.ndarray] = []
    fparams: list[np.ndarray] = []
    ops = []
    offset = 0
    for m in program.modules:
        k = m.kernel_op(slot, v, sum(f.size for f in fparams))
        ops.append([m.opcode, k.a, k.b, k.c, slot[m.output], offset, k.stride, k.flag])
        params.append(k.params.astype(np.int64))
        fparams.append(k.fparams)
        offset += k.params.size
    num_names = list(num)
    num_vals = np.concatenate([np.asarray(v[n].values, dtype=np.float64) for n in num_names])
    num_size = np.asarray([v[n].size for n in num_names], dtype=np.int64)
    num_off = np.concatenate([[0], np.cumsum(num_size)[:-1]]).astype(np.int64)
    num_lo = np.full(len(num_names), np.nan)
    for i, n in enumerate(num_names):
        if list(v[n].values) == list(range(int(v[n].values[0]), int(v[n].values[0]) + v[n].size)):
            num_lo[i] = v[n].values[0]
    cat_off = np.cumsum([0] + [v[x].size for x in cat]).astype(np.int64)
    c = program.classifier
    feat_ops = np.asarray([[int(v[f].kind == "numerical"), slot[f]] for f in c.features],
                          dtype=np.int64).reshape(-1, 2)
    w_off = np.cumsum([0] + [c.weights[f].shape[0] for f in c.features]).astype(np.int64)
    weights = (np.concatenate([c.weights[f] for f in c.features], axis=0) if c.features
               else np.zeros((0, len(c.classes))))
    labels = program.output_labels()
    tok = program.tokens.values

    def framing(t: str | None) -> list[int]:
        use = program.passthrough and t is not None
        return [tok.index(t), labels.index(t)] if use else [-1, -1]

    return {
        "ops": np.asarray(ops, dtype=np.int64).reshape(-1, 8),
        "params": np.concatenate(params) if params else np.zeros(0, dtype=np.int64),
        "fparams": np.concatenate(fparams) if fparams else np.zeros(0),
        "n_cat": np.int64(len(cat)), "n_num": np.int64(len(num)),
        "n_tokens": np.int64(program.tokens.size), "cat_off": cat_off,
        "num_vals": num_vals, "num_off": num_off, "num_size": num_size, "num_lo": num_lo,
        "feat_ops": feat_ops, "w_off": w_off, "weights": np.ascontiguousarray(weights),
        "bias": c.bias.astype(np.float64),
        "allowed": np.asarray([i not in c.masked for i in range(len(c.classes))]),
        "framing": np.asarray(framing(program.bos) + framing(program.eos), dtype=np.int64),
        "causal": np.int64(program.causal),
        "inputs": np.asarray([cat["tokens"], cat["positions"], num["ones"]], dtype=np.int64),
    }

"""The round trip of a written program: write, compile, fine-tune, decompile, compare.

:func:`round_trip` compiles a task's written program (:mod:`tpcore.rasp.library`), checks the
compiled model on the task's own targets, fine-tunes it from the compiled weights on the task's
training split (the relaxed model, Gumbel noise and all, as ``tpcore learn`` trains; no model
selection, so what is measured is where training ends), checks it again, decompiles it
(:func:`tpcore.models.extract.extract`) and compares the decompiled program with the written one
module by module at the entries the written program uses on the checked inputs
(:func:`compare`, :func:`occurring`) and by running both on every input of the domain (or a stated
sample) with every engine (:func:`tpcore.rasp.verify`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpcore.backend import to_host
from tpcore.errors import TpcoreError
from tpcore.models.extract import extract
from tpcore.pipelines.learn import fit_run, make_data, task_config
from tpcore.programs.interpret import encode
from tpcore.programs.ir import Head, Mlp, Program
from tpcore.rasp import Compiled, compile, lang, verify
from tpcore.rasp.compiler import domain
from tpcore.rasp.evaluate import evaluate
from tpcore.rasp.library import task, task_check
from tpcore.rasp.weights import MARGIN


def _table(m: Mlp, written: Mlp, variables: dict[str, Any], decompiled: Program) -> np.ndarray:
    """``m``'s table (decompiled, reading each input twice when ``written`` reads it once) at the
    written inputs' values: categorical by index, numerical by value."""
    axes = []
    for name in m.inputs:
        mine, theirs = variables[name], decompiled.variables[name]
        axes.append(np.arange(mine.size) if mine.kind == "categorical"
                    else np.asarray([theirs.index(v) for v in mine.values]))
    if len(written.inputs) == 1 and len(m.inputs) == 2:
        return m.table[axes[0], axes[0]]
    return m.table[np.ix_(*axes)] if len(axes) == 2 else m.table[axes[0]]


def occurring(compiled: Compiled, ids: np.ndarray, lengths: np.ndarray
              ) -> dict[str, np.ndarray]:
    """For each module of ``compiled``, the entries it is used at on the inputs ``ids``,
    ``lengths`` (at their positions before each length), by the written program's interpreter:
    a head's query value indices, an MLP's flat table indices."""
    env = evaluate(compiled.program, ids, lengths)
    valid = np.arange(ids.shape[1])[None, :] < lengths[:, None]
    out = {}
    for node, module in compiled.placed_nodes().items():
        reads = [node.parents[1]] if isinstance(node, lang.Aggregate) else list(node.parents)
        flat = np.zeros(valid.sum(), dtype=np.int64)
        for p in reads:
            values = compiled.program.nodes[p].values
            x = env[p][valid]
            if p.kind == lang.NUMERICAL:
                x = np.searchsorted(np.asarray(values, dtype=np.float64), x)
            flat = flat * len(values) + x
        out[module] = np.unique(flat)
    return out


def compare(written: Program, decompiled: Program,
            used: dict[str, np.ndarray] | None = None) -> list[str]:
    """Where ``decompiled`` (a compiled model's program after :func:`extract`) differs from
    ``written`` (:attr:`tpcore.rasp.Compiled.ir`), one line each; empty when every written
    module is there with the same reads, the same predicate (a query matching nothing may match
    a key index the written key never takes) and the same table, at every entry ``used`` names
    for it (:func:`occurring`; None: every written value). Value ``i`` of a written variable is
    value index ``i`` of the decompiled one (the compiled model's one-hot index); the
    classifier is compared by running both programs (:func:`tpcore.rasp.verify`)."""
    out = []
    for m in written.modules:
        try:
            d = decompiled.module(m.name)
        except TpcoreError:
            out.append(f"{m.name}: missing")
            continue
        if isinstance(m, Head):
            if not isinstance(d, Head) or (m.kind, m.query, m.key, m.value) != (
                    d.kind, d.query, d.key, d.value):
                out.append(f"{m.name}: reads or kind differ")
                continue
            keys = written.variables[m.key].size
            queries = range(m.predicate.size) if used is None else used[m.name].tolist()
            for q in queries:
                a, b = int(m.predicate[q]), int(d.predicate[q])
                if a != b and not (a < 0 and (b < 0 or b >= keys)):
                    out.append(f"{m.name}: query value {q} matches key value {b}, not {a}")
                    break
        elif isinstance(m, Mlp):
            if not isinstance(d, Mlp) or set(d.inputs) != set(m.inputs) or d.kind != m.kind:
                out.append(f"{m.name}: reads or kind differ")
                continue
            table = _table(d, m, written.variables, decompiled).ravel()
            entries = slice(None) if used is None else used[m.name]
            wrong = table[entries] != m.table.ravel()[entries]
            if table.size != m.table.size or wrong.any():
                out.append(f"{m.name}: its table differs at {int(wrong.sum())} entries")
    return out


def round_trip(name: str, margin: float = MARGIN, epochs: int = 2, lr: float = 0.01,
               tau: tuple[float, float] = (1.0, 0.01), seed: int = 0,
               exhaustive: int = 400_000, sample: int = 20_000, quiet: bool = True
               ) -> dict[str, Any]:
    """The round trip of task ``name``'s written program (module docstring), compiled with
    logit ``margin``, fine-tuned ``epochs`` epochs at learning rate ``lr`` with the
    temperature falling from ``tau[0]`` to ``tau[1]``; checks on every input up to
    ``exhaustive`` of them, else ``sample`` random ones. Returns what each step measured,
    with how far training moved the weights (``moved``: the largest change of a parameter,
    ``mean_moved``: the mean absolute change)."""
    t = task(name)
    compiled = compile(t.program(), seed=seed, margin=margin)
    start = {n: np.array(to_host(p.data)) for n, p in compiled.model.named_parameters()}
    cfg = task_config(name, vocab_size=t.vocab_size, max_len=t.max_len, epochs=epochs, lr=lr,
                      tau_start=tau[0], tau_end=tau[1], eval_every=0, seed=seed)
    data = make_data(cfg)
    if data.vocab != t.vocab() or data.classes != t.classes():
        raise TpcoreError(f"{name}: the task's vocabulary {data.vocab} and classes "
                          f"{data.classes} are not the written program's")
    before = task_check(compiled, t, exhaustive=exhaustive, sample=sample, seed=seed)
    trained = fit_run(cfg, data, compiled.model, quiet=quiet)
    change = np.concatenate([np.abs(np.asarray(to_host(p.data)) - start[n]).ravel()
                             for n, p in compiled.model.named_parameters()])
    after = task_check(compiled, t, exhaustive=exhaustive, sample=sample, seed=seed)
    program = extract(compiled.model, data, name=name)
    decompiled = Compiled(compiled.program, program, compiled.model, compiled.placed)
    check = verify(decompiled, exhaustive=exhaustive, sample=sample, seed=seed)
    sequences, _, _ = domain(compiled.ir, exhaustive, sample, seed)
    used = occurring(compiled, *encode(compiled.ir, sequences))
    return {
        "task": name, "layers": compiled.model.config.n_layers,
        "compile_seconds": compiled.seconds, "epochs": epochs, "steps": trained.steps,
        "margin": margin, "lr": lr, "tau": list(tau), "seed": seed,
        "final_loss": trained.last_loss, "moved": float(change.max()),
        "mean_moved": float(change.mean()),
        "compiled": before, "fine_tuned": after, "differences": compare(compiled.ir, program, used),
        "decompiled_check": {"summary": check.summary(), "ok": check.ok,
                             "first": check.first}}

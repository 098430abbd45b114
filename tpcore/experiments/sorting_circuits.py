"""The post's circuit analysis of a trained sorting model (:func:`circuit_report`): QK and OV
tables, attention on BOS, attention patterns, and the logits against ``f_k`` of the
concave-argmax algorithm; :func:`analyse` writes the reports of ``tpcore reproduce sorting``'s
models.

Host-side bookkeeping (NumPy on host copies).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.analysis import circuits as C
from tpcore.analysis.plots import sorting_figures
from tpcore.analysis.sorting_rules import concave_scores
from tpcore.backend import asarray, to_host
from tpcore.experiments.sorting_evidence import draw_qk_training
from tpcore.io import write_json, write_text
from tpcore.models import load
from tpcore.tasks.sorting import SortingTask, encode, generate, one_list, task_of


def logit_concave_correlation(model: Any, task: SortingTask, lists: np.ndarray,
                              lengths: np.ndarray) -> float:
    """Mean Pearson correlation, over the items of ``lists``, between the model's logits for item
    ``k`` and ``f_k(0..V-1)`` of the concave-argmax algorithm (1 when the logits are ``f_k`` up
    to scale and shift)."""
    part = encode(task, lists, lengths)
    logits = model.forward(asarray(part["tokens"]),
                           pad=None if "pad" not in part else asarray(part["pad"]))
    first = task.first_target
    z = to_host(logits[:, first : first + task.length]).astype(np.float64)
    f = concave_scores(lists, lengths, task.n_values)
    z = z - z.mean(axis=2, keepdims=True)
    f = f - f.mean(axis=2, keepdims=True)
    corr = (z * f).sum(axis=2) / np.sqrt((z * z).sum(axis=2) * (f * f).sum(axis=2))
    return float(corr[np.arange(task.length)[None, :] < lengths[:, None]].mean())


def circuit_report(model: Any, seed: int = 0, plots: str | Path | None = None,
                   given: list[int] | None = None, name: str | None = None) -> tuple[str, dict]:
    """The post's circuit analysis of a trained sorting model as Markdown text and numbers: QK
    tables (standardised rows) at three output positions, their upper-triangularity, the OV
    table, attention on BOS relative to values per position, the attention pattern on
    ``0 1 .. 9``, on a shuffled list and on the ``given`` list, and the correlation of the logits
    with ``f_k``. ``plots``: also write PNG figures there (needs matplotlib), named and titled
    by ``name`` (default: the task's)."""
    task = task_of(model)
    name = name or task.name
    v, names = task.n_values, task.token_names()
    values = list(range(v))
    keys = values + [task.bos]
    key_names = [names[k] for k in keys]
    items = list(range(task.length))
    positions = [task.first_target + k for k in items]
    qk = {k: C.qk_matrix(model, task.first_target + k, 1, task.bos) for k in items}
    ov = C.ov_circuit(model, task.bos)[keys]
    bos = C.bos_attention(model, positions, values[:-1], task.bos, values)
    rng = np.random.default_rng(seed)
    shown = list(range(task.length))
    patterns = {}
    for label, lst in (("sorted", shown), ("shuffled", rng.permutation(shown).tolist()),
                       ("given", given)):
        if lst is None:
            continue
        lists, lengths = one_list(task, lst)   # a short list filled for a causal model
        enc = encode(task, lists, lengths)
        patterns[label] = (lists[0, : lengths[0]], enc["tokens"][0],
                           to_host(C.attention_pattern(model, enc["tokens"][0],
                                                       enc["pad"][0] if "pad" in enc else None)))
    hard = generate(task, "random" if task.distinct else "hard", 2000, rng)
    ov_host = to_host(ov)
    numbers = dict(
        task=task.name,
        upper_triangularity={k: C.upper_triangularity(qk[k][:v, :v]) for k in items},
        ov_self_argmax=float(np.mean(ov_host[:v].argmax(axis=1) == np.arange(v))),
        bos_ratio=to_host(bos["ratio"]).tolist(),
        logit_fk_correlation=logit_concave_correlation(model, task, *hard),
    )
    parts = [f"# Circuits of the {name} sorting model (d_model {model.config.d_model})", ""]
    for k in (0, task.length // 2, task.length - 1):
        parts += [f"## QK, output item {k} (query position {task.first_target + k}), rows "
                  "standardised (max 0, clipped at -99)", "",
                  C.format_table(C.standardise_rows(qk[k][:v][:, keys]), names[:v], key_names,
                                 corner="query \\ key"),
                  "", f"upper-triangularity {numbers['upper_triangularity'][k]:.2f}", ""]
    parts += ["## OV circuit: logits written by each source token", "",
              C.format_table(ov, key_names, names[:v], corner="source \\ logit"), "",
              f"source token is its own largest logit for {100 * numbers['ov_self_argmax']:.0f} "
              "% of values", "",
              "## Attention on BOS relative to an average value token (keys 0..V-2)", "",
              C.format_table(np.array([numbers["bos_ratio"]]), ["BOS / value"],
                             [str(k) for k in items], prec=3, corner="item"), ""]
    for lst, tokens, pat in patterns.values():
        labels = [names[t] for t in tokens]
        parts += [f"## Attention pattern on {lst.tolist()} (rows: queries)", "",
                  C.format_table(pat, labels, labels, prec=2), ""]
    parts += [f"Mean correlation of the logits with f_k over 2000 lists: "
              f"{numbers['logit_fk_correlation']:.3f}", ""]
    if plots is not None:
        sorting_figures(Path(plots), name, {k: to_host(C.standardise_rows(
            qk[k][:v][:, keys])) for k in (0, task.length // 2, task.length - 1)},
            names[:v], key_names, ov_host, numbers["bos_ratio"],
            {label: (pat, [names[t] for t in tokens])
             for label, (_, tokens, pat) in patterns.items()})
    return "\n".join(parts), numbers


def analyse(out_dir: str | Path, names: Sequence[str], plots: bool = False) -> dict:
    """Circuit reports of the checkpoints ``<name>.npz`` in ``out_dir`` of the parts ``names``:
    ``<name>_circuits.md`` and ``circuits.json`` (PNG figures in ``out_dir/plots`` with
    ``plots``, with the QK tables over training where ``out_dir`` holds them)."""
    out_dir = Path(out_dir)
    numbers = {}
    for name in names:
        path = out_dir / f"{name}.npz"
        if not path.is_file():
            continue
        text, numbers[name] = circuit_report(load(path), plots=out_dir / "plots" if plots
                                             else None, name=name)
        write_text(out_dir / f"{name}_circuits.md", text)
    write_json(out_dir / "circuits.json", numbers)
    if plots:
        draw_qk_training(out_dir)
    return numbers

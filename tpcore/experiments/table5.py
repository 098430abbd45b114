"""``tpcore reproduce table5``: Table 5 of "Learning Transformer Programs", the optimisation case
study. A two-layer model (one categorical head and one categorical MLP per layer) learns
``reverse`` at ``|V| = N = 16`` with some of its components initialised to the generalising
solution and the rest random:

```
length  = aggregate(select(tokens, tokens, k == "</s>"), positions)      # attn_0_0
targets = one_hot(length - positions)                                     # mlp_0_0
output  = aggregate(select(targets, positions, ==), tokens)              # attn_1_0
```

:func:`solution` writes that program as IR (the MLP's table is the difference, clipped to the
positions); each row of :data:`ROWS` names the components set from it by
:func:`tpcore.models.init_from.init_from_program` (read gates ``read``, predicates
``predicate``; the MLPs' weights and the classifier always start random). Every row trains at
each seed through :func:`tpcore.pipelines.learn.learn` (finished runs are reused, so a rerun
resumes) and reports the test token accuracy of the decompiled program, beside the paper's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.experiments.budget import Budget, preset
from tpcore.experiments.options import OVERWRITE, Reproduction
from tpcore.io import write_json, write_text
from tpcore.pipelines.learn import LearnConfig, learn, make_data
from tpcore.programs import ir
from tpcore.programs.ir import Classifier, Head, Mlp, Program, Variable
from tpcore.rundir import check_out_dir

SIZE = 16
"""``|V| = N``: token ids (``<pad>``, ``<s>``, ``</s>`` included) and positions."""
PARTS = {"attn 1 read": "attn_0_0.read", "attn 1 predicate": "attn_0_0.predicate",
         "MLP 1 read": "mlp_0_0.read", "attn 2 read": "attn_1_0.read",
         "attn 2 predicate": "attn_1_0.predicate"}
"""The paper's columns and the init part each stands for."""
ROWS: tuple[tuple[str, ...], ...] = (
    (),
    tuple(PARTS),
    ("attn 1 read", "attn 1 predicate", "MLP 1 read", "attn 2 read"),
    ("attn 1 read", "attn 1 predicate", "MLP 1 read", "attn 2 predicate"),
    ("attn 1 read", "attn 1 predicate", "attn 2 read", "attn 2 predicate"),
    ("attn 1 read", "MLP 1 read", "attn 2 read", "attn 2 predicate"),
    ("attn 1 predicate", "MLP 1 read", "attn 2 read", "attn 2 predicate"),
)
"""The paper's rows: the columns initialised from the solution."""
PAPER = ((23.2, 23.6, 24.1), (99.9, 99.9, 80.8), (37.9, 40.3, 18.5), (17.1, 13.7, 20.2),
         (95.1, 94.1, 95.3), (99.1, 83.9, 78.2), (35.5, 44.1, 41.8))
"""The paper's per-seed test accuracies of each row."""
BUDGETS = {
    "smoke": Budget("smoke", dict(epochs=2, n_samples=400, seeds=1)),
    "paper": Budget("paper", dict(epochs=100, n_samples=20000, seeds=3)),
}


def budget(name: str) -> Budget:
    """``smoke`` (a pipeline check) or ``paper`` (100 epochs, 20,000 inputs, 3 seeds)."""
    return preset(name, BUDGETS)


def solution(vocab: tuple[str, ...], classes: tuple[str, ...], max_len: int) -> Program:
    """The generalising reverse program as IR, named as the model names its modules."""
    pos = tuple(range(max_len))
    length = np.full(len(vocab), vocab.index("</s>"), dtype=np.int64)
    e, i = np.meshgrid(pos, pos, indexing="ij")
    targets = np.where((e - i >= 0) & (e - i < max_len), e - i, 0)
    weights = np.zeros((len(vocab), len(classes)))
    for c, label in enumerate(classes):
        weights[vocab.index(label), c] = 1.0
    variables = {
        "tokens": Variable("tokens", "categorical", vocab),
        "positions": Variable("positions", "categorical", pos),
        "ones": Variable("ones", "numerical", (1,)),
        "attn_0_0_outputs": Variable("attn_0_0_outputs", "categorical", pos),
        "mlp_0_0_outputs": Variable("mlp_0_0_outputs", "categorical", pos),
        "attn_1_0_outputs": Variable("attn_1_0_outputs", "categorical", vocab),
    }
    modules = [
        Head("attn_0_0", "categorical", "tokens", "tokens", "positions", "attn_0_0_outputs",
             length),
        Mlp("mlp_0_0", "categorical", ("attn_0_0_outputs", "positions"), "mlp_0_0_outputs",
            targets.astype(np.int64), 0),
        Head("attn_1_0", "categorical", "mlp_0_0_outputs", "positions", "tokens",
             "attn_1_0_outputs", np.arange(max_len, dtype=np.int64)),
    ]
    clf = Classifier(classes, ("attn_1_0_outputs",), {"attn_1_0_outputs": weights},
                     np.zeros(len(classes)))
    return Program("reverse_solution", variables, modules, clf, bos="<s>", eos="</s>",
                   pad="<pad>")


def config(b: Budget, parts: tuple[str, ...], seed: int, program: Path) -> LearnConfig:
    """The run of one row at one seed."""
    init = dict(init_from=str(program), init_parts=",".join(PARTS[p] for p in parts)) \
        if parts else {}
    return LearnConfig(task="reverse", n_layers=2, n_cat_heads=1, n_num_heads=0, n_cat_mlps=1,
                       n_num_mlps=0, epochs=b["epochs"], vocab_size=SIZE, max_len=SIZE,
                       n_samples=b["n_samples"], seed=seed, **init)


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: the initialised columns, tpcore's accuracies per seed and the paper's."""
    head = " | ".join(PARTS)
    lines = [f"| {head} | tpcore test token acc (seeds) | paper |",
             "|" + "---|" * (len(PARTS) + 2)]
    for r in rows:
        marks = " | ".join("set" if p in r["parts"] else "-" for p in PARTS)
        ours = " / ".join(f"{a:.1f}" for a in r["acc"])
        paper = " / ".join(f"{a:.1f}" for a in r["paper"])
        lines.append(f"| {marks} | {ours} | {paper} |")
    return "\n".join(lines)


CLI = Reproduction(
    "Transformer Programs paper, Table 5 (reverse learned from partly initialised solutions)",
    "results/table5", "paper", "smoke: pipeline check; paper: 100 epochs, 3 seeds from --seed",
    (OVERWRITE,))
"""``tpcore reproduce table5``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int, overwrite: bool = False) -> dict[str, Any]:
    """Train every row of :data:`ROWS` at seeds ``seed .. seed + budget["seeds"] - 1`` into
    ``out/runs/row{r}-s{seed}`` and write ``out/table5.json`` and ``out/table5.md``."""
    out = check_out_dir(out)
    task = make_data(config(budget, (), seed, out))
    program = out / "reverse_solution.json"
    ir.save(solution(task.vocab, task.classes, task.max_len), program)
    rows, start = [], time.perf_counter()
    for r, parts in enumerate(ROWS):
        accs = []
        for s in range(seed, seed + budget["seeds"]):
            metrics = learn(config(budget, parts, s, program), out / "runs" / f"row{r}-s{s}",
                            overwrite=overwrite)
            accs.append(100 * metrics["test"]["acc"])
        rows.append({"parts": list(parts), "acc": accs, "paper": list(PAPER[r])})
        result = {"budget": budget.name, "seeds": list(range(seed, seed + budget["seeds"])),
                  "command": f"tpcore reproduce table5 --budget {budget.name}"
                             + (f" --seed {seed}" if seed else ""),
                  "rows": rows, "seconds": time.perf_counter() - start}
        write_json(out / "table5.json", result)
        write_text(out / "table5.md", table(rows) + "\n")
    return json.loads((out / "table5.json").read_text())


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce table5`` prints: the table."""
    return table(result["rows"])

"""Tiny sorting transformers ("How tiny transformers sort"): the committed one-layer,
attention-only models sort lists, fail on a few, and show their circuits. Runs in seconds;
``tpcore reproduce sorting`` trains the models (about 20 minutes).
"""

# %% Load a trained model and sort lists of any length up to 10
from pathlib import Path

import tpcore
from tpcore.experiments.sorting import search_failures
from tpcore.experiments.sorting_circuits import circuit_report

RESULTS = Path(__file__).resolve().parents[1] / "results"   # this repository's results
model = tpcore.load(RESULTS / "sorting" / "causal.npz")      # a tpcore Transformer
print(model.config)
assert tpcore.sort_list(model, [3, 1, 2]) == [1, 2, 3]
print(tpcore.sort_list(model, [9, 0, 9, 9, 9, 9, 9, 9, 9, 9]))

# %% Search generated hard lists for failures (the table counts 269 in 10^6 with seed 3000)
found = search_failures(model, 2000, seed=3000)
print(f"{found['n_failures']} of {found['n']} hard lists sorted wrongly")
for failure in found["failures"][:3]:
    print(failure["input"], "->", failure["output"])

# %% Circuits: QK and OV tables, attention on BOS, attention patterns (Markdown text)
text, numbers = circuit_report(model, given=[5, 5, 1])
print(text[:1500])
print("upper-triangularity of the QK table per output item:",
      {k: round(v, 2) for k, v in numbers["upper_triangularity"].items()})

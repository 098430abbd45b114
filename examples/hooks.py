"""Inside the models: caches of named activations, head ablation and activation patching
(:mod:`tpcore.models.hooks`), on the committed sort program model and the tiny sorting
transformer. Runs in a few seconds; ``# %%`` marks the cells.
"""

# %% A trained Transformer Program model and two inputs, as token ids
from pathlib import Path

import numpy as np

import tpcore
from tpcore.backend import to_host
from tpcore.models.hooks import ablate_head, patch_head
from tpcore.tasks.sorting import encode, one_list, task_of

RESULTS = Path(__file__).resolve().parents[1] / "results"   # this repository's results
run = tpcore.load(RESULTS / "learn_sort")
model = run.model
clean, corrupted = run.encode("d a c b"), run.encode("d a c e")   # (1, 6): <s> .. </s>
print(run.decode(model.forward(clean)), run.decode(model.forward(corrupted)))

# %% Every activation by its program name: variables as they enter the stream, head patterns
logits, cache = model.run_with_cache(clean)
print(cache.names()[:6])
print(np.round(to_host(cache["attn_2_0.pattern"][0]), 2))   # (query, key): i reads one key

# %% Ablate each head: which ones does the answer depend on?
for head in run.program.heads:
    out = run.decode(ablate_head(model, clean, head))
    if out != ["a", "b", "c", "d"]:
        print(f"without {head}: {out}")

# %% Patch a head: the corrupted run with one head's output taken from the clean run
patched = run.decode(patch_head(model, clean, corrupted, "num_attn_0_3"))
print(patched)                   # ['a', 'c', 'c', 'e']: the count it carries moved the output
assert patched != run.decode(model.forward(corrupted))

# %% The same vocabulary for the standard transformer (TransformerLens' hook names)
sorter = tpcore.load(RESULTS / "sorting" / "causal.npz")
task = task_of(sorter)
tokens = encode(task, *one_list(task, [3, 1, 2]))["tokens"]
logits, cache = sorter.run_with_cache(tokens)
print(sorter.hook_names()[:6])
pattern = to_host(cache["pattern", 0][0, 0])          # (query, key) of head 0, layer 0
print(np.round(pattern[task.first_target : task.first_target + 3, :4], 2))
print(tpcore.sort_list(sorter, [3, 1, 2]))

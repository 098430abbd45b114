"""TransformerLens on tpcore models: the tiny sorting transformer as a TransformerLens model
(its cache, a head's OV circuit as a ``FactoredMatrix``, a patching hook), and a model built in
TransformerLens read back into tpcore. Needs the ``lens`` extra: ``pip install 'tpcore[lens]'``
(torch and transformer-lens); runs in a few seconds.
"""

# %% The committed causal sorting model, and the same model as a TransformerLens bridge
from pathlib import Path

import numpy as np
import torch
from transformer_lens.model_bridge.sources.native import boot

import tpcore
from tpcore.backend import to_host
from tpcore.tasks.sorting import encode, task_of

RESULTS = Path(__file__).resolve().parents[1] / "results"   # this repository's results
model = tpcore.load(RESULTS / "sorting" / "causal.npz")
bridge = tpcore.to_lens(model)                    # a transformer_lens TransformerBridge
task = task_of(model)
lists = np.random.default_rng(0).integers(0, task.n_values, (8, task.length))
tokens = encode(task, lists)["tokens"]            # (8, 12): the list, a separator, the answer

# %% The same logits and the same activations, by the same names
logits, cache = model.run_with_cache(tokens)
with torch.no_grad():
    lens_logits, lens_cache = bridge.run_with_cache(torch.from_numpy(tokens))
gap = np.abs(lens_logits.numpy() - to_host(logits)).max() / np.abs(to_host(logits)).max()
print(f"logits agree to {gap:.1e} of their largest value")
assert gap < 1e-5
pattern = lens_cache["blocks.0.attn.hook_pattern"].numpy()
assert np.allclose(pattern, to_host(cache["blocks.0.attn.hook_pattern"]), atol=1e-5)

# %% TransformerLens's tools on it: the head's OV circuit as a FactoredMatrix, and a hook
ov = bridge.OV[0, 0]                              # (d_model, d_model) = W_V W_O, rank <= d_head
print("OV circuit:", tuple(ov.shape), "top singular values", ov.S[:4].detach().numpy().round(1))
zero_head = [("blocks.0.attn.hook_z", lambda z, hook: z * 0)]
with torch.no_grad():
    ablated = bridge.run_with_hooks(torch.from_numpy(tokens), fwd_hooks=zero_head)
print("share of predictions unchanged with the head zeroed:",
      float((ablated.argmax(-1) == lens_logits.argmax(-1)).float().mean()))

# %% The other way: a model built in TransformerLens, read into a tpcore Transformer
native = boot({"d_model": 32, "n_layers": 2, "n_heads": 4, "d_head": 8, "d_mlp": 64,
               "n_ctx": 10, "d_vocab": 12, "act_fn": "gelu_new", "normalization_type": "LN",
               "attention_dir": "causal", "seed": 0})
mine = tpcore.from_lens(native)
ids = np.random.default_rng(1).integers(0, 12, (4, 10))
with torch.no_grad():
    theirs = native(torch.from_numpy(ids)).numpy()
print(mine.config)
assert np.allclose(to_host(mine(ids)), theirs, atol=1e-5)

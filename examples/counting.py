"""Modular counting ("Modular Counts, Smarter Programs"): train a Transformer Program with
PrefixSumCounts and read the counts in its program; then the committed double-hist model of the
README's table. Runs in seconds (the training budget is tiny).
"""

# %% Train with the counting modules: counting="prefix", "experts" or "both"
from pathlib import Path

import tpcore

run = tpcore.learn("hist", "runs/hist-prefix", counting="prefix", layers=1, epochs=2,
                   n_samples=500)
print(run)
print("\n".join(run.program.graph().splitlines()[:4]))   # prefix_count_i: count of token i

# %% The README's target cell: double hist at |V| = N = 16, PrefixSumCounts, seed 0
RESULTS = Path(__file__).resolve().parents[1] / "results"   # this repository's results
model_file = RESULTS / "counting_arch" / "runs" / "double_hist-bigvocab-prefix-s0-model.npz"
prog = tpcore.TransformerProgram.read(model_file)            # extracted from the saved model
print(prog)
print(prog.run("a b c c"))          # per token: how many tokens share its count
score = prog.evaluate("double_hist")
print(f"test token accuracy {100 * score['token_accuracy']:.2f} % "
      f"({100 * score['sequence_accuracy']:.2f} % of sequences)")
assert f"{100 * score['token_accuracy']:.2f}" == "90.60"     # README's table

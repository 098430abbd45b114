"""Hierarchical filtering: the paper's tree grammar, k-filtered sequences and exact belief
propagation, one call each. Runs in under a second.
"""

# %% The paper's grammar (q = 4 symbols, sigma = 1) and sequences filtered at level k = 2
import numpy as np

import tpcore

grammar = tpcore.trees.grammar()
trees = tpcore.trees.sample(5, l=4, k=2, seed=0)
print(trees.root)
print(trees.leaves)                      # (5, 16): 2**4 leaves each

# %% Exact BP on one sequence with a masked leaf ('?'): root and leaf marginals
result = tpcore.trees.bp("0 3 ? 1 2 2 0 1 0 1 2 3 0 1 2 3", k=0)
print("log Z", round(result.log_z, 4))
print("root marginal", np.round(result.root, 4))
print("leaf 2 marginal", np.round(result.leaves[2], 4))

# %% BP_k' assuming other filtering levels: the root's posterior changes with k'
leaves = " ".join(map(str, trees.leaves[0]))
for k in range(5):
    print(k, np.round(tpcore.trees.bp(leaves, k=k).root, 3))

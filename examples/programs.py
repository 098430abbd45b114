"""Transformer Programs from Python: train one, read it, run it, export it.

Run it as a script (``python examples/programs.py``) or cell by cell (``# %%``) in an editor
that knows cells. The training budget below is tiny so that the example runs in seconds; the
real run is ``tpcore.learn("sort")`` (about 3 minutes), whose result is committed in
``results/learn_sort`` and read further down.
"""

# %% Train and decompile (a tiny budget: a few seconds)
from pathlib import Path

import tpcore

run = tpcore.learn("sort", "runs/sort-tiny", layers=1, epochs=2, n_samples=500)
print(run)                      # its settings and test token accuracy
prog = run.program              # the decompiled program: a TransformerProgram
print(prog)

# %% The full run: 3 layers, 250 epochs, 99.78 % test token accuracy
RESULTS = Path(__file__).resolve().parents[1] / "results"   # this repository's results
run = tpcore.load(RESULTS / "learn_sort")
prog = run.program
print(run)
assert prog.run("d a c b") == ["a", "b", "c", "d"]    # <s> and </s> are added and removed here
print(prog.run(["e", "a", "d", "a", "b"]))

# %% Read it: the source, the dependency graph, one head as a table
print(prog.source()[:1200])
print(prog.graph())
print(prog.head("attn_2_0"))     # x: the key each query selects
print(prog.heads[:8])

# %% Why did it predict that? The classifier's scores per feature at one position
for row in prog.explain("d a c b", 1)[:3]:
    print(row["feature"], row["value"], round(row["scores"]["a"], 3))

# %% Its accuracy on a generated test split (the run's own: the same figure as its model)
score = prog.evaluate("sort")
print(score)
assert abs(score["token_accuracy"] - run.accuracy("test")) < 1e-12

# %% Export the standalone program (standard library only) and run it
py, weights = prog.export("exported")
print(py, weights)              # python exported/sort.py d a c b  ->  a b c d
try:
    prog.run("d a x")
except tpcore.TpcoreError as error:
    print(error)                # token 'x' (position 2) is not in the vocabulary ...

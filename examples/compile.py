"""Write a program, compile it into exact transformer weights, verify it, look inside, fine-tune
it and decompile it back (:mod:`tpcore.rasp`). Runs in a few seconds; ``# %%`` marks the cells.
"""

# %% The in-context (induction) circuit, written in RASP's primitives
import numpy as np

from tpcore import rasp
from tpcore.backend import to_host
from tpcore.errors import TpcoreError
from tpcore.models.hooks import ablate_head
from tpcore.tasks.induction import LETTERS, NUMBERS, UNK

vocab = ("<pad>", "<s>", *LETTERS, *NUMBERS)
prev = rasp.aggregate(rasp.select(rasp.indices, rasp.indices, lambda k, q: k == q - 1),
                      rasp.tokens).named("prev")                 # the token one step back
follows = rasp.aggregate(rasp.select(prev, rasp.tokens, {x: x for x in LETTERS}),
                         rasp.tokens).named("follows")           # after the last same letter
answer = rasp.map(lambda t: t if t in NUMBERS else UNK, follows).named("answer")
program = rasp.Program(answer, vocab, max_len=10, bos="<s>", pad="<pad>", causal=True,
                       classes=(*NUMBERS, UNK), name="induction")

# %% Compile: layers by dependency depth, weights that compute it exactly, checked on the way
compiled = rasp.compile(program)
print(compiled.placed)           # {'prev': 'attn_0_0', 'follows': 'attn_1_0', 'answer': 'mlp_1_0'}
print(compiled.check.summary())
try:
    rasp.compile(program, layers=1)
except TpcoreError as err:
    print(err)                   # needs 2 layers: prev (layer 0) -> follows (layer 1)

# %% Verify five ways on 20,000 random inputs (every input when there are at most 400,000)
report = rasp.verify(compiled)
print(report.summary())
assert report.ok

# %% The compiled model is an ordinary model: hooks, caches, ablations
model = compiled.model
ids = np.array([[vocab.index(t) for t in "<s> a 1 b 2 a 3 b 0 a".split()]])


def labels(logits):
    return [program.classes[c] for c in to_host(logits.argmax(-1))[0]]


print(labels(model.forward(ids)))
ablated = ablate_head(model, ids, "attn_0_0")            # no previous-token head ...
print(labels(ablated))
assert labels(ablated) != labels(model.forward(ids))     # ... no induction

# %% Round trip: fine-tune from the compiled weights on the task, decompile, compare
from tpcore.pipelines.roundtrip import round_trip  # noqa: E402

trip = round_trip("induction", margin=10.0, epochs=1, lr=1e-3, exhaustive=0, sample=2000)
print(trip["fine_tuned"]["token_accuracy"], trip["differences"])
print(trip["decompiled_check"]["summary"])      # decompiled program and fine-tuned model
assert trip["fine_tuned"]["token_accuracy"] == 1.0 and trip["differences"] == []

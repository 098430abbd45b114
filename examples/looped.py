"""Looped transformers as computers: SUBLEQ programs compiled into the weights of a 5-layer
transformer, run by looping its forward pass, side by side with the interpreter. Seconds.
"""

# %% An example program on the exact (hardmax) machine
import tpcore

result = tpcore.subleq.run("multiply")      # 5 x 7 by repeated addition
print(result.steps, "instructions; agree after every one:", result.agree)
print(result.memory())                       # the named memory cells after EOF
assert result.memory()["p"] == 35

# %% Your own program, in the assembler (see docs/looped.md), on the softmax machine
source = tpcore.subleq.examples.multiply(6, 4)   # assembler text of 6 x 4
print(source)
program = tpcore.subleq.assemble(source, N=8)
result = tpcore.subleq.run(program, lam=6.0)     # Eq. 1 with softmax at lambda = 6
print(result.memory()["p"], result.agree, f"{result.seconds:.3f} s")

# %% The machine itself: layers, heads and widths
print(result.machine.size())
print(tpcore.subleq.EXAMPLES.keys())

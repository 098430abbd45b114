"""Check a backward pass of your own against float64 finite differences: a hand-written
gradient of the squared distance between softmax rows and targets. Runs in under a second.
"""

# %% The loss and its gradient, written out
import numpy as np

from tpcore.nn.gradcheck import assert_gradients, check_gradients

x = np.random.default_rng(0).standard_normal((3, 5))       # logits, float64
t = np.eye(5)[[1, 3, 0]]                                     # targets


def softmax(x):
    p = np.exp(x - x.max(1, keepdims=True))
    return p / p.sum(1, keepdims=True)


def loss(x):
    return float(((softmax(x) - t) ** 2).sum())


p = softmax(x)
g = 2 * (p - t)                                              # dL/dp
dx = p * (g - (g * p).sum(1, keepdims=True))                 # the softmax's backward

# %% Checked against central differences (raises naming the input that is off)
assert_gradients(loss, [x], [dx])
print(f"largest relative error {max(check_gradients(loss, [x], [dx])):.1e}")

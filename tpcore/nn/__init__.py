"""Explicit-gradient building blocks: every operation is a ``forward -> (out, cache)`` and
``backward(dout, cache) -> grads`` pair whose docstring states the math and the shapes."""

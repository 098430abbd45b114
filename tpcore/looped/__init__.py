"""The looped transformer layer that both computers build on (Giannou et al. 2023, Eq. 1).

``layer`` (Eq. 1 with a hand-written backward and the scratchpad-only sparse forward),
``encodings`` (+-1 addresses and integers), ``weights`` (row blocks, the layer builder and the
gated feed-forward idioms), ``diff`` (the backward through loop iterations; the weights as
trainable parameters), ``compiled`` (layers packed for the sparse-path kernel
``tpcore.kernels.looped``). The computers: :mod:`tpcore.subleq` and :mod:`tpcore.fleq`.
"""

"""FLEQ: the looped transformer computer with function blocks (Giannou et al. 2023, Sec. 5.2-9),
built on the shared Eq. 1 layer of :mod:`tpcore.looped`.

``fits`` (sums of sigmoids), ``blocks`` (function blocks as Eq. 1 weights), ``adder`` (the
noise-tolerant Lemma 16 adder and bit snap), ``program`` (FLEQ programs and the instruction word),
``toolkit`` (the M blocks of a machine), ``machine`` (the looped transformer's weights),
``assemble`` (a program laid out on a machine), ``run`` (execute and read back), ``interpret``
(the reference interpreter), ``applications`` (the paper's programs), ``permute`` (the
vectorised transpose of §8: one layer, one head), ``sawtooth`` (the ReLU network for ``x^2`` that
§6.3 compares against).
"""

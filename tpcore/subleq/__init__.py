"""SUBLEQ on the looped transformer (Giannou et al. 2023, Sec. 4-5), built on the shared Eq. 1
layer of :mod:`tpcore.looped`.

``program`` (programs as punchcard columns, validation, the authors' CSVs), ``asm`` and
``examples`` (writing programs), ``interpret`` (the reference step and interpreter, and the batched
kernel's wrapper), ``layout`` (the punchcard's rows and columns), ``blocks`` (one weight generator
per step of an instruction), ``machine`` (build, punchcard, run to the EOF fixed point, decode).
"""

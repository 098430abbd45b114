"""Looped transformer computer: encodings, punchcard layout, weight generators, SUBLEQ/FLEQ.

SUBLEQ (Giannou et al. 2023, Sec. 4-5): ``layer`` (Eq. 1 with hand-written backward),
``encodings``, ``layout``, ``blocks`` (one weight generator per block), ``machine`` (build, run,
decode), ``program`` / ``asm`` / ``examples`` (programs), ``interpret`` (reference interpreter),
``compiled`` (CSR form for the numba kernel), ``diff`` (backward through the loop).
"""

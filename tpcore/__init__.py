"""tpcore: learn, run and understand small transformers that compute programs.

Importing tpcore loads NumPy and the standard library only; numba, scipy, cupy, matplotlib and
tqdm are imported by the functions that need them.
"""

from tpcore.backend import get_xp, set_backend, xp_of

__version__ = "0.1.0"
__all__ = ["__version__", "get_xp", "set_backend", "xp_of"]

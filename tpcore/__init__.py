"""tpcore: learn, run and understand small transformers that compute programs.

The Python API (``docs/api.md``)::

    import tpcore

    run = tpcore.learn("sort", layers=2, epochs=60)   # train and decompile, as `tpcore learn`
    prog = run.program
    prog.run("d a c b")                                # ['a', 'b', 'c', 'd']
    print(prog.head("attn_1_0"))                       # one head's predicate as a table

Importing tpcore loads NumPy and the standard library only; the API's names (:mod:`tpcore.api`)
are imported when first used, and numba, scipy, cupy, matplotlib and tqdm by the functions that
need them.
"""

import importlib.util
import typing

if importlib.util.find_spec("tpcore.kernels") is None:  # a source folder, not installed
    raise ImportError("tpcore's kernels (the kernels/ folder, installed as tpcore.kernels) are "
                      f"not importable: tpcore here runs from {__path__[0]} without being "
                      "installed; install it first: pip install -e . (in the folder holding "
                      "pyproject.toml)")

from tpcore.backend import get_xp, set_backend, xp_of  # noqa: E402
from tpcore.errors import TpcoreError  # noqa: E402

__version__ = "0.1.0"

_API = ("Run", "Text", "TransformerProgram", "from_lens", "learn", "load", "save", "sort_list",
        "subleq", "to_lens", "train_sorter", "train_transformer", "trees")
"""The names :mod:`tpcore.api` defines, imported on first use."""

__all__ = ["__version__", "TpcoreError", "get_xp", "set_backend", "xp_of", *_API]


def __getattr__(name: str) -> typing.Any:
    """An API name, importing :mod:`tpcore.api` (and what it needs) the first time."""
    if name not in _API:
        raise AttributeError(f"module 'tpcore' has no attribute {name!r}")
    from tpcore import api  # the one import of a higher layer, kept out of `import tpcore`

    value = getattr(api, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (:data:`__all__`)."""
    return sorted(__all__)

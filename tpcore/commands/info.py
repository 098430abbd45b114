"""``tpcore info``: backend, versions, which optional packages are available, which fused kernels
run, whether GPU training steps are captured as CUDA graphs, the processor and what float32
training does with subnormal numbers on it."""

from __future__ import annotations

import argparse
import importlib.metadata as md
import importlib.util
import platform

import numpy as np

import tpcore
from tpcore.backend import _load_cupy, backend_name
from tpcore.commands.output import add_json_option, emit
from tpcore.cpu import cpu_model, cpu_name, subnormal_mode
from tpcore.dispatch import use_kernels
from tpcore.graphs import graphs_status

OPTIONAL = ("numba", "scipy", "tqdm", "cupy", "matplotlib", "torch", "dask")


def _version(pkg: str) -> str:
    if importlib.util.find_spec(pkg) is None:
        return "not installed"
    try:
        return md.version(pkg)
    except md.PackageNotFoundError:
        return "installed"


def _cupy_status() -> str:
    try:
        cupy = _load_cupy()
    except ValueError as exc:
        return f"unusable ({exc})"
    return f"usable ({cupy.cuda.runtime.getDeviceCount()} device(s))"


def _kernels() -> str:
    if not use_kernels():
        return "off (TPCORE_KERNELS=0): the references run"
    numba = "numba on host arrays" if importlib.util.find_spec("numba") else "no numba"
    return f"on: {numba}, CuPy's on GPU arrays"


def run(args: argparse.Namespace) -> int:
    info = {"tpcore": tpcore.__version__, "python": platform.python_version(),
            "numpy": np.__version__, "backend": backend_name(),
            **{pkg: _version(pkg) for pkg in OPTIONAL}, "cupy_backend": _cupy_status(),
            "kernels": _kernels(), "cuda_graphs": graphs_status(), "cpu": cpu_name(),
            "cpu_model": cpu_model() or "not known", "subnormals": subnormal_mode()}
    width = max(len(k) for k in info)
    emit(args, info, lambda: "\n".join(f"{key.replace('_', ' '):<{width}}  {value}"
                                       for key, value in info.items()))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="backend, versions, optional packages, the CPU and what "
                       "training does with subnormal floats")
    add_json_option(p)
    p.set_defaults(func=run)

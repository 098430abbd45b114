"""The x86 SSE control and status register (MXCSR) of the calling thread, read and written by
numba functions that emit the ``stmxcsr`` and ``ldmxcsr`` instructions (LLVM's
``llvm.x86.sse.stmxcsr``/``ldmxcsr`` intrinsics), so no compiled extension is needed.

Two of its bits decide what happens to subnormal float32/float64 numbers (magnitudes below
``finfo.tiny``): FTZ (bit 15) writes a subnormal result as zero, DAZ (bit 6) reads a subnormal
operand as zero. With both set the processor never meets a subnormal, which many x86 cores
otherwise handle in microcode, tens to hundreds of cycles per operation. The register belongs to
one thread; :mod:`tpcore.cpu` sets it for training and puts it back afterwards.

These functions are for x86-64 processors only: there is no NumPy reference, since NumPy cannot
reach the register; the tests check the bits against what arithmetic does with a subnormal.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

FTZ = 1 << 15
"""Flush to zero: subnormal results become zero."""
DAZ = 1 << 6
"""Denormals are zero: subnormal operands read as zero."""


def _call(builder: ir.IRBuilder, name: str, slot: ir.Value) -> None:
    fnty = ir.FunctionType(ir.VoidType(), [slot.type])
    builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), [slot])


@intrinsic
def _stmxcsr(typingctx):
    def codegen(context, builder, signature, args):
        slot = cgutils.alloca_once(builder, ir.IntType(32))
        _call(builder, "llvm.x86.sse.stmxcsr", slot)
        return builder.load(slot)

    return types.uint32(), codegen


@intrinsic
def _ldmxcsr(typingctx, value):
    def codegen(context, builder, signature, args):
        _call(builder, "llvm.x86.sse.ldmxcsr", cgutils.alloca_once_value(builder, args[0]))
        return context.get_dummy_value()

    return types.void(types.uint32), codegen


@numba.njit(cache=True)
def get_mxcsr() -> int:
    """The calling thread's MXCSR as an integer."""
    return _stmxcsr()


@numba.njit(cache=True)
def set_mxcsr(value: int) -> None:
    """Load ``value`` (the whole register, flags and masks included) into the calling thread's
    MXCSR."""
    _ldmxcsr(numba.uint32(value))

"""Sequentially consistent atomic operations on int64 words, for compiled code.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numba and llvmlite.

Threads that share work without the GIL (:mod:`vm.kernels.runtime.jobs`) coordinate through a
block of int64 words; these intrinsics read and change one word at a byte address. All
are sequentially consistent: the protocols built on them reason about the order in which
threads see each other's writes, and on x86-64 the stronger order costs nothing for loads
and little for the rest. :func:`symbol_address` gives compiled code the address of a
block registered with LLVM under a name, so a kernel loaded from numba's disk cache
finds the block of the process it runs in.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_I64 = ir.IntType(64)
_ORDER = "seq_cst"


def _pointer(builder: ir.IRBuilder, address: ir.Value) -> ir.Value:
    return builder.inttoptr(address, _I64.as_pointer())


@intrinsic
def load(typingctx, address):
    """The int64 at ``address``."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.load_atomic(_pointer(builder, args[0]), _ORDER, 8)

    return types.int64(types.int64), codegen


@intrinsic
def store(typingctx, address, value):
    """Write ``value`` to the int64 at ``address``."""
    if not (isinstance(address, types.Integer) and isinstance(value, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        builder.store_atomic(args[1], _pointer(builder, args[0]), _ORDER, 8)
        return context.get_dummy_value()

    return types.none(types.int64, types.int64), codegen


@intrinsic
def fetch_add(typingctx, address, value):
    """Add ``value`` to the int64 at ``address``; returns the value before."""
    if not (isinstance(address, types.Integer) and isinstance(value, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        return builder.atomic_rmw("add", _pointer(builder, args[0]), args[1], _ORDER)

    return types.int64(types.int64, types.int64), codegen


@intrinsic
def compare_exchange(typingctx, address, expected, desired):
    """Set the int64 at ``address`` to ``desired`` if it holds ``expected``; True if it did."""
    if not all(isinstance(t, types.Integer) for t in (address, expected, desired)):
        return None

    def codegen(context, builder, signature, args):
        pair = builder.cmpxchg(_pointer(builder, args[0]), args[1], args[2], _ORDER, _ORDER)
        return builder.extract_value(pair, 1)

    return types.boolean(types.int64, types.int64, types.int64), codegen


def symbol_address(symbol: str):
    """An intrinsic returning the address LLVM links ``symbol`` to (register it with
    ``llvmlite.binding.add_symbol`` before the first call)."""

    @intrinsic
    def address(typingctx):
        def codegen(context, builder, signature, args):
            module = builder.module
            try:
                variable = module.get_global(symbol)
            except KeyError:
                variable = ir.GlobalVariable(module, ir.IntType(8), name=symbol)
            return builder.ptrtoint(variable, _I64)

        return types.int64(), codegen

    return address

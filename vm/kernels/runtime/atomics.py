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


def _word_pointer(builder: ir.IRBuilder, base: ir.Value, index: ir.Value) -> ir.Value:
    return _pointer(builder, builder.add(base, builder.mul(index, ir.Constant(_I64, 8))))


def emit_load_word(builder: ir.IRBuilder, base: ir.Value, index: ir.Value) -> ir.Value:
    """LLVM IR of :func:`load_word`, for other intrinsics: the int64 word ``index`` (an i64
    value) of the block at byte address ``base`` (an i64 value)."""
    return builder.load_atomic(_word_pointer(builder, base, index), _ORDER, 8)


# The word accessors below are intrinsics rather than compiled helpers: numba compiles a
# function once for each literal argument it is called with, and blocks of words are read
# by constant index (one kind's chunk code compiled a helper 13 times, 1 s of a cold start).


@intrinsic
def load_word(typingctx, base, index):
    """Word ``index`` (int64) of the block of int64 words at address ``base``."""
    if not (isinstance(base, types.Integer) and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        return emit_load_word(builder, args[0], args[1])

    return types.int64(types.int64, types.int64), codegen


@intrinsic
def store_word(typingctx, base, index, value):
    """Write ``value`` to word ``index`` of the block of int64 words at address ``base``."""
    if not all(isinstance(t, types.Integer) for t in (base, index, value)):
        return None

    def codegen(context, builder, signature, args):
        builder.store_atomic(args[2], _word_pointer(builder, args[0], args[1]), _ORDER, 8)
        return context.get_dummy_value()

    return types.none(types.int64, types.int64, types.int64), codegen


@intrinsic
def load_halves(typingctx, base, index):
    """Word ``index`` of the block at ``base`` as its two 32-bit halves ``(high, low)``,
    each an int64 (the high half keeps the word's sign)."""
    if not (isinstance(base, types.Integer) and isinstance(index, types.Integer)):
        return None
    halves = types.UniTuple(types.int64, 2)

    def codegen(context, builder, signature, args):
        value = emit_load_word(builder, args[0], args[1])
        high = builder.ashr(value, ir.Constant(_I64, 32))
        low = builder.and_(value, ir.Constant(_I64, (1 << 32) - 1))
        return context.make_tuple(builder, halves, [high, low])

    return halves(types.int64, types.int64), codegen


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

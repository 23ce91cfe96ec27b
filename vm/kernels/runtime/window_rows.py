"""A 3x3 window's nine taps for up to 16 output pixels of a row, written as the pixels' rows of
an im2row matrix (:func:`vm.kernels.runtime.conv_loops.im2row`) through a register transpose.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numba, llvmlite and
:mod:`vm.kernels.runtime.vector_ir`.

An im2row row is one output pixel's window over every channel, nine floats a channel. Built
a pixel at a time, each float is a scalar read from a channel's plane, a select for the
padding and a scalar store: about one float a cycle, a fifth of ResNet-50's stride-2 3x3
convolutions (AMD EPYC Zen 5, 128 channels at 56x56 to 28x28: 140 us of copying on two
threads before a 545 us product). Here each tap of a channel is one vector over 16 pixels
(a run of a row at a column stride of 1, or the even floats of a run twice as long at a
stride of 2), read under a mask that leaves the columns in the padding 0 without reading
them (a row in the padding is read from a row of zeros); the nine vectors and seven of
zeros are transposed in registers (:func:`vm.kernels.runtime.vector_ir.transpose16`) and
each pixel's first nine lanes are stored under a mask. Single thread, the same layer's
copy: 265 -> 124 us; 256 channels at 28x28 to 14x14, 134 -> 49 us. Hosts with AVX-512 only
(:data:`vm.kernels.runtime.conv_loops.WINDOW_BLOCKS`).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from vm.kernels.runtime import vector_ir as vir
from vm.kernels.runtime.vector_ir import I64, LANES, VEC

#: Output pixels of a row one call covers.
PIXELS = LANES
#: The lanes a pixel's row takes from its transposed vector: one per tap.
TAPS = 9

_I32 = ir.IntType(32)


def _masks(builder: ir.IRBuilder, column: ir.Value, width: ir.Value, stride: int) -> list:
    """Per 16 lanes, the masks of the floats ``column + e`` (``e < 16 * stride``) inside
    ``[0, width)``: the same for each of the three rows, so at most six mask registers
    stay live across the channels."""
    count = LANES * stride
    offsets = ir.Constant(ir.VectorType(I64, count), list(range(count)))
    columns = builder.add(vir.splat(builder, column, count), offsets)
    mask = builder.and_(
        builder.icmp_signed(">=", columns, ir.Constant(ir.VectorType(I64, count), [0] * count)),
        builder.icmp_signed("<", columns, vir.splat(builder, width, count)),
    )
    if stride == 1:
        return [mask]
    halves = []
    for half in range(stride):
        lanes = list(range(half * LANES, (half + 1) * LANES))
        halves.append(
            builder.shuffle_vector(mask, mask, ir.Constant(ir.VectorType(_I32, LANES), lanes))
        )
    return halves


def _tap(builder: ir.IRBuilder, row: ir.Value, column: ir.Value, masks: list, stride: int):
    """Floats ``column + stride * l`` of the row at byte address ``row`` for lanes ``l``,
    0 where ``masks`` (:func:`_masks`) are clear."""
    start = builder.add(row, builder.shl(column, I64(2)))
    parts = []
    for half, mask in enumerate(masks):
        at = builder.inttoptr(builder.add(start, I64(64 * half)), VEC.as_pointer())
        parts.append(vir.masked_load(builder, at, mask))
    if stride == 1:
        return parts[0]
    evens = ir.Constant(ir.VectorType(_I32, LANES), list(range(0, 2 * LANES, 2)))
    return builder.shuffle_vector(parts[0], parts[1], evens)


def _codegen(stride: int):
    def codegen(context, builder, signature, args):
        target, depth, row0, row1, row2, first, dilation, width, valid = args
        columns = [builder.add(first, builder.mul(I64(j), dilation)) for j in range(3)]
        masks = [_masks(builder, column, width, stride) for column in columns]
        taps = [
            _tap(builder, row, columns[j], masks[j], stride)
            for row in (row0, row1, row2)
            for j in range(3)
        ]
        zero = ir.Constant(VEC, None)
        pixels = vir.transpose16(builder, taps + [zero] * (LANES - TAPS))
        nine = ir.Constant(ir.VectorType(ir.IntType(1), LANES), [t < TAPS for t in range(LANES)])
        none = ir.Constant(ir.VectorType(ir.IntType(1), LANES), [False] * LANES)
        addresses = []
        for p in range(LANES):
            at = builder.add(target, builder.shl(builder.mul(depth, I64(p)), I64(2)))
            addresses.append(builder.inttoptr(at, VEC.as_pointer()))
        # A whole block stores under one constant mask; a short one (a row's last pixels)
        # stores nothing for the pixels past it, whose rows may lie past the matrix.
        whole = builder.icmp_signed("==", valid, I64(LANES))
        with builder.if_else(whole) as (then, otherwise):
            with then:
                for vector, at in zip(pixels, addresses):
                    vir.masked_store(builder, vector, at, nine)
            with otherwise:
                for p, (vector, at) in enumerate(zip(pixels, addresses)):
                    mask = builder.select(builder.icmp_signed(">", valid, I64(p)), nine, none)
                    vir.masked_store(builder, vector, at, mask)
        return context.get_dummy_value()

    return codegen


def _signature(arguments: tuple, stride: int):
    if not all(isinstance(a, types.Integer) for a in arguments):
        return None
    return types.none(*([types.int64] * len(arguments))), _codegen(stride)


@intrinsic
def window_rows3_s1(typingctx, target, depth, row0, row1, row2, first, dilation, width, valid):
    """Write channel ``c``'s nine taps for pixels ``p < valid`` (at most :data:`PIXELS`) of
    an output row of a 3x3 window at a column stride of 1: ``target[p * depth + 3 * i + j]``
    = the float at column ``first + p + j * dilation`` of row ``i`` (byte addresses
    ``row0``, ``row1``, ``row2``: a row of zeros, at least ``width`` long, for a row in
    the padding), or 0 where that column is outside ``[0, width)``. Float32 at byte
    addresses, every argument an integer. Only columns inside ``[0, width)`` of the rows
    are read, and only the nine floats of each pixel written."""
    return _signature((target, depth, row0, row1, row2, first, dilation, width, valid), 1)


@intrinsic
def window_rows3_s2(typingctx, target, depth, row0, row1, row2, first, dilation, width, valid):
    """:func:`window_rows3_s1` at a column stride of 2: the float at column
    ``first + 2 * p + j * dilation``."""
    return _signature((target, depth, row0, row1, row2, first, dilation, width, valid), 2)

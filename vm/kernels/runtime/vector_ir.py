"""Pieces of LLVM IR shared by the loops written by hand as IR: the register tiles of
:mod:`vm.kernels.runtime.packed`, the depthwise tap sums of :mod:`vm.kernels.runtime.taps`,
the transposes of :mod:`vm.kernels.runtime.transpose` and the im2row windows of
:mod:`vm.kernels.runtime.window_rows`.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports llvmlite only.

numba has no vector type and leaves a loop scalar when its values must stay in registers
across an inner loop (a tile's accumulators across ``k``, a block of outputs across the
taps), so those loops are built as IR in numba intrinsics. Their vectors are 16 float32
lanes; LLVM lowers them to two 8-lane halves on AVX2.
"""

from __future__ import annotations

from llvmlite import ir

#: float32 lanes of the vectors the IR loops use.
LANES = 16
F32 = ir.FloatType()
I64 = ir.IntType(64)
VEC = ir.VectorType(F32, LANES)


def fma(module: ir.Module) -> ir.Function:
    """``llvm.fma`` on :data:`VEC`, declared once per module: one rounding per multiply-add."""
    name = f"llvm.fma.v{LANES}f32"
    found = module.globals.get(name)
    if found is None:
        found = ir.Function(module, ir.FunctionType(VEC, [VEC] * 3), name=name)
    return found


_MASK = ir.VectorType(ir.IntType(1), LANES)


def _declared(builder: ir.IRBuilder, name: str, kind: ir.FunctionType) -> ir.Function:
    found = builder.module.globals.get(name)
    return found if found is not None else ir.Function(builder.module, kind, name=name)


def prefetch(builder: ir.IRBuilder, byte_address: ir.Value, write: int, locality: int) -> None:
    """``llvm.prefetch`` of the cache line at the integer ``byte_address``: ``write`` 1 asks
    for the line to be owned for writing, ``locality`` 0-3 how close to the core to keep it.
    A prefetch never faults, so an address past an array's end costs a wasted request only."""
    i32 = ir.IntType(32)
    pointer = ir.IntType(8).as_pointer()
    kind = ir.FunctionType(ir.VoidType(), [pointer, i32, i32, i32])
    function = _declared(builder, "llvm.prefetch", kind)
    # The last operand: data (1), not instructions.
    builder.call(
        function, [builder.inttoptr(byte_address, pointer), i32(write), i32(locality), i32(1)]
    )


def address(builder: ir.IRBuilder, base: ir.Value, offset: ir.Value, kind: ir.Type) -> ir.Value:
    """``base + 4 * offset`` (a byte address and a count of float32 elements) as a
    pointer to ``kind``."""
    return builder.inttoptr(builder.add(base, builder.shl(offset, I64(2))), kind.as_pointer())


def splat(builder: ir.IRBuilder, value: ir.Value, lanes: int = LANES) -> ir.Value:
    """The scalar ``value`` in every one of ``lanes`` lanes (a :data:`VEC` for a float and
    the default count)."""
    undef = ir.Constant(ir.VectorType(value.type, lanes), ir.Undefined)
    zeros = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes)
    return builder.shuffle_vector(
        builder.insert_element(undef, value, ir.IntType(32)(0)), undef, zeros
    )


def masked_load(builder: ir.IRBuilder, pointer: ir.Value, mask: ir.Value) -> ir.Value:
    """The :data:`VEC` at ``pointer`` where ``mask`` (16 x i1) is set, 0 elsewhere. A lane
    off the mask is not read (``llvm.masked.load``'s contract; AVX-512 and AVX's
    ``vmaskmov`` suppress its fault), so it may lie outside any array."""
    kind = ir.FunctionType(VEC, [VEC.as_pointer(), ir.IntType(32), _MASK, VEC])
    function = _declared(builder, f"llvm.masked.load.v{LANES}f32.p0", kind)
    return builder.call(function, [pointer, ir.IntType(32)(4), mask, ir.Constant(VEC, None)])


def masked_store(builder: ir.IRBuilder, value: ir.Value, pointer: ir.Value, mask: ir.Value) -> None:
    """Store the lanes of ``value`` where ``mask`` is set; memory under the other lanes is
    neither read nor written."""
    kind = ir.FunctionType(ir.VoidType(), [VEC, VEC.as_pointer(), ir.IntType(32), _MASK])
    function = _declared(builder, f"llvm.masked.store.v{LANES}f32.p0", kind)
    builder.call(function, [value, pointer, ir.IntType(32)(4), mask])


def transpose16(builder: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """The 16 :data:`VEC` ``rows`` transposed: lane ``r`` of result ``c`` is lane ``c`` of
    ``rows[r]``. Four rounds of two-vector shuffles, each swapping the off-diagonal blocks
    of every 2d x 2d block (d = 8, 4, 2, 1)."""
    lanes = ir.VectorType(ir.IntType(32), LANES)
    rows = list(rows)
    d = LANES // 2
    while d:
        # Rows i and i + d trade the blocks of d columns each holds of the other's
        # transpose: i keeps its columns without bit d and takes j's, shifted down.
        keep = ir.Constant(lanes, [c if not c & d else LANES + c - d for c in range(LANES)])
        take = ir.Constant(lanes, [LANES + c if c & d else c + d for c in range(LANES)])
        swapped = list(rows)
        for i in range(LANES):
            if not i & d:
                swapped[i] = builder.shuffle_vector(rows[i], rows[i + d], keep)
                swapped[i + d] = builder.shuffle_vector(rows[i], rows[i + d], take)
        rows = swapped
        d //= 2
    return rows

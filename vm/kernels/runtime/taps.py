"""Sums of a depthwise convolution's taps with the outputs held in vector registers: along
a plane (:func:`plane_taps`, the inner loop of
:func:`vm.kernels.runtime.depthwise._plane_range` for kernels other than 3x3) and across a
block of channels laid out channels last (:func:`channel_taps`, for
:func:`vm.kernels.runtime.depthwise._channel_blocks`), and along a row at a column stride
of 2 (:func:`stride2_taps3x3`, for :func:`vm.kernels.runtime.depthwise._stride2_range`).

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numba and llvmlite.

A plane loop reads every tap of an output element at a fixed offset from it, so the sum
over the taps is a loop over the output with one multiply-add per tap. Written in numba,
with the taps outside that loop, the running sums go through memory: a load, a
multiply-add and a store per tap and element, and on 14x14 or 7x7 planes mostly the
loop's scalar remainder (ConvNeXt's 7x7 layers ran at a third to a fifth of
onnxruntime's speed). :func:`plane_taps` keeps :data:`BLOCK` outputs in registers
across all the taps instead, then stores them once. On small planes even that sums
positions past each row and scraps of a block: :func:`channel_taps` takes a vector of 16
channels per pixel instead, every lane an output.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from vm.kernels.runtime import vector_ir as vir
from vm.kernels.runtime.target import has_avx512
from vm.kernels.runtime.vector_ir import F32, I64, LANES, VEC

#: Vectors of outputs a block holds across the taps: independent sums enough to cover
#: the multiply-add's latency on both of a core's FMA units. AVX2 has 16 registers, and
#: each 16-lane vector takes two of them.
VECTORS = 8 if has_avx512() else 4
#: Outputs a block computes. The last block of a run is computed whole, so it reads and
#: writes up to ``BLOCK - 1`` elements past the run: a workspace keeps that much room.
BLOCK = VECTORS * LANES


def _word(builder: ir.IRBuilder, base: ir.Value, index: ir.Value) -> ir.Value:
    """The int64 ``index`` of the array at byte address ``base``."""
    pointer = builder.inttoptr(builder.add(base, builder.shl(index, I64(3))), I64.as_pointer())
    return builder.load(pointer, align=8)


def _emit_tap_loops(builder: ir.IRBuilder, count, taps, step: int, vectors: int, start, terms,
                    finish) -> None:  # fmt: skip
    """The loops both sums share: for each ``first`` in ``range(0, count, step)``, ``vectors``
    sums from zero, one fused multiply-add per tap ``t < taps`` (``terms(state, first, t)``
    gives the weight vector and the ``vectors`` values), then ``finish(first, sums)``;
    ``start(first)`` computes a group's ``state`` before its taps. Nothing runs unless
    ``count`` and ``taps`` are positive."""
    fma = vir.fma(builder.module)
    function = builder.function
    entry = builder.block
    group = function.append_basic_block("taps.group")
    tap = function.append_basic_block("taps.tap")
    stored = function.append_basic_block("taps.stored")
    done = function.append_basic_block("taps.done")
    positive = builder.and_(
        builder.icmp_signed(">", count, I64(0)), builder.icmp_signed(">", taps, I64(0))
    )
    builder.cbranch(positive, group, done)

    builder.position_at_end(group)
    first = builder.phi(I64)
    first.add_incoming(I64(0), entry)
    state = start(first)
    builder.branch(tap)

    builder.position_at_end(tap)
    t = builder.phi(I64)
    t.add_incoming(I64(0), group)
    sums = [builder.phi(VEC) for _ in range(vectors)]
    for s in sums:
        s.add_incoming(ir.Constant(VEC, None), group)
    weight, values = terms(state, first, t)
    added = [builder.call(fma, [weight, value, s]) for value, s in zip(values, sums)]
    following = builder.add(t, I64(1))
    t.add_incoming(following, tap)
    for s, a in zip(sums, added):
        s.add_incoming(a, tap)
    builder.cbranch(builder.icmp_signed("<", following, taps), tap, stored)

    builder.position_at_end(stored)
    finish(first, added)
    after = builder.add(first, I64(step))
    first.add_incoming(after, stored)
    builder.cbranch(builder.icmp_signed("<", after, count), group, done)
    builder.position_at_end(done)


def _codegen(context, builder, signature, args):
    pad, out_at, count, offsets, weights, taps = args

    def vector(at, v):
        return vir.address(builder, pad, builder.add(at, I64(v * LANES)), VEC)

    def terms(state, first, t):
        weight = vir.splat(builder, builder.load(vir.address(builder, weights, t, F32), align=4))
        at = builder.add(_word(builder, offsets, t), first)
        return weight, [builder.load(vector(at, v), align=4) for v in range(VECTORS)]

    def finish(first, sums):
        out = builder.add(out_at, first)
        for v, value in enumerate(sums):
            builder.store(value, vector(out, v), align=4)

    _emit_tap_loops(builder, count, taps, BLOCK, VECTORS, lambda first: None, terms, finish)
    return context.get_dummy_value()


@intrinsic
def plane_taps(typingctx, pad, out_at, count, offsets, weights, taps):
    """``pad[out_at + e] = sum_t weights[t] * pad[offsets[t] + e]`` for ``e < count``,
    in blocks of :data:`BLOCK`: ``pad`` is the byte address of a float32 workspace,
    ``offsets`` of ``taps`` int64 element offsets into it, ``weights`` of ``taps``
    float32s. The last block is computed whole: the workspace must have ``BLOCK - 1``
    elements to read past every tap's run and to write past the output's (what they
    hold there is read and written, never used). Each sum runs over the taps in order,
    one fused multiply-add per tap."""
    arguments = (pad, out_at, count, offsets, weights, taps)
    if not all(isinstance(a, types.Integer) for a in arguments):
        return None
    return types.none(*([types.int64] * 6)), _codegen


#: Output rows :func:`rows_taps` sums at once, and vectors along each in its wide form (the
#: narrow one has one): an input vector loaded once serves the taps of every row of the
#: block it reaches, where a plane loop loads it once per tap. The sums take ``ROWS *
#: ROW_VECTORS`` vectors: 8 of AVX-512's 32 registers, 4 (8 halves) of AVX2's 16. Per
#: channel on one core (AMD EPYC Zen 4, AVX-512), 4 rows by 2 vectors: 7x7 at 56x56
#: 3.0 us against the plane loop's 5.1, at 28x28 0.8 against 1.5; 3x3 at 56x56 0.57 (one
#: vector: 0.59) against the numba loop's 0.83; 2, 6 or 8 rows and 3 vectors were slower.
ROWS = 4
ROW_VECTORS = 2 if has_avx512() else 1


def row_columns(wide: bool) -> int:
    """Columns :func:`rows_taps` computes at a time along a row, wide or narrow."""
    return LANES * (ROW_VECTORS if wide else 1)


def _rows_codegen(kh: int, kw: int, vectors: int):
    def codegen(context, builder, signature, args):
        pad, out_at, at, row_len, rows, blocks_across, weights = args[:7]
        fma = vir.fma(builder.module)
        width = vectors * LANES
        zero = ir.Constant(VEC, None)
        lines = [builder.mul(row_len, I64(y)) for y in range(ROWS + kh - 1)]

        def block(count: int, first_row: ir.Value) -> None:
            """Output rows ``first_row:first_row + count``, every block of columns."""
            top = builder.mul(first_row, row_len)
            with cgutils.for_range(builder, blocks_across) as across:
                left = builder.add(top, builder.mul(across.index, I64(width)))
                source = builder.add(at, left)
                sums = [[zero] * vectors for _ in range(count)]
                # Input rows y of the block; output row q takes tap row y - q.
                for y in range(count + kh - 1):
                    for j in range(kw):
                        first = builder.add(source, builder.add(lines[y], I64(j)))
                        values = [
                            builder.load(
                                vir.address(builder, pad, builder.add(first, I64(v * LANES)), VEC),
                                align=4,
                            )
                            for v in range(vectors)
                        ]
                        for q in range(max(0, y - kh + 1), min(count - 1, y) + 1):
                            tap = I64((y - q) * kw + j)
                            weight = builder.load(vir.address(builder, weights, tap, F32), align=4)
                            weight = vir.splat(builder, weight)
                            sums[q] = [
                                builder.call(fma, [weight, value, total])
                                for value, total in zip(values, sums[q])
                            ]
                target = builder.add(out_at, left)
                for q in range(count):
                    line = builder.add(target, lines[q])
                    for v in range(vectors):
                        at_v = builder.add(line, I64(v * LANES))
                        builder.store(sums[q][v], vir.address(builder, pad, at_v, VEC), align=4)

        # Blocks of ROWS rows, then the rows left one at a time.
        blocks = builder.sdiv(rows, I64(ROWS))
        with cgutils.for_range(builder, blocks) as down:
            block(ROWS, builder.mul(down.index, I64(ROWS)))
        done = builder.mul(blocks, I64(ROWS))
        with cgutils.for_range(builder, builder.sub(rows, done)) as single:
            block(1, builder.add(done, single.index))
        return context.get_dummy_value()

    return codegen


@intrinsic
def rows_taps(typingctx, pad, out_at, at, row_len, rows, blocks_across, weights, kh, kw, wide):
    """A ``kh`` x ``kw`` convolution of one channel at stride 1 along a plane of rows
    ``row_len`` apart, in blocks of :data:`ROWS` output rows (the rows left, one at a time)
    by ``C`` columns (:func:`row_columns` of ``wide``): ``pad[out_at + r * row_len + c] =
    sum_ij weights[i * kw + j] * pad[at + (r + i) * row_len + c + j]`` for ``r < rows`` and
    ``c < blocks_across * C``. ``pad`` and ``weights`` are byte addresses of float32s, the
    others element offsets and counts; ``kh``, ``kw`` and ``wide`` constants of the calling
    code (the loops over the taps are unrolled). Columns past ``row_len`` spill into the
    next row (computed after it) and past the last; they read as far past the input. Each
    sum runs over the taps in order, one fused multiply-add per tap, as in
    :func:`plane_taps`."""
    counts = (pad, out_at, at, row_len, rows, blocks_across, weights)
    shape = (kh, kw, wide)
    if not all(isinstance(a, types.Integer) for a in counts):
        return None
    if not all(isinstance(a, types.IntegerLiteral) for a in shape):
        return None
    kh, kw, wide = (a.literal_value for a in shape)
    signature = types.none(*([types.int64] * 7), *shape)
    return signature, _rows_codegen(kh, kw, row_columns(bool(wide)) // LANES)


#: Square kernel sizes :func:`plane_rows` runs.
ROW_KERNELS = (3, 5, 7)
WIDE_COLUMNS = row_columns(True)
NARROW_COLUMNS = row_columns(False)


@njit(nogil=True, cache=True)
def plane_rows(pad, out_at, at, row_len, rows, columns, weights, k):
    """:func:`rows_taps` over ``rows`` output rows of ``columns`` outputs each, for a ``k``
    x ``k`` kernel (one of :data:`ROW_KERNELS`): wide blocks of columns where they compute
    no more columns than narrow ones. ``row_len`` must be at least ``columns`` rounded up
    to :data:`LANES`, so that no column spills into the next row (see :func:`rows_taps`)."""
    # Addresses come as uint64: signed offsets would make their sums floats.
    pad, out_at, at, weights = np.int64(pad), np.int64(out_at), np.int64(at), np.int64(weights)
    whole = -(-columns // NARROW_COLUMNS) * NARROW_COLUMNS
    wide = -(-columns // WIDE_COLUMNS) * WIDE_COLUMNS == whole
    across = -(-columns // (WIDE_COLUMNS if wide else NARROW_COLUMNS))
    # The kernel size and width reach the intrinsic as constants, one branch each.
    if wide:
        if k == 3:
            rows_taps(pad, out_at, at, row_len, rows, across, weights, 3, 3, 1)
        elif k == 5:
            rows_taps(pad, out_at, at, row_len, rows, across, weights, 5, 5, 1)
        else:
            rows_taps(pad, out_at, at, row_len, rows, across, weights, 7, 7, 1)
    elif k == 3:
        rows_taps(pad, out_at, at, row_len, rows, across, weights, 3, 3, 0)
    elif k == 5:
        rows_taps(pad, out_at, at, row_len, rows, across, weights, 5, 5, 0)
    else:
        rows_taps(pad, out_at, at, row_len, rows, across, weights, 7, 7, 0)


@intrinsic
def is_float32(typingctx, array):
    """Whether ``array``'s elements are float32, as a constant of the compiled code (the
    branch it guards is dropped where they are not)."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        return context.get_constant(types.boolean, array.dtype == types.float32)

    return types.boolean(array), codegen


#: Pixels :func:`channel_taps` sums at once: independent sums enough to cover the
#: multiply-add's latency. Its pixel lists are padded to a multiple of this.
PIXELS = 4


def _channel_codegen(context, builder, signature, args):
    pad, bases, count, out, offsets, weights, taps = args

    def row(base, index):
        return vir.address(builder, base, builder.mul(index, I64(LANES)), VEC)

    def start(first):
        return [_word(builder, bases, builder.add(first, I64(p))) for p in range(PIXELS)]

    def terms(starts, first, t):
        offset = _word(builder, offsets, t)
        weight = builder.load(row(weights, t), align=4)
        return weight, [builder.load(row(pad, builder.add(at, offset)), align=4) for at in starts]

    def finish(first, sums):
        for p, value in enumerate(sums):
            builder.store(value, row(out, builder.add(first, I64(p))), align=4)

    _emit_tap_loops(builder, count, taps, PIXELS, PIXELS, start, terms, finish)
    return context.get_dummy_value()


@intrinsic
def channel_taps(typingctx, pad, bases, count, out, offsets, weights, taps):
    """``out[p, :] = sum_t weights[t, :] * pad[bases[p] + offsets[t], :]`` for ``p <
    count``, rows of :data:`LANES` float32s (a block of channels, channels last), in groups
    of :data:`PIXELS` pixels: ``pad`` and ``out`` are byte addresses of float32 rows,
    ``bases`` of the pixels' int64 row numbers in ``pad`` and ``offsets`` of the taps',
    ``weights`` of ``taps`` rows. The last group is computed whole: ``bases`` must have
    a multiple of :data:`PIXELS` entries and ``out`` as many rows. Each sum runs over the
    taps in order, one fused multiply-add per tap."""
    arguments = (pad, bases, count, out, offsets, weights, taps)
    if not all(isinstance(a, types.Integer) for a in arguments):
        return None
    return types.none(*([types.int64] * 7)), _channel_codegen


#: Elements :func:`stride2_taps3x3` may read past the last padded row it is given: a
#: workspace keeps that much room after its rows.
STRIDE2_SLACK = 2 * LANES


def _stride2_codegen(context, builder, signature, args):
    pad, at, step, out, blocks, weights = args
    fma = vir.fma(builder.module)
    lanes = ir.VectorType(ir.IntType(32), LANES)
    evens = ir.Constant(lanes, list(range(0, 2 * LANES, 2)))
    odds = ir.Constant(lanes, list(range(1, 2 * LANES, 2)))
    taps = [
        vir.splat(builder, builder.load(vir.address(builder, weights, I64(t), F32), align=4))
        for t in range(9)
    ]

    def load(offset):
        return builder.load(vir.address(builder, pad, offset, VEC), align=4)

    with cgutils.for_range(builder, blocks) as loop:
        first = builder.add(at, builder.mul(loop.index, I64(2 * LANES)))
        total = None
        for i in range(3):
            row = builder.add(first, builder.mul(step, I64(i)))
            low, high = load(row), load(builder.add(row, I64(LANES)))
            low2 = load(builder.add(row, I64(2)))
            high2 = load(builder.add(row, I64(LANES + 2)))
            columns = (
                builder.shuffle_vector(low, high, evens),
                builder.shuffle_vector(low, high, odds),
                builder.shuffle_vector(low2, high2, evens),
            )
            for j, value in enumerate(columns):
                weight = taps[3 * i + j]
                total = (
                    builder.fmul(weight, value)
                    if total is None
                    else builder.call(fma, [weight, value, total])
                )
        target = vir.address(builder, out, builder.mul(loop.index, I64(LANES)), VEC)
        builder.store(total, target, align=4)
    return context.get_dummy_value()


@intrinsic
def stride2_taps3x3(typingctx, pad, at, step, out, blocks, weights):
    """One output row of a 3x3 convolution of one channel with a column stride of 2, in
    ``blocks`` blocks of :data:`LANES` outputs: ``out[q] = sum_ij weights[3 i + j] *
    pad[at + i * step + 2 q + j]``. ``pad`` and ``out`` are byte addresses of float32s,
    ``at`` and ``step`` element offsets (the top padded row, the distance between the
    rows the taps read), ``weights`` the address of the 9 taps. Each input row is read
    whole, with contiguous loads, and split by column phase in registers: strided loads
    would be gathers, and the phase split of the rows in memory costs a pass of its own.
    A row reads up to :data:`STRIDE2_SLACK` elements past ``2 * LANES * blocks + 1``.
    Each sum runs over the taps in order, the first a product, the rest fused
    multiply-adds."""
    arguments = (pad, at, step, out, blocks, weights)
    if not all(isinstance(a, types.Integer) for a in arguments):
        return None
    return types.none(*([types.int64] * 6)), _stride2_codegen

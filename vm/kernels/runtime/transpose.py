"""Batched float32 transposes, ``out[b, j, i] = x[b, i, j]``, in register tiles of 16x16 and
shared between threads: the layout changes between NCHW and NHWC that ConvNeXt and the
vision transformers make around their dense layers.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numpy, numba,
llvmlite and :mod:`vm.kernels.runtime.jobs` (whose slot shares a transpose's tiles with the
worker threads).

A transpose reads along one axis and writes along the other, so element-wise code reads
or writes a new cache line at every element, and numba's loops stay scalar (a 16x16 tile
at a time, about 0.8 ns an element on one core of an Intel Xeon, Emerald Rapids: twice
numpy's time, four times a plain copy's). :func:`tile16` loads 16 rows of 16 floats as
vectors, transposes them in registers with four rounds of two-vector shuffles (each
swapping the off-diagonal blocks of every 2d x 2d block, d = 8, 4, 2, 1) and stores 16
vectors. Generated kernels call :func:`batched_f32` (as ``tr``) for a ``transpose`` whose
permutation moves a trailing group of axes in front of the group before it, on
C-contiguous float32 arrays (:mod:`vm.kernels.emit_layout`).
"""

from __future__ import annotations

import numpy as np
from numba import carray, njit, types
from numba.extending import intrinsic

from vm.kernels.runtime import jobs, packed
from vm.kernels.runtime import vector_ir as vir
from vm.kernels.runtime.vector_ir import I64, LANES, VEC

#: Side of the square tiles, one vector a row.
TILE = LANES
#: Elements from which a transpose is shared with the polling workers: below it, handing
#: out the job costs about as much as the copy.
SPLIT_ELEMENTS = 1 << 15


def _tile_codegen(context, builder, signature, args):
    source, source_stride, target, target_stride = args
    rows = [
        builder.load(vir.address(builder, source, builder.mul(I64(r), source_stride), VEC), align=4)
        for r in range(TILE)
    ]
    rows = vir.transpose16(builder, rows)
    for c, row in enumerate(rows):
        builder.store(row, vir.address(builder, target, builder.mul(I64(c), target_stride), VEC),
                      align=4)  # fmt: skip
    return context.get_dummy_value()


@intrinsic
def tile16(typingctx, source, source_stride, target, target_stride):
    """``target[c * target_stride + r] = source[r * source_stride + c]`` for ``r, c < 16``:
    float32 arrays at byte addresses, strides in elements."""
    arguments = (source, source_stride, target, target_stride)
    if not all(isinstance(a, types.Integer) for a in arguments):
        return None
    return types.none(*([types.int64] * 4)), _tile_codegen


@njit(nogil=True, cache=True)
def tile_count(batches, rows, cols):
    """The tiles of :func:`tiles_range` for ``batches`` matrices of ``rows`` by ``cols``
    (those at the bottom and right edges partial)."""
    return batches * ((rows + TILE - 1) // TILE) * ((cols + TILE - 1) // TILE)


@njit(nogil=True, cache=True)
def tiles_range(source, target, batches, rows, cols, first, last, post=0):
    """Tiles ``first:last`` of ``target[b, j, i] = source[b, i, j]`` (float32 arrays of
    ``batches * rows * cols`` elements at byte addresses), numbered by batch, then by
    column of the source, then by row, so that a range of tiles writes a run of the
    target's rows. ``post``, when not 0, is the address of a convolution's epilogue
    (:func:`vm.kernels.runtime.packed.post_epilogue`) whose unit ``j`` is the target's row
    ``j`` (one batch): each tile applies it to the block it stored, while that is in
    cache."""
    row_tiles = (rows + TILE - 1) // TILE
    per_batch = row_tiles * ((cols + TILE - 1) // TILE)
    for t in range(first, last):
        b, rest = t // per_batch, t % per_batch
        r0, c0 = rest % row_tiles * TILE, rest // row_tiles * TILE
        base = b * rows * cols
        at_source = base + r0 * cols + c0
        at_target = base + c0 * rows + r0
        if r0 + TILE <= rows and c0 + TILE <= cols:
            tile16(source + at_source * 4, cols, target + at_target * 4, rows)
        else:
            for c in range(min(TILE, cols - c0)):
                for r in range(min(TILE, rows - r0)):
                    packed.store(target, at_target + c * rows + r,
                                 packed.load(source, at_source + r * cols + c))  # fmt: skip
        if post != 0:
            block = carray(packed.floats(target + at_target * 4), (min(TILE, cols - c0), rows))
            packed.apply_post(block[:, : min(TILE, rows - r0)], post, c0)


@njit(nogil=True)
def batched_f32(x, out, batches, rows, cols, post=0):
    """``out[b, j, i] = x[b, i, j]`` for the C-contiguous float32 ``x`` of ``batches *
    rows * cols`` elements and ``out`` of as many, shared with the polling workers by
    tiles when it is big enough. ``post``: 0, or with one batch the address of an
    epilogue to apply to ``out`` as its tiles are stored (see :func:`tiles_range`)."""
    if x.size != batches * rows * cols or out.size != x.size:
        raise ValueError("transpose: the arrays do not hold batches * rows * cols elements")
    if post != 0 and batches != 1:
        raise ValueError("transpose: an epilogue needs a single batch")
    source, target = np.int64(x.ctypes.data), np.int64(out.ctypes.data)
    tiles = tile_count(batches, rows, cols)
    if x.size >= SPLIT_ELEMENTS:
        arguments = (source, target, np.int64(batches), np.int64(rows), np.int64(cols),
                     np.int64(post))  # fmt: skip
        if jobs.share(jobs.TRANSPOSE, tiles, arguments, x.size):
            return
    i = np.int64  # as the chunk code passes them: numba compiles tiles_range once
    tiles_range(source, target, i(batches), i(rows), i(cols), i(0), i(tiles), i(post))


@jobs.chunk(jobs.TRANSPOSE)
def _tiles_chunk(slot, index, parts):
    """Tiles ``index`` of ``parts`` of the transpose :func:`batched_f32` shares."""
    a = jobs.argument
    batches, rows, cols = a(slot, 2), a(slot, 3), a(slot, 4)
    tiles = tile_count(batches, rows, cols)
    first, last = tiles * index // parts, tiles * (index + 1) // parts
    tiles_range(a(slot, 0), a(slot, 1), batches, rows, cols, first, last, a(slot, 5))


#: What the entry point generated kernels call needs before such a kernel is compiled or
#: loaded (:mod:`vm.kernels.library` prepares it).
NEEDS = {"batched_f32": jobs.Needs(kinds=(jobs.TRANSPOSE,))}

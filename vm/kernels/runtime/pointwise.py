"""Pointwise (1x1, stride 1, unpadded) float32 convolutions by a weight packed in ``NC32n``
panels, straight from the NCHW input: no im2col, no BLAS, no GIL.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numpy, numba and
:mod:`vm.kernels.runtime.jobs`.

A 1x1 convolution's input is its own column matrix: row ``c`` of image ``n`` holds channel
``c`` of every pixel. Each output tile is :data:`vm.kernels.runtime.packed.ROWS` output channels
by 32 pixels (:func:`vm.kernels.runtime.packed.panel_product`), read from 32 contiguous pixels of
every input channel and written as 32 contiguous pixels of each output channel. The work
is a grid of (pixel panel, weight panel) items, in the order that keeps the smaller
operand's panels in cache (:func:`grid`); chunks of items are shared with the polling
workers (:func:`vm.kernels.runtime.jobs.share`). Every output element is one tile's sum over the
channels in order, so the bits do not depend on the number of threads.

MobileNet's expansions (16 to 96 channels at 112x112, 64 to 384 at 14x14) are this shape;
through OpenBLAS from Python they ran at 25-60 GFLOP/s in a model. Planes of 7x7 read
from more than 128 channels, and up to 9x9 from more than 256, run with pixels as the rows
of the tiles instead (:func:`vm.kernels.runtime.products.packed_columns`), which waste no
pixel on a short panel (see :data:`vm.kernels.runtime.convolution.POINTWISE_MIN_PLANE`).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from vm.kernels.runtime import callbacks, jobs, packed, products, symbols, target

_PANEL = packed.PANEL
#: A last pixel panel of fewer pixels than this runs them as the rows of the register
#: tiles (:func:`_short`); a wider one as a pixel panel, through scratch tiles. Intel
#: Xeon with AVX-512 (Emerald Rapids), 2 threads, with a bias and relu, median of four
#: runs, pixel panel against rows: 4 of 196 pixels, 96 to 576 111 -> 106 us, 112 to 672
#: 145 -> 130, 256 to 1024 454 -> 436; but 16 of 784, 24 to 144 31 -> 35, and 17 of 49,
#: 40 to 240 17.7 -> 23.6 (the rows' stores, each alone, outweigh the panel's waste).
SHORT_ROWS = 16
#: Items ahead of the one computed whose output lines are prefetched for writing. A
#: model's big outputs land on memory no layer touched for a whole inference: MobileNetV2's
#: 16 to 96 channels at 112x112 took 300 us with its output in cache, 700-850 without, since
#: each tile's 64 stores to 32 channels each waited for a line (AMD EPYC Zen 4, 2 threads).
#: Owning the lines two items ahead: 540-640 us cold, 315-347 -> 297-315 in the model, and
#: its 32 to 16 channels 136-175 -> 103-121 (alternated runs; no change with the output in
#: cache).
WRITE_AHEAD = 2
#: The deepest pixel panel copied into a contiguous block when its rows alias
#: (:func:`aliasing_rows`): one that fills at most half the first-level data cache. A
#: plane whose rows are a multiple of 4 KB apart (128x128, 64x64, 32x32: DeepLabV3's and
#: SegFormer's 256 and 512 pixel inputs) puts every row of a pixel panel, and every output
#: row of a tile, in the same set of L1 and L2, so the panel was read from L3 again by each
#: tile and the lines owned ahead were evicted before their stores. Copied (once per pixel
#: panel, for the weight panels that follow it) and with nothing owned ahead, in separate
#: processes alternated three times, least times (AMD EPYC Zen 5, AVX-512, 2 threads, with
#: relu6): 16 to 96 channels at 128x128 258-290 -> 180-189 us, 24 to 144 at 64x64 126-149
#: -> 87-92, 32 to 192 at 32x32 50-54 -> 35-36; the neighbouring sizes (127, 129, 63, 65,
#: 31, 33) unchanged. Rows a multiple of 1 KB apart (four sets) gained less alone, 16 to 96
#: at 112x112 (49 KB) 158 -> 144 us and at 48x48 29.6 -> 27.9, and keep their lines owned
#: ahead, which is what MobileNetV2's 112x112 layers gain by in a model (WRITE_AHEAD). A
#: copy for a single weight panel, or one per item of a weight-major grid, cost more than
#: it saved (144 to 24 channels at 64x64, 96 to 576 at 16x16).
COPY_MAX_DEPTH = target.l1_data_bytes() // (2 * _PANEL * 4)


@njit(nogil=True)
def _items(x, plane, k, pw, units, pc, lo, hi, post, ldc):
    """Items ``lo:hi`` of the (pixel panel, weight panel) grid of one image: ``x``, ``pw``
    and ``pc`` are the byte addresses of the image's ``(k, plane)`` input, the packed
    weight and the ``(units, plane)`` output, whose rows are ``ldc`` floats apart;
    ``post`` the epilogue the tiles apply (:func:`vm.kernels.runtime.packed.post_epilogue`),
    or 0."""
    scratch = np.zeros((0, _PANEL), np.float32)
    held = -1
    copied = aliasing_rows(plane) and _PANEL < units <= plane and k <= COPY_MAX_DEPTH
    # _short stores the product before it adds the residual: over the residual itself (an
    # output planned in place of it, see packed.post_epilogue) it would add the product.
    in_place = post != 0 and packed.writes_over_residual(post)
    for item in range(lo, hi):
        p, u = grid(plane, units, item)
        if item + WRITE_AHEAD < hi and not copied:
            _own_tile(pc, plane, units, item + WRITE_AHEAD, ldc)
        first = p * _PANEL
        width = min(_PANEL, plane - first)
        unit = u * _PANEL
        if width < SHORT_ROWS and not in_place:
            _short(x + first * 4, plane, k, pw, units, u, pc + first * 4, width, post, ldc)
            continue
        if width == _PANEL and not copied:
            b = (x + first * 4, plane)
        else:
            # A short panel of many pixels: panel_product reads a whole panel of each row,
            # so the rows are copied into a zero-padded block rather than read past the
            # input. Aliasing rows are copied too (see COPY_MAX_DEPTH).
            if held != p:
                if scratch.shape[0] == 0:
                    scratch = np.zeros((k, _PANEL), np.float32)
                elif width < _PANEL:
                    scratch[:, width:] = 0
                source = products.view_at(x + first * 4, (k, width), (plane * 4, 4))
                # Element by element: an array assignment compiles numba's shape-mismatch
                # message (4-6 s of this loop's compile) for a case that cannot happen.
                for row in range(k):
                    for j in range(width):
                        scratch[row, j] = source[row, j]
                held = p
            b = (np.int64(scratch.ctypes.data), np.int64(_PANEL))
        c = (pc + (unit * ldc + first) * 4, ldc)
        packed.panel_product(pw + unit * k * 4, k, min(_PANEL, units - unit), b, width, c, post,
                             unit)  # fmt: skip


@njit(nogil=True)
def aliasing_rows(plane):
    """Whether rows ``plane`` float32s apart fall into one set of every cache whose ways
    are 4 KB or a multiple of it (rows a multiple of 4 KB apart), so that a pixel panel's
    rows, or a tile's output rows, evict each other before they are used again (see
    :data:`COPY_MAX_DEPTH`)."""
    return (plane * 4) % 4096 == 0


@njit(nogil=True)
def grid(plane, units, item):
    """The (pixel panel, weight panel) of grid item ``item``: pixel-major, so that
    consecutive items reuse a pixel panel while it is in cache, unless the weight is the
    bigger operand (more output channels than pixels): then weight-major, so that each
    thread reads its share of the weight once instead of for every pixel panel.

    A 14x14 plane of 256 to 1024 channels (ResNet-50's) read its 1 MB weight from L3
    for each of its 7 pixel panels: 559-562 us on two threads against 981 on one (AMD
    EPYC Zen 4), weight-major 491; MobileNetV2's 96 to 576 channels at 14x14 120 -> 106
    us, 64 to 384 57-65 -> 49-50. Where the weight stays in L2 (128 to 512 channels at
    28x28, 64 to 256 at 56x56) the two threads already ran 1.98x one."""
    if units > plane:
        pixels = -(-plane // _PANEL)
        return item % pixels, item // pixels
    panels = -(-units // _PANEL)
    return item // panels, item % panels


@njit(nogil=True)
def _own_tile(pc, plane, units, item, ldc):
    """Prefetch for writing the output lines of grid item ``item`` if its pixel panel is
    whole (a short one is stored through scratch or by rows, and is rare)."""
    p, u = grid(plane, units, item)
    first = p * _PANEL
    if plane - first < _PANEL:
        return
    unit = u * _PANEL
    row = pc + (unit * ldc + first) * 4
    for _ in range(min(_PANEL, units - unit)):
        # A panel of 32 float32 pixels: two 64-byte lines, three when unaligned.
        for line in range(row - row % 64, row + _PANEL * 4, 64):
            packed.prefetch_write(line)
        row += ldc * 4


@njit(nogil=True)
def _short(x, plane, k, pw, units, u, pc, width, post, ldc):
    """The last ``width`` (fewer than :data:`SHORT_ROWS`) pixels of a plane by weight
    panel ``u``: ``x`` and ``pc`` the addresses of the first of them in the input and the
    output.

    A pixel panel would cost as much as a whole one (and its copies in and out of scratch
    tiles, since it must not read past the input): the pixels are instead the rows of the
    register tiles (:func:`vm.kernels.runtime.packed.product_range`), a tile
    of ``width`` rows by the panel's output channels, then the epilogue on that block.
    Each element is the same sum in the same order, so the bits are those of the panel."""
    i = np.int64  # the types the products' other callers pass
    a, c = products.addressed(x, 1, plane), products.addressed(pc, 1, ldc)
    packed.product_range(a, i(pw), i(k), i(units), c, (i(0), i(width)), (i(u), i(u + 1)), i(0),
                         i(0))  # fmt: skip
    if post != 0:
        unit = u * _PANEL
        block = (min(_PANEL, units - unit), width)
        packed.apply_post(products.view_at(pc + unit * ldc * 4, block, (ldc * 4, 4)), post, unit)


@njit(nogil=True)
def conv(x, n, weight, out, share, post=0):
    """``out[...]`` = image ``n`` of the 1x1 convolution of float32 NCHW ``x`` (C-contiguous)
    by ``weight``, packed as ``(ceil(units / 32), channels, 32)``; ``out`` a C-contiguous
    ``(units, height * width)``. With ``share``, the work is shared with the polling
    workers. ``post``: the address of an epilogue the tiles apply as they store
    (:func:`vm.kernels.runtime.packed.post_epilogue`), or 0.

    Parameters
    ----------
    x : ndarray
        ``(images, channels, height, width)`` float32.
    n : int
        The image.
    weight : ndarray
        The packed weight.
    out : ndarray
        The image's output, channels by pixels.
    share : bool
        Whether to offer the work to the worker threads.
    post : int
        The epilogue's address, or 0.
    """
    k, plane = x.shape[1], x.shape[2] * x.shape[3]
    units = out.shape[0]
    if units == 0 or plane == 0:
        return
    base = np.int64(x.ctypes.data) + n * k * plane * 4
    pw, pc = np.int64(weight.ctypes.data), np.int64(out.ctypes.data)
    items = -(-plane // _PANEL) * -(-units // _PANEL)
    if share and items > 1:
        arguments = (base, plane, k, pw, units, pc, items, np.int64(post))
        if jobs.share(jobs.POINTWISE, items, arguments, units * k * plane):
            return
    run_items(base, plane, k, pw, units, pc, 0, items, post, plane)


@njit(nogil=True)
def strip(x, plane, k, pw, units, c, ldc):
    """The whole 1x1 product of a ``(k, plane)`` float32 input at byte address ``x`` by the
    packed weight at ``pw`` (``units`` output channels) into output rows ``ldc`` floats
    apart from byte address ``c``, on this thread, without an epilogue: a strip of
    output pixels of a bigger plane, such as one band of a grouped convolution's rows
    (:func:`vm.kernels.runtime.conv_jobs.grouped_columns`)."""
    items = -(-plane // _PANEL) * -(-units // _PANEL)
    run_items(x, plane, k, pw, units, c, 0, items, 0, ldc)


# The items' loop is a C entry point compiled once, which everything that runs a pointwise
# product calls by symbol: numba optimises each compiled function with all it calls linked
# in, so the column blocks' entry point, the grouped convolutions' and the job's chunk code
# each compiled these loops again (7 s each with an empty cache on an AMD EPYC Zen 4), and
# two builder processes compiled them at once (see vm.prebuild). A call per range of items
# costs nanoseconds against the range's tiles.
_ITEMS = types.void(*([types.int64] * 10))


@callbacks.entry(symbols.POINTWISE_ITEMS, _ITEMS, links=(symbols.TILE, symbols.PIXEL_PANELS))
def _items_entry(x, plane, k, pw, units, pc, lo, hi, post, ldc):
    """:func:`_items`, the arguments the same."""
    _items(x, plane, k, pw, units, pc, lo, hi, post, ldc)


#: :func:`_items` by symbol, for compiled code (link ``symbols.POINTWISE_ITEMS`` first).
run_items = types.ExternalFunction(symbols.POINTWISE_ITEMS, _ITEMS)


@jobs.chunk(jobs.POINTWISE, links=(symbols.POINTWISE_ITEMS,))
def _chunk(slot, index, parts):
    """Items ``index`` of ``parts`` of the convolution :func:`conv` shares."""
    a = jobs.argument
    items = a(slot, 6)
    lo, hi = items * index // parts, items * (index + 1) // parts
    if hi > lo:
        run_items(a(slot, 0), a(slot, 1), a(slot, 2), a(slot, 3), a(slot, 4), a(slot, 5), lo, hi,
                  a(slot, 7), a(slot, 1))  # fmt: skip

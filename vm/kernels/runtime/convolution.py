"""Float convolutions whose kernels leave compiled code, and the entry points generated
convolution kernels call.

Runtime layer (``vm.kernels.runtime``); imports numpy, numba and the runtime modules.

numba's own ``np.dot`` needs scipy for its BLAS bindings, which the runtime does not
depend on. Where a convolution wants numpy (a per-thread workspace for its im2col
matrix, float64 data, Winograd's weight transform, a transposed convolution), the
``*_into`` functions at the end of this module leave compiled code through
:mod:`vm.kernels.runtime.bridge` (a few microseconds) and call the plain-Python functions
above them; float32 convolutions by packed weights stay in compiled code where their
column blocks pay (:func:`conv_packed_into`). Generated modules import this module as
``conv``; its source is part of the kernel cache key.

Threads. Products go to :func:`vm.kernels.runtime.products.gemm`, which shares them with
the polling workers through the job slot. What the Python functions split themselves are
convolution steps that cut no sum (the channels of a transform, groups, depthwise
planes) and, for big blocks, ranges of output rows that each build their own columns and
multiply them while they are in cache; those are Python tasks on the workers of
:mod:`vm.kernels.runtime.threads`. Results do not depend on the number of threads: a
block's rows are cut in :data:`vm.kernels.runtime.products.PRODUCT_PARTS` ranges
whatever the thread count, and a Winograd plane is one whole product.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import carray, njit, types
from numba.extending import register_jitable

from vm.kernels.runtime import (
    bridge,
    callbacks,
    conv_jobs,
    conv_loops,
    jobs,
    packed,
    pointwise,
    products,
    symbols,
    threads,
    transpose,
    winograd,
)
from vm.kernels.runtime import depthwise as dwc

#: The epilogue array generated kernels pass to :func:`conv_packed_into`, and its
#: activations.
post_epilogue = packed.post_epilogue
CLAMP, RELU, SWISH, GELU, GELU_TANH = (
    packed.CLAMP,
    packed.RELU,
    packed.SWISH,
    packed.GELU,
    packed.GELU_TANH,
)
GELU_CUBIC = packed.GELU_CUBIC

#: Multiply-adds from which a product is split between threads (about 20 us on one core).
SPLIT_FLOPS = 1 << 21
#: Multiply-adds below which a convolution block builds all its columns on one thread and
#: leaves the product to :func:`vm.kernels.runtime.products.gemm` (see :func:`conv_block`).
SMALL_CONV_FLOPS = 1 << 24


_SCRATCH = threading.local()


def workspace(name: str, size: int, dtype: np.dtype) -> np.ndarray:
    """A flat scratch array of at least ``size`` elements, kept per thread and name and
    grown when needed: a fresh multi-megabyte array per call costs a page fault per 4 KiB
    page when it is first written (about as long as the convolution it serves)."""
    buffers = getattr(_SCRATCH, "buffers", None)
    if buffers is None:
        buffers = _SCRATCH.buffers = {}
    dtype = np.dtype(dtype)
    buffer = buffers.get((name, dtype))
    if buffer is None or buffer.size < size:
        buffer = buffers[name, dtype] = np.empty(max(size, 1), dtype)
    return buffer[:size]


def _ranges(extent: int, flops: int) -> list[tuple[int, int]]:
    """``extent`` cut into contiguous chunks: one if the work is small, else a few per thread
    (so a thread that starts late costs little). Only for splits that cut no sum: the
    cuts follow the thread count."""
    count = threads.threads()
    if flops < SPLIT_FLOPS or count <= 1 or extent < 2:
        return [(0, extent)]
    parts = min(extent, 2 * count)
    return [(extent * i // parts, extent * (i + 1) // parts) for i in range(parts)]


def _fixed_ranges(extent: int, parts: int) -> list[tuple[int, int]]:
    """``extent`` cut into ``parts`` contiguous chunks (at most ``extent``), whatever the
    number of threads: for the output rows or columns of a BLAS product."""
    parts = max(1, min(parts, extent))
    return [(extent * i // parts, extent * (i + 1) // parts) for i in range(parts)]


def conv_block(x, w3, out3, cols, n, g, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w):
    """One (image ``n``, group ``g``) block of a float convolution: im2col into ``cols``
    (skipped when ``cols`` is empty: a 1x1 input is its own column matrix) and
    ``out3[n, group's channels] = w3[g] @ columns``.

    Python tasks on the worker threads cost a GIL hand-over or two each, which in a virtual
    machine can take tens of microseconds, so the product goes to :func:`products.gemm`, whose
    polling workers share it without the GIL, whenever the columns are built first: for
    small blocks (below :data:`SMALL_CONV_FLOPS`, where the tasks cost more than they
    save: a 6.4M multiply-add 1x1 stride-2 block took 230 us on both threads, 110 us so)
    and for blocks with more channels than output pixels (whose im2col is split by input
    channels). Other blocks build the columns of a few output rows at a time, each chunk
    of rows a task that then multiplies them while they are in cache."""
    weights = w3[g]
    og, k = weights.shape
    out = out3[n, g * og : g * og + og]
    plane = out_h * out_w
    direct = cols.size == 0
    source = x[n, g * cg : g * cg + cg].reshape(cg, -1) if direct else cols
    flops = og * k * plane
    with threads.single_threaded_blas():
        if flops < SMALL_CONV_FLOPS or og > plane:
            if not direct:
                # By chunks of input channels: on a 7x7 image the short rows make im2col
                # 0.2-0.4 ms, so every thread helps; a small block keeps it on this one.
                chunks = [(0, cg)] if flops < SMALL_CONV_FLOPS else _ranges(cg, flops)
                taps = kh * kw
                threads.run(
                    [_call(conv_loops.im2col, x, n, g * cg + lo, hi - lo,
                           cols[lo * taps : hi * taps], kh, kw, sh, sw, pt, pl, dh, dw, out_h,
                           out_w, 0, out_h) for lo, hi in chunks]
                )  # fmt: skip
            products.product(weights, source, out)
            return

        fill = conv_loops.im2col_strided if kw > 2 * sw > 2 else conv_loops.im2col

        def rows(r0: int, r1: int):
            def task() -> None:
                if not direct:
                    fill(x, n, g * cg, cg, cols, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w,
                         r0, r1)  # fmt: skip
                lo, hi = r0 * out_w, r1 * out_w
                np.matmul(weights, source[:, lo:hi], out=out[:, lo:hi])

            return task

        # The chunks cut the product's columns: as many whatever the number of threads.
        threads.run([rows(r0, r1) for r0, r1 in _fixed_ranges(out_h, products.PRODUCT_PARTS)])


def conv_image(x, w3, out3, rows, n, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w):
    """Image ``n`` of a float convolution, every group: direct loops shared between the
    threads by groups when each group reads one input channel (depthwise); float32 groups
    of several channels in compiled code, shared by groups
    (:func:`vm.kernels.runtime.conv_jobs.grouped_columns`); else :func:`conv_block` for
    each group, with an im2col matrix of ``rows`` rows (0: the 1x1 input is its own column
    matrix)."""
    groups, og = w3.shape[0], w3.shape[1]
    if groups > 1 and cg > 1 and x.dtype == np.float32 and w3.dtype == np.float32:
        conv_jobs.grouped_columns(x, w3, out3, n, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w)
        return
    plane = out_h * out_w
    cols = workspace("cols", rows * plane, x.dtype).reshape(rows, plane if rows else 0)
    if cg == 1:
        flops = groups * og * kh * kw * out_h * out_w
        threads.run(
            [_call(conv_loops.depthwise, x, w3, out3, n, lo, hi, kh, kw, sh, sw, pt, pl, dh, dw,
                   out_h, out_w) for lo, hi in _ranges(groups, flops)]
        )  # fmt: skip
        return
    for g in range(groups):
        conv_block(x, w3, out3, cols, n, g, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w)


def conv_packed(x, w, out3, rows, n, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, post):
    """Image ``n`` of a float32 convolution by a weight packed in ``NC32n`` panels
    (``nn.contrib_conv2d_gemm_without_weight_transform``): im2row into a matrix of a row of
    ``rows`` elements per output pixel, then the product in register tiles
    (:mod:`vm.kernels.runtime.packed`); when big, both are shared with the polling workers
    without the GIL. Compiled code reaches it only for a convolution with a window whose
    column blocks (:func:`vm.kernels.runtime.conv_jobs.packed_conv`) do not pay: a
    pointwise one (``rows`` 0) always runs in :func:`_conv_blocks` (see
    :func:`conv_packed_into`). ``post``: the address of the epilogue to apply
    (:func:`vm.kernels.runtime.packed.post_epilogue`), or 0.

    Pixels as the rows of the tiles, rather than im2col's columns: a tile then reads
    each of its pixels along ``k`` from one cache line for 16 steps, where across an
    im2col matrix it needs a new line every step (Intel Xeon, Emerald Rapids, one
    thread, the products of ResNet-50's deep 3x3 convolutions: 135-164 GFLOP/s against
    101-118)."""
    plane = out_h * out_w
    source = workspace("cols", rows * plane, x.dtype).reshape(plane, rows)
    share = out3.shape[1] * rows * plane >= SMALL_CONV_FLOPS
    window = ((kh, kw), (sh, sw), (pt, pl), (dh, dw), (out_h, out_w))
    _pixel_rows_conv(x, n, source, w, out3, window, share, post)


@njit(nogil=True, cache=True)
def _pixel_rows_conv(x, n, source, weight, out3, window, share, post):
    """:func:`conv_packed`'s im2row, product and epilogue of image ``n`` in compiled code,
    cached on disk (called from Python); given a copy of the residual if the output is to
    be written over it, since pixel rows store before they add (see :func:`_conv_blocks`).
    Returns True."""
    kernel, stride, pad, dilation, size = window
    conv_jobs.im2row(x, n, source, kernel, stride, pad, dilation, size, share)
    if post == 0 or not packed.writes_over_residual(post):
        products.packed_pixel_rows(source, weight, out3[n], post)
        return True
    kept, moved = _residual_kept(out3, n, post)
    products.packed_pixel_rows(source, weight, out3[n], packed.post_address(moved))
    callbacks.alive(kept, moved)
    return True


@njit(nogil=True)
def _residual_kept(out3, n, post):
    """A copy of image ``n`` of ``out3``, the residual its output is to be written over,
    and a copy of the epilogue at ``post`` that reads the residual from that copy
    (:func:`vm.kernels.runtime.packed.moved_residual`): for a path that stores before it
    adds."""
    kept = out3[n].copy()
    return kept, packed.moved_residual(post, out3.shape[1], kept, out3[n])


#: Column blocks from which :func:`vm.kernels.runtime.conv_jobs.packed_conv` pays: with one or two
#: blocks there is too little to share between threads and im2col then a product wins
#: (ResNet-18's layers, benchmarks/NOTES.md).
MIN_CONV_BLOCKS = 4
#: A 3x3 window read from at least :data:`IM2ROW_MIN_CHANNELS` channels, whose im2row matrix
#: takes at most :data:`IM2ROW_MAX_BYTES`, runs by im2row and one product
#: (:func:`conv_packed`) even where column blocks would take it: its im2row copies 16 pixels'
#: taps at a time (:mod:`vm.kernels.runtime.window_rows`), where a column block copies its
#: im2col a row of output pixels at a time, and its tiles are 7 pixels by a whole panel of 32
#: output channels, where a column block cuts each panel into five tiles of 6 or 7 channels.
#: AMD EPYC Zen 5, two threads, the layer alone with its bias (and relu), column blocks
#: against im2row (ms): 64 to 128 channels at 56x56 stride 2 0.392 -> 0.318, 128 to 64 0.500
#: -> 0.399, 64 to 160 at 64x64 stride 2 0.609 -> 0.557; in SegFormer-B0 (256x256) its 64 to
#: 160 layer 378 -> 245 us (profiled, least of nine). With a bigger matrix the column blocks'
#: cache reuse wins (48 channels at 56x56, 5.4 MB: 0.430 against 0.433; 64 to 96, 7.2 MB:
#: 0.705 against 0.862; 96 channels at 112x112 stride 2, 10.8 MB: 1.84 against 2.93), and so
#: it does for fewer channels: alone, 32 to 64 at 64x64 stride 2 ran 0.147 -> 0.130, but in
#: SegFormer 194 -> 408 us, its im2row and short product (288 deep, two panels) slower there
#: than the blocks; for 3-channel stems and windows other than 3x3 im2row copies a float at
#: a time.
IM2ROW_MIN_CHANNELS = 64
IM2ROW_MAX_BYTES = 4 << 20


@register_jitable
def column_blocks_take(weight_bytes, depth, kernel, out_h, out_w):
    """Whether a float32 convolution by a packed weight of ``weight_bytes`` bytes, ``depth``
    (input channels times window) deep, with a ``kernel`` (height, width) window and an
    ``out_h`` by ``out_w`` output plane (not a pointwise one) runs by column blocks
    (:func:`vm.kernels.runtime.conv_jobs.packed_conv`), each built and multiplied in cache:
    a weight that stays in cache, enough blocks to share, and not a window that im2row
    copies fast into a matrix that stays small (:data:`IM2ROW_MIN_CHANNELS`).
    :func:`_conv_paths` decides by it, and so does ``compiler.transform.alter_op_layout``
    (in plain Python)."""
    if weight_bytes > packed.CACHED_WEIGHT_BYTES:
        return False
    kh, kw = kernel
    if (
        kh == 3
        and kw == 3
        and depth >= 9 * IM2ROW_MIN_CHANNELS
        and out_h * out_w * depth * 4 <= IM2ROW_MAX_BYTES
    ):
        return False
    return conv_jobs.row_blocks(out_h, out_w)[1] >= MIN_CONV_BLOCKS


#: A pointwise convolution runs with pixels as the rows of the register tiles
#: (:func:`vm.kernels.runtime.products.packed_columns`) when its output plane is smaller than one
#: panel of :data:`POINTWISE_MIN_PLANE` pixels (a squeeze-excite block's single pixel); smaller
#: than :data:`POINTWISE_SMALL_PLANE` (7x7) and read from more than :data:`POINTWISE_SMALL_DEPTH`
#: channels; or smaller than :data:`POINTWISE_DEEP_PLANE` (up to 9x9) and read from more than
#: :data:`POINTWISE_DEEP_DEPTH`. All others run in the pixel panels of
#: :func:`vm.kernels.runtime.pointwise.conv`. Those spend a whole panel on a short last one (17
#: pixels of 49, 4 of 196); pixels as rows need a buffer and a transpose, which cost more than that
#: waste on shallow products. Intel Xeon with AVX-512 (Emerald Rapids), 2 threads, a bias and a
#: clamp, a swish or a residual, by pixels against by pixel panels, the least and the median of
#: five runs (us): at 7x7 160 to 960 76/88 against 90/90, 192 to 1152 with a swish 119/133 against
#: 159/163, 2048 to 512 480/500 against 538/545, but 96 to 576 43/59 against 40/41 and 40 to 240
#: 18/19 against 16/17; at 14x14 alone even (1024 to 256 422/493 against 440/444). From 10x10
#: the panels win in a model, where the buffer's transpose applies a residual on the calling
#: thread alone (outputs below transpose.SPLIT_ELEMENTS), and on another Xeon (with AMX, family 6
#: model 167 under KVM, 2 threads) alone too: 1024 to 256 with relu6 at 14x14 487 -> 347 us, at
#: 10x10 275 -> 199, but at 9x9 576 to 96 46 -> 64. There, in a chain of MobileNetV2's 14x14
#: blocks, the 576 to 96 projection with its residual 150-165 -> 126-134 us; in ResNet-50's
#: profile 1024 to 256 at 14x14 636 -> 532 a layer, in EfficientNet-B0's 672 to 112 228 -> 191.
POINTWISE_MIN_PLANE = 32
POINTWISE_SMALL_PLANE = 64
POINTWISE_SMALL_DEPTH = 128
POINTWISE_DEEP_PLANE = 100
POINTWISE_DEEP_DEPTH = 256


@register_jitable
def pointwise_panels_take(plane, depth):
    """Whether a pointwise convolution of an output plane of ``plane`` pixels read from
    ``depth`` channels runs in pixel panels (:func:`vm.kernels.runtime.pointwise.conv`)
    rather than with pixels as the tiles' rows (see :data:`POINTWISE_MIN_PLANE`). Only the
    panels write an output over its residual: :func:`written_over_pays` asks it for the
    memory plan."""
    return not (
        plane < POINTWISE_MIN_PLANE
        or (plane < POINTWISE_SMALL_PLANE and depth > POINTWISE_SMALL_DEPTH)
        or (plane < POINTWISE_DEEP_PLANE and depth > POINTWISE_DEEP_DEPTH)
    )


@register_jitable
def written_over_pays(plane, depth):
    """Whether a pointwise convolution of an output plane of ``plane`` pixels read from
    ``depth`` channels gains by writing its output over its residual, as the memory plan
    may arrange (:mod:`compiler.backend.in_place`, which asks in plain Python): pixel
    panels (:func:`pointwise_panels_take`) whose product runs as one block of ``k``. A
    product in blocks of ``k`` then keeps its partial sums in scratch tiles and copies
    them out, which cost more than the residual's second buffer saved.

    ResNet-50's 64 to 256 channels at 56x56 with its residual, profiled in the model
    (AMD EPYC Zen 4, 32 KB L1, 2 threads, least of twelve runs, two pairs of runs): 605
    -> 545 and 671 -> 546 us a layer written over; its 128 to 512 at 28x28, in two
    blocks of k there, 609 -> 653 (see benchmarks/NOTES.md)."""
    return pointwise_panels_take(plane, depth) and packed.one_k_block(depth)


@njit(nogil=True, cache=True)
def _conv_blocks(x, w, out3, rows, window, post):
    """:func:`_conv_paths`, given a copy of the residual when the output is to be written
    over it (:func:`vm.kernels.runtime.packed.writes_over_residual`) and the path taken is
    not the pixel panels, which alone can: an executable planned so by a version whose
    paths differ still computes the right values."""
    n, out_h, out_w = window[0], window[9], window[10]
    panels = rows == 0 and pointwise_panels_take(out_h * out_w, w.shape[1])
    if post == 0 or panels or not packed.writes_over_residual(post):
        return _conv_paths(x, w, out3, rows, window, post)
    kept, moved = _residual_kept(out3, n, post)
    done = _conv_paths(x, w, out3, rows, window, packed.post_address(moved))
    callbacks.alive(kept, moved)
    return done


@njit(nogil=True)
def _conv_paths(x, w, out3, rows, window, post):
    """A pointwise convolution (``rows`` 0: the 1x1 input is its own column matrix) in
    tiles by pixel panels or by pixels (see :data:`POINTWISE_MIN_PLANE`), without the
    GIL; :func:`vm.kernels.runtime.conv_jobs.packed_conv` for one that
    needs columns by a weight that stays in cache, with enough column blocks to share;
    False (nothing done) for any other. ``post``: the address of the epilogue
    (:func:`vm.kernels.runtime.packed.post_epilogue`), or 0, applied by the tiles as they
    store or (by pixels) to the product's strips while they are in cache."""
    n, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w = window
    if rows == 0:
        plane, depth = out_h * out_w, w.shape[1]
        if not pointwise_panels_take(plane, depth):
            # The tiles read pixel rows: each pixel from one cache line for 16 steps of k,
            # where the channel-major image needed a new line at every step. So the image
            # is transposed first (512 channels at 7x7: 100 KB), unless it is one pixel
            # (squeeze-excite's layers), whose channels already are its row. ResNet-50's
            # 512 to 2048 and 2048 to 512 channels at 7x7 on one thread (AMD EPYC Zen 5,
            # AVX-512, alternated runs): 0.65-0.66 -> 0.58 and 0.58-0.60 -> 0.52 ms.
            pixel_rows = x[n].reshape(plane, depth)
            if plane > 1:
                pixel_rows = np.empty((plane, depth), np.float32)
                transpose.batched_f32(x[n].reshape(depth, plane), pixel_rows, 1, depth, plane)
            products.packed_pixel_rows(pixel_rows, w, out3[n], post)
        else:
            share = out3.shape[1] * plane * depth >= products.PARALLEL_FLOPS
            pointwise.conv(x, n, w, out3[n], share, post)
        return True
    if not column_blocks_take(w.size * 4, w.shape[1], (kh, kw), out_h, out_w):
        return False
    out = out3[n]
    share = out.size * w.shape[1] >= products.PARALLEL_FLOPS
    conv_jobs.packed_conv(
        x, n, w, out, (kh, kw), (sh, sw), (pt, pl), (dh, dw), (out_h, out_w), share, post
    )
    return True


# --- entry points compiled once, called by kernels under fixed symbols ------------------------
#
# numba optimises each kernel's whole module with the code of every function it calls
# linked in: each kernel that multiplied by a packed weight spent 4-10 s compiling
# the register tiles and the column blocks again. Kernels call these C callbacks by
# symbol instead (registered with LLVM, as the BLAS symbols of products are); they are compiled,
# or loaded from numba's cache, once per process, when a kernel calling them is loaded
# (see NEEDS). Each takes the address of an int64 block.
_ENTRY = types.int64(types.int64)
#: Where a convolution's window starts in its block (see :func:`_conv_block`).
_WINDOW_AT = 1 + 7 + 6 + 6


@callbacks.entry(
    symbols.CONV_BLOCKS,
    _ENTRY,
    links=(symbols.TILE, symbols.PIXEL_PANELS, symbols.POINTWISE_ITEMS, symbols.TRANSPOSED),
)
def _conv_blocks_entry(address):
    """:func:`_conv_blocks` on a float32 convolution's block (:func:`_conv_block`): 1
    if it computed the convolution, 0 if it left it to the caller."""
    b = carray(products.int64s(address), (_WINDOW_AT + 14,))
    x = carray(products.floats(b[1]), (b[4], b[5], b[6], b[7]))
    w = carray(products.floats(b[8]), (b[11], b[12], b[13]))
    out3 = carray(products.floats(b[14]), (b[17], b[18], b[19]))
    at = _WINDOW_AT
    window = (b[at + 1], b[at + 3], b[at + 4], b[at + 5], b[at + 6], b[at + 7], b[at + 8],
              b[at + 9], b[at + 10], b[at + 11], b[at + 12])  # fmt: skip
    return 1 if _conv_blocks(x, w, out3, b[at], window, b[at + 13]) else 0


_conv_blocks_symbol = types.ExternalFunction(symbols.CONV_BLOCKS, _ENTRY)


@callbacks.entry(
    symbols.GROUPED, _ENTRY, links=(symbols.POINTWISE_ITEMS, symbols.TRANSPOSED, symbols.TILE)
)
def _grouped_entry(address):
    """:func:`vm.kernels.runtime.conv_jobs.grouped_columns` on the block of :func:`grouped_f32`
    (the depthwise entry points' block, :func:`vm.kernels.runtime.depthwise.entry_block`)."""
    x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, post = dwc.entry_arguments(
        address
    )
    conv_jobs.grouped_columns(x, w3, out3, n, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, post)
    return 1


_grouped_symbol = types.ExternalFunction(symbols.GROUPED, _ENTRY)


def conv_transpose_image(x, w, out, n, groups, kh, kw, sh, sw, pt, pl, dh, dw) -> None:
    """Image ``n`` of a float transposed convolution: per group, every input pixel's
    contribution to every (output channel, kernel offset) by BLAS, then col2im."""
    cg, og = x.shape[1] // groups, w.shape[1]
    height, width = x.shape[2], x.shape[3]
    rows = og * kh * kw
    cols = workspace("cols", rows * height * width, x.dtype).reshape(rows, height * width)
    for g in range(groups):
        conv_transpose_columns(w, g * cg, g * cg + cg, x, n, cols)
        conv_loops.col2im(cols, out, n, g * og, og, kh, kw, sh, sw, pt, pl, dh, dw, height, width)


def conv_winograd(x, w, out3, n, pt, pl, out_h, out_w, post) -> None:
    """Image ``n`` of a 3x3, stride-1, ungrouped float convolution by Winograd F(2x2, 3x3)
    (see :mod:`vm.kernels.runtime.winograd`): transform the weights and the input tiles, 16
    products, transform the output tiles; each step split between threads. ``post``: the
    address of an epilogue to apply to the output (:func:`packed.post_epilogue`), or 0."""
    u = _planes("winograd u", 16, w.shape[0], w.shape[1], w.dtype)
    _winograd(x, w, u, out3, n, pt, pl, out_h, out_w, post)


def conv_winograd_transformed(x, u, out3, n, pt, pl, out_h, out_w, post) -> None:
    """:func:`conv_winograd` with the weights already transformed into ``u`` (16 or 36,
    out channels, in channels: F(2x2, 3x3) or F(4x4, 3x3)), as
    ``nn.contrib_conv2d_winograd_without_weight_transform`` takes them; or, float32, each
    plane packed in ``NC32n`` panels, ``(planes, panels, in channels, 32)``, for the
    register tiles (:func:`_products`)."""
    _winograd(x, None, u, out3, n, pt, pl, out_h, out_w, post)


#: planes -> (tile size, input transform, output transform)
_WINOGRAD = {
    16: (2, winograd.transform_input, winograd.transform_output),
    36: (4, winograd.transform_input4, winograd.transform_output4),
}


def _winograd(x, w, u, out3, n, pt, pl, out_h, out_w, post) -> None:
    in_panels = u.ndim == 4
    if in_panels:
        planes, _, channels, _ = u.shape
        out_channels = out3.shape[1]
    else:
        planes, out_channels, channels = u.shape
    tile, transform_input, transform_output = _WINOGRAD[planes]
    tiles_h, tiles_w = -(-out_h // tile), -(-out_w // tile)
    tiles = tiles_h * tiles_w
    v = _planes("winograd v", planes, channels, tiles, x.dtype)
    m = _planes("winograd m", planes, out_channels, tiles, x.dtype)
    flops = out_channels * channels * tiles * planes
    with threads.single_threaded_blas():
        if w is not None:
            threads.run([_call(winograd.transform_weights, w, u, lo, hi)
                         for lo, hi in _ranges(out_channels, flops)])  # fmt: skip
        float32 = x.dtype == u.dtype == np.float32
        shared = flops >= SPLIT_FLOPS
        window = ((pt, pl), (tiles_h, tiles_w), (out_h, out_w))
        if in_panels:
            if not float32:
                raise TypeError("conv_winograd: a weight packed in panels must be float32")
            # Each plane's panels as one (panels * in channels, 32) matrix: the plain
            # planes' rank, so that one compiled function takes both.
            u = u.reshape(planes, -1, packed.PANEL)
        if float32 and _winograd_compiled(x, n, u, v, m, out3, *window, shared, post, in_panels):
            return
        threads.run([_call(transform_input, x, n, lo, hi, pt, pl, tiles_h, tiles_w, v)
                     for lo, hi in _ranges(channels, flops)])  # fmt: skip
        # Each plane one whole product, whichever thread computes it.
        if u.dtype == v.dtype and all(
            products.blas_reads(plane) for array in (u, v, m) for plane in array
        ):
            threads.run([_call(_plane_range, u, v, m, lo, hi) for lo, hi in _ranges(planes, flops)])
        else:
            threads.run([_call(np.matmul, u[k], v[k], out=m[k]) for k in range(planes)])
        threads.run([_call(transform_output, m, out3, n, lo, hi, tiles_w, out_h, out_w)
                     for lo, hi in _ranges(out_channels, flops)])  # fmt: skip
        if post:
            _apply_post(out3[n], post)


@njit(nogil=True, cache=True)
def _winograd_compiled(x, n, u, v, m, out3, pad, tiles, out, share, post, in_panels):
    """The float32 transforms and products of :func:`_winograd` in compiled code, each
    shared with the polling workers without the GIL (:func:`conv_jobs.winograd_transform`),
    the output's epilogue applied with its transform; False, doing nothing, if BLAS cannot
    read plain planes in place. ``in_panels``: ``u`` holds each plane's weight packed in
    panels (see :func:`_products`)."""
    if not in_panels and not _planes_fit(u, v, m):
        return False
    conv_jobs.winograd_transform(0, x, n, v, m, out3, pad, tiles, out, share)
    _products(u, v, m, share, in_panels)
    conv_jobs.winograd_transform(1, x, n, v, m, out3, pad, tiles, out, share, post)
    return True


@njit(nogil=True, cache=True)
def _apply_post(out, post):
    """:func:`packed.apply_post`, cached on disk (called from Python)."""
    packed.apply_post(out, post)


@njit(nogil=True)
def _products(u, v, m, share, in_panels):
    """``m[k] = u[k] @ v[k]`` for every float32 plane ``k``, the planes shared with the
    polling workers without the GIL when ``share``; the caller retries sharing after each
    plane it did alone, for workers that wake late.

    Plain planes (``u`` ``(planes, out, in)``) are each one whole OpenBLAS call
    (:func:`vm.kernels.runtime.products.whole`), never cut, so that their bits do not
    depend on who computes them. Planes packed in panels (``in_panels``: ``u`` ``(planes,
    panels * in, 32)``) are multiplied by the register tiles with the tiles (pixels) as
    their rows (:func:`vm.kernels.runtime.products.packed_columns`), each output element
    one tile's sum in order. Planes of 256 by 256 channels and 49 tiles (ResNet-50's at
    14x14) took 57 us each through OpenBLAS, which re-packs the weight on every call and
    ran its AVX2 kernels where ``OPENBLAS_CORETYPE=Haswell`` is set, and 27 us by the
    tiles; 64 by 64 channels and 784 tiles 55 -> 31 us, 128 by 128 and 196 tiles 55 -> 28
    us (AMD EPYC Zen 5, AVX-512, one thread)."""
    planes = u.shape[0]
    k = 0
    while k < planes:
        if share and planes - k > 1:
            words = (k, planes, m.shape[1], v.shape[1], v.shape[2],
                     np.int64(u.ctypes.data), u.strides[0], u.strides[1], u.shape[1],
                     np.int64(v.ctypes.data), v.strides[0], v.strides[1],
                     np.int64(m.ctypes.data), m.strides[0], m.strides[1],
                     np.int64(in_panels))  # fmt: skip
            work = (planes - k) * m.shape[1] * v.shape[1] * v.shape[2]
            if jobs.share(jobs.WINOGRAD_PLANES, planes - k, words, work):
                return
        _plane(u, v, m, k, in_panels)
        k += 1


@njit(nogil=True)
def _plane(u, v, m, k, in_panels):
    """Plane ``k`` of :func:`_products` (``u``'s planes C-contiguous where ``in_panels``)."""
    if in_panels:
        depth, lanes = v.shape[1], u.shape[2]
        shape = (u.shape[1] // depth, depth, lanes)
        at = np.int64(u.ctypes.data) + k * u.strides[0]
        weight = products.view_at(at, shape, (depth * lanes * 4, lanes * 4, 4))
        products.packed_columns(v[k], weight, m[k])
    else:
        products.whole(u[k], v[k], m[k])


@jobs.chunk(jobs.WINOGRAD_PLANES, links=(symbols.TRANSPOSED,))
def _planes_chunk(slot, index, parts):
    """Planes ``index`` of ``parts`` of the products :func:`_products` shares through
    :func:`vm.kernels.runtime.jobs.share` (its words, strides in bytes)."""
    a = jobs.argument
    first, planes = a(slot, 0), a(slot, 1)
    rows, depth, cols = a(slot, 2), a(slot, 3), a(slot, 4)
    u_shape = (planes, a(slot, 8), depth if a(slot, 15) == 0 else packed.PANEL)
    u = products.view_at(a(slot, 5), u_shape, (a(slot, 6), a(slot, 7), 4))
    v = products.view_at(a(slot, 9), (planes, depth, cols), (a(slot, 10), a(slot, 11), 4))
    m = products.view_at(a(slot, 12), (planes, rows, cols), (a(slot, 13), a(slot, 14), 4))
    extent = planes - first
    for k in range(first + extent * index // parts, first + extent * (index + 1) // parts):
        _plane(u, v, m, k, a(slot, 15) != 0)


@njit(nogil=True, cache=True)
def _plane_range(u, v, m, lo, hi):
    """``m[k] = u[k] @ v[k]`` for planes ``lo:hi``, each one whole OpenBLAS call (cached on
    disk: called from Python)."""
    for k in range(lo, hi):
        products.whole(u[k], v[k], m[k])


@njit(nogil=True)
def _planes_fit(u, v, m):
    # A loop, not all(...): numba does not compile that generator expression here.
    for k in range(u.shape[0]):
        if not (products.fits(u[k]) and products.fits(v[k]) and products.fits(m[k])):
            return False
    return True


def _planes(name: str, count: int, rows: int, cols: int, dtype: np.dtype) -> np.ndarray:
    """A (count, rows, cols) scratch array whose planes are a cache line apart beyond their
    size: planes a multiple of 4 KiB apart map to the same cache sets, and a transform
    writing one element to each plane in turn would evict its own lines."""
    size = rows * cols
    stride = size + 64 // np.dtype(dtype).itemsize
    storage = workspace(name, count * stride, dtype).reshape(count, stride)
    return storage[:, :size].reshape(count, rows, cols)


def _call(function, *args, **kwargs):
    return lambda: function(*args, **kwargs)


def conv_transpose_columns(w, c0, c1, x, n, cols) -> None:
    """``cols = w[c0:c1]^T @ x[n, c0:c1]`` with both flattened to 2-D: every input pixel's
    contribution to every (output channel, kernel offset) of a transposed convolution."""
    weights = w[c0:c1].reshape(c1 - c0, -1)
    pixels = x[n, c0:c1].reshape(c1 - c0, -1)
    products.matmul(weights.T, pixels, cols)


# --- the entry points compiled code calls ------------------------------------------------------


_CONV_IMAGE = bridge.register(symbols.CONV_IMAGE, conv_image, 3)
_CONV_PACKED = bridge.register(symbols.CONV_PACKED, conv_packed, 3)
_CONV_WINOGRAD = bridge.register(symbols.CONV_WINOGRAD, conv_winograd, 3)
_CONV_WINOGRAD_TRANSFORMED = bridge.register(
    symbols.CONV_WINOGRAD_TRANSFORMED, conv_winograd_transformed, 3
)
_CONV_TRANSPOSE_IMAGE = bridge.register(symbols.CONV_TRANSPOSE_IMAGE, conv_transpose_image, 3)


@njit(nogil=True)
def conv_image_into(x, w3, out3, rows, n, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w):
    """:func:`conv_image` from compiled code."""
    window = (rows, n, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w)
    _conv_into(_CONV_IMAGE, x, w3, out3, window)


@njit(nogil=True)
def grouped_f32(x, w3, out3, n, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, post):
    """Image ``n`` of a float32 convolution of groups of several input channels from
    compiled code (what :func:`conv_image` runs for it), through its entry point: ``w3``
    ``(groups, og, cg * kh * kw)``, ``out3`` a C-contiguous ``(images, groups * og,
    out_h * out_w)``, ``post`` the epilogue to apply as each band of output rows is stored
    (:func:`vm.kernels.runtime.packed.post_epilogue`) or an empty array (an argument, so
    that it lives until the convolution is done)."""
    window = (kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w)
    block, named = dwc.entry_block(x, w3, out3, *window, n, post)
    _grouped_symbol(block.ctypes.data)
    callbacks.alive(block, named)


@njit(nogil=True)
def conv_packed_into(x, w, out3, rows, n, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w,
                     post):  # fmt: skip
    """:func:`conv_packed` from compiled code: column blocks through ``relayvm_conv_blocks``
    where they pay, else through Python for the im2col matrix's workspace. ``post`` is
    the epilogue to apply (:func:`vm.kernels.runtime.packed.post_epilogue`), or an empty
    array for none; it is an argument, so that it lives until the product is done."""
    window = (rows, n, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, packed.post_address(post))
    block, at = _conv_block(x, w, out3, window)
    done = _conv_blocks_symbol(block.ctypes.data)
    callbacks.alive(block)
    if not done:
        bridge.invoke(_CONV_PACKED, block, at)


@njit(nogil=True)
def _conv_into(code, x, w, out3, window):
    block, at = _conv_block(x, w, out3, window)
    bridge.invoke(code, block, at)


@njit(nogil=True)
def _conv_block(x, w, out3, window):
    """The bridge's block for a convolution: the three arrays from word 1, then the
    window (at :data:`_WINDOW_AT` for 4-D data and 3-D weights); and its length."""
    block = np.empty(64, np.int64)
    at = bridge.put(block, 1, x)
    at = bridge.put(block, at, w)
    at = bridge.put(block, at, out3)
    for value in window:
        block[at] = value
        at += 1
    return block, at


@njit(nogil=True)
def conv_winograd_into(x, w, out3, n, pt, pl, out_h, out_w):
    """:func:`conv_winograd` from compiled code."""
    _winograd_into(_CONV_WINOGRAD, x, w, out3, n, pt, pl, out_h, out_w, np.int64(0))


@njit(nogil=True)
def conv_winograd_transformed_into(x, u, out3, n, pt, pl, out_h, out_w, post):
    """:func:`conv_winograd_transformed` from compiled code; ``post`` the epilogue array
    (:func:`packed.post_epilogue`) or an empty one, an argument so that it lives until the
    convolution is done."""
    address = packed.post_address(post)
    _winograd_into(_CONV_WINOGRAD_TRANSFORMED, x, u, out3, n, pt, pl, out_h, out_w, address)


@njit(nogil=True)
def _winograd_into(code, x, w, out3, n, pt, pl, out_h, out_w, post):
    block = np.empty(48, np.int64)
    at = bridge.put(block, 1, x)
    at = bridge.put(block, at, w)
    at = bridge.put(block, at, out3)
    for value in (n, pt, pl, out_h, out_w, post):
        block[at] = value
        at += 1
    bridge.invoke(code, block, at)


@njit(nogil=True)
def conv_transpose_image_into(x, w, out, n, groups, kh, kw, sh, sw, pt, pl, dh, dw):
    """:func:`conv_transpose_image` from compiled code."""
    block = np.empty(64, np.int64)
    at = bridge.put(block, 1, x)
    at = bridge.put(block, at, w)
    at = bridge.put(block, at, out)
    for value in (n, groups, kh, kw, sh, sw, pt, pl, dh, dw):
        block[at] = value
        at += 1
    bridge.invoke(_CONV_TRANSPOSE_IMAGE, block, at)


#: What each entry point above needs before a kernel that calls it is compiled or loaded
#: (:mod:`vm.kernels.library` prepares it): the kinds of job it shares with the workers,
#: itself or through the Python functions it calls, and the C entry points it calls by
#: symbol. A kind left out is never shared (and counted: jobs.unregistered_posts); a
#: symbol left out fails the kernel's link.
NEEDS = {
    "conv_image_into": jobs.Needs(
        (jobs.BLAS, jobs.GROUPED, jobs.PACKED, jobs.TRANSPOSE),
        (symbols.TILE, symbols.PIXEL_PANELS, symbols.POINTWISE_ITEMS, symbols.TRANSPOSED),
    ),
    "grouped_f32": jobs.Needs(
        (jobs.GROUPED, jobs.PACKED, jobs.TRANSPOSE),
        (symbols.POINTWISE_ITEMS, symbols.TRANSPOSED, symbols.GROUPED),
    ),
    "conv_packed_into": jobs.Needs(
        (jobs.CONV, jobs.IM2ROW, jobs.PACKED, jobs.POINTWISE, jobs.TRANSPOSE),
        (
            symbols.TILE,
            symbols.PIXEL_PANELS,
            symbols.TRANSPOSED,
            symbols.CONV_BLOCKS,
        ),
    ),
    "conv_winograd_into": jobs.Needs((jobs.WINOGRAD, jobs.WINOGRAD_PLANES), (symbols.TRANSPOSED,)),
    "conv_winograd_transformed_into": jobs.Needs(
        (jobs.PACKED, jobs.TRANSPOSE, jobs.WINOGRAD, jobs.WINOGRAD_PLANES),
        (symbols.TILE, symbols.TRANSPOSED),
    ),
    "conv_transpose_image_into": jobs.Needs(),
}

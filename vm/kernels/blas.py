"""BLAS calls for generated kernels: numpy's ``matmul`` reached from compiled code, split
between threads.

Runtime layer (``vm.kernels``); imports numpy and numba.

numba's own ``np.dot`` needs scipy for its BLAS bindings, which the runtime does not
depend on, so the jitted functions at the end of this module leave compiled code through
:mod:`vm.kernels.bridge` (a few microseconds, which the kernels only pay for products big
enough to repay it) and call the plain-Python functions above them. Generated modules
import this module as ``blas``; its source is part of the kernel cache key.

Products too small to split, and any product while a worker polls, go straight to OpenBLAS
from compiled code instead and are shared without the GIL (:mod:`vm.kernels.gemm`).
The Python functions run OpenBLAS on one thread per caller and cut a product into chunks
along its longer output dimension, which the caller and :mod:`vm.kernels.threads`' workers
share (see there for why). A convolution's chunks are ranges of output rows, each doing its
own im2col, so the copy is parallel too.

Results do not depend on the number of threads or on which thread takes which chunk:
OpenBLAS rounds a product cut another way differently (see
:data:`vm.kernels.gemm.PRODUCT_PARTS`), so a product's chunks follow its shape only, the
same cuts and calls as :func:`vm.kernels.gemm.gemm` makes for it; a Winograd
convolution's planes are each one whole call, shared between threads by planes. Splits
that cut no sum (channels of a transform, groups, images of a batch) may follow the
thread count.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import carray, njit, types

from vm.kernels import (
    bridge,
    callbacks,
    conv_loops,
    gemm,
    jobs,
    packed,
    pointwise,
    threads,
    winograd,
)

#: Multiply-adds from which a product is split between threads (about 20 us on one core).
SPLIT_FLOPS = 1 << 21
#: Multiply-adds below which a convolution block builds all its columns on one thread and
#: leaves the product to :func:`vm.kernels.gemm.gemm` (see :func:`conv_block`).
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


_BLAS_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _fits(x: np.ndarray) -> bool:
    """Whether BLAS reads 2-D ``x`` in place: :func:`vm.kernels.gemm.fits`, for a float32
    or float64 array whose rows lie a whole row or more apart."""
    if x.dtype not in _BLAS_TYPES or not x.flags.aligned:
        return False
    (rows, cols), (row, col) = x.shape, x.strides
    if cols > 1 and col != x.itemsize:
        return False
    return rows <= 1 or (row % x.itemsize == 0 and row >= max(cols, 1) * x.itemsize)


def _stored(x: np.ndarray, transposed: bool) -> tuple[np.ndarray, bool] | None:
    """``op(x)`` (``x`` transposed if ``transposed``) as an array BLAS reads in place and
    whether BLAS transposes it; ``x`` itself first, as compiled code passes it."""
    if _fits(x):
        return x, transposed
    if _fits(x.T):
        return x.T, not transposed
    return None


def product(
    a: np.ndarray, b: np.ndarray, out: np.ndarray, trans_a: bool = False, trans_b: bool = False
) -> None:
    """``out[...] = op(a) @ op(b)`` for 2-D operands (any strides), ``op`` transposing when
    asked. When BLAS reads the operands in place this is :func:`vm.kernels.gemm.gemm`,
    shared with the polling workers without the GIL (the one way a product is split
    between threads); else numpy's product on this thread."""
    first, second = _stored(a, trans_a), _stored(b, trans_b)
    if (
        first is not None
        and second is not None
        and a.dtype == b.dtype == out.dtype
        and _fits(out)
        and not (np.may_share_memory(out, a) or np.may_share_memory(out, b))
    ):
        (pa, ta), (pb, tb) = first, second
        _gemm(pa, pb, out, ta, tb)
        return
    with threads.single_threaded_blas():
        np.matmul(a.T if trans_a else a, b.T if trans_b else b, out=out)


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = a @ b`` for 2-D operands (any strides); see :func:`product`."""
    product(a, b, out)


@njit(nogil=True, cache=True)
def _gemm(a, b, out, trans_a, trans_b):
    """:func:`vm.kernels.gemm.gemm`, cached on disk: called from Python, it would otherwise
    compile in every process (about 2 s)."""
    gemm.gemm(a, b, out, trans_a, trans_b)


def conv_block(x, w3, out3, cols, n, g, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w):
    """One (image ``n``, group ``g``) block of a float convolution: im2col into ``cols``
    (skipped when ``cols`` is empty: a 1x1 input is its own column matrix) and
    ``out3[n, group's channels] = w3[g] @ columns``.

    Python tasks on the worker threads cost a GIL hand-over or two each, which in a virtual
    machine can take tens of microseconds, so the product goes to :func:`gemm.gemm`, whose
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
            product(weights, source, out)
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
        threads.run([rows(r0, r1) for r0, r1 in _fixed_ranges(out_h, gemm.PRODUCT_PARTS)])


def conv_image(x, w3, out3, rows, n, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w):
    """Image ``n`` of a float convolution, every group: direct loops shared between the
    threads by groups when each group reads one input channel (depthwise), else
    :func:`conv_block` for each group, with an im2col matrix of ``rows`` rows (0: the 1x1
    input is its own column matrix)."""
    groups, og = w3.shape[0], w3.shape[1]
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


def conv_packed(x, w, out3, rows, n, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w):
    """Image ``n`` of a float32 convolution by a weight packed in ``NC32n`` panels
    (``nn.contrib_conv2d_gemm_without_weight_transform``): im2col into a matrix of ``rows``
    rows, then the product in register tiles (:mod:`vm.kernels.packed`); when big, both
    are shared with the polling workers without the GIL (the copy by input channels).
    Compiled code reaches it only for a convolution with a window whose column blocks
    (:func:`vm.kernels.gemm.packed_conv`) do not pay: a pointwise one (``rows`` 0) always
    runs in :func:`_conv_blocks` (see :func:`conv_packed_into`)."""
    plane = out_h * out_w
    out = out3[n]
    source = workspace("cols", rows * plane, x.dtype).reshape(rows, plane)
    share = out.shape[0] * rows * plane >= SMALL_CONV_FLOPS
    _im2col(x, n, source, (kh, kw), (sh, sw), (pt, pl), (dh, dw), (out_h, out_w), share)
    _packed_columns(source, w, out)


#: Column blocks from which :func:`vm.kernels.gemm.packed_conv` pays: with one or two
#: blocks there is too little to share between threads and im2col then a product wins
#: (ResNet-18's layers, benchmarks/NOTES.md).
MIN_CONV_BLOCKS = 4


#: A pointwise convolution's output planes of at most this many pixels run with pixels as
#: the rows of the register tiles (:func:`vm.kernels.gemm.packed_columns`), and so do
#: planes smaller than :data:`POINTWISE_DEEP_PLANE` read from 256 channels or more: a
#: 7x7 plane is two 32-pixel panels for 49 pixels, seven 7-pixel tiles exactly, and there
#: the tiles by pixels ran 20-30% faster (ResNet-50's 2048 to 512 channels, MobileNet's
#: 960 to 160); from 28x28 on, and for thin layers of 14x14, the pixel panels of
#: :func:`vm.kernels.pointwise.conv` tie or win (16 to 96 channels at 112x112: 2.3x).
POINTWISE_MIN_PLANE = 64
POINTWISE_DEEP_PLANE = 256


@njit(nogil=True, cache=True)
def _conv_blocks(x, w, out3, rows, window):
    """A pointwise convolution (``rows`` 0: the 1x1 input is its own column matrix) in
    tiles by pixel panels or by pixels (see :data:`POINTWISE_MIN_PLANE`), without the
    GIL; :func:`vm.kernels.gemm.packed_conv` for one that
    needs columns by a weight that stays in cache, with enough column blocks to share;
    False (nothing done) for any other."""
    n, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w = window
    if rows == 0:
        plane, depth = out_h * out_w, w.shape[1]
        if plane <= POINTWISE_MIN_PLANE or (plane < POINTWISE_DEEP_PLANE and depth >= 256):
            gemm.packed_columns(x[n].reshape(depth, plane), w, out3[n])
        else:
            pointwise.conv(x, n, w, out3[n], out3.shape[1] * plane * depth >= gemm.PARALLEL_FLOPS)
        return True
    if w.size * 4 > packed.CACHED_WEIGHT_BYTES:
        return False
    if gemm.row_blocks(out_h, out_w)[1] < MIN_CONV_BLOCKS:
        return False
    out = out3[n]
    share = out.size * w.shape[1] >= gemm.PARALLEL_FLOPS
    gemm.packed_conv(x, n, w, out, (kh, kw), (sh, sw), (pt, pl), (dh, dw), (out_h, out_w), share)
    return True


@njit(nogil=True, cache=True)
def _im2col(x, n, cols, kernel, stride, pad, dilation, out, share):
    """:func:`vm.kernels.gemm.im2col`, cached on disk (called from Python)."""
    gemm.im2col(x, n, cols, kernel, stride, pad, dilation, out, share)


@njit(nogil=True, cache=True)
def _packed_columns(columns, weight, out):
    """:func:`vm.kernels.gemm.packed_columns`, cached on disk (called from Python)."""
    gemm.packed_columns(columns, weight, out)


# --- entry points compiled once, called by kernels under fixed symbols ------------------------
#
# numba optimises each kernel's whole module with the code of every function it calls
# linked in: each kernel that multiplied by a packed weight spent 4-10 s compiling
# the register tiles and the column blocks again. Kernels call these C callbacks by
# symbol instead (registered with LLVM, as gemm's BLAS symbols are); they are compiled,
# or loaded from numba's cache, once per process, when a kernel calling them is loaded
# (see NEEDS). Each takes the address of an int64 block.
_ENTRY = types.int64(types.int64)
#: Where a convolution's window starts in its block (see :func:`_conv_block`).
_WINDOW_AT = 1 + 7 + 6 + 6


@callbacks.entry("relayvm_conv_blocks", _ENTRY)
def _conv_blocks_entry(address):
    """:func:`_conv_blocks` on a float32 convolution's block (:func:`_conv_block`): 1
    if it computed the convolution, 0 if it left it to the caller."""
    b = carray(gemm.int64s(address), (_WINDOW_AT + 13,))
    x = carray(gemm.floats(b[1]), (b[4], b[5], b[6], b[7]))
    w = carray(gemm.floats(b[8]), (b[11], b[12], b[13]))
    out3 = carray(gemm.floats(b[14]), (b[17], b[18], b[19]))
    at = _WINDOW_AT
    window = (b[at + 1], b[at + 3], b[at + 4], b[at + 5], b[at + 6], b[at + 7], b[at + 8],
              b[at + 9], b[at + 10], b[at + 11], b[at + 12])  # fmt: skip
    return 1 if _conv_blocks(x, w, out3, b[at], window) else 0


@callbacks.entry("relayvm_packed", _ENTRY)
def _packed_entry(address):
    """:func:`vm.kernels.gemm.packed_product` on the block of :func:`packed_into`: the
    data's address, rows, columns and row stride, the weight's address, panels and depth,
    the output's address, columns and row stride."""
    b = carray(gemm.int64s(address), (10,))
    if b[1] > 0 and b[8] > 0:
        x = gemm.view_at(b[0], (b[1], b[2]), (b[3] * 4, 4))
        w = carray(gemm.floats(b[4]), (b[5], b[6], packed.PANEL))
        gemm.packed_product(x, w, gemm.view_at(b[7], (b[1], b[8]), (b[9] * 4, 4)))
    return 1


_conv_blocks_symbol = types.ExternalFunction("relayvm_conv_blocks", _ENTRY)
_packed_symbol = types.ExternalFunction("relayvm_packed", _ENTRY)


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


def conv_winograd(x, w, out3, n, pt, pl, out_h, out_w) -> None:
    """Image ``n`` of a 3x3, stride-1, ungrouped float convolution by Winograd F(2x2, 3x3)
    (see :mod:`vm.kernels.winograd`): transform the weights and the input tiles, 16
    products, transform the output tiles; each step split between threads."""
    u = _planes("winograd u", 16, w.shape[0], w.shape[1], w.dtype)
    _winograd(x, w, u, out3, n, pt, pl, out_h, out_w)


def conv_winograd_transformed(x, u, out3, n, pt, pl, out_h, out_w) -> None:
    """:func:`conv_winograd` with the weights already transformed into ``u`` (16 or 36,
    out channels, in channels: F(2x2, 3x3) or F(4x4, 3x3)), as
    ``nn.contrib_conv2d_winograd_without_weight_transform`` takes them."""
    _winograd(x, None, u, out3, n, pt, pl, out_h, out_w)


#: planes -> (tile size, input transform, output transform)
_WINOGRAD = {
    16: (2, winograd.transform_input, winograd.transform_output),
    36: (4, winograd.transform_input4, winograd.transform_output4),
}


def _winograd(x, w, u, out3, n, pt, pl, out_h, out_w) -> None:
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
        if float32 and _winograd_compiled(
            x, n, u, v, m, out3, (pt, pl), (tiles_h, tiles_w), (out_h, out_w), flops >= SPLIT_FLOPS
        ):
            return
        threads.run([_call(transform_input, x, n, lo, hi, pt, pl, tiles_h, tiles_w, v)
                     for lo, hi in _ranges(channels, flops)])  # fmt: skip
        # Each plane one whole product, whichever thread computes it.
        if u.dtype == v.dtype and all(_fits(plane) for array in (u, v, m) for plane in array):
            threads.run([_call(_plane_range, u, v, m, lo, hi) for lo, hi in _ranges(planes, flops)])
        else:
            threads.run([_call(np.matmul, u[k], v[k], out=m[k]) for k in range(planes)])
        threads.run([_call(transform_output, m, out3, n, lo, hi, tiles_w, out_h, out_w)
                     for lo, hi in _ranges(out_channels, flops)])  # fmt: skip


@njit(nogil=True, cache=True)
def _winograd_compiled(x, n, u, v, m, out3, pad, tiles, out, share):
    """The float32 transforms and products of :func:`_winograd` in compiled code, each
    shared with the polling workers without the GIL (:func:`gemm.winograd_transform`);
    False, doing nothing, if BLAS cannot read the planes in place."""
    if not _planes_fit(u, v, m):
        return False
    gemm.winograd_transform(0, x, n, v, m, out3, pad, tiles, out, share)
    _products(u, v, m, share)
    gemm.winograd_transform(1, x, n, v, m, out3, pad, tiles, out, share)
    return True


@njit(nogil=True)
def _products(u, v, m, share):
    """``m[k] = u[k] @ v[k]`` for every float32 plane ``k``, each one whole OpenBLAS call
    (:func:`vm.kernels.gemm.whole`), the planes shared with the polling workers without
    the GIL when ``share``. A plane is never cut, so its bits do not depend on who
    computes it; the caller retries sharing after each plane it did alone, for workers
    that wake late."""
    planes = u.shape[0]
    k = 0
    while k < planes:
        if share and planes - k > 1:
            words = (k, planes, u.shape[1], u.shape[2], v.shape[2],
                     np.int64(u.ctypes.data), u.strides[0], u.strides[1],
                     np.int64(v.ctypes.data), v.strides[0], v.strides[1],
                     np.int64(m.ctypes.data), m.strides[0], m.strides[1])  # fmt: skip
            work = (planes - k) * u.shape[1] * u.shape[2] * v.shape[2]
            if jobs.share(jobs.WINOGRAD_PLANES, planes - k, words, work):
                return
        gemm.whole(u[k], v[k], m[k])
        k += 1


@jobs.chunk(jobs.WINOGRAD_PLANES)
def _planes_chunk(slot, index, parts):
    """Planes ``index`` of ``parts`` of the products :func:`_products` shares through
    :func:`vm.kernels.jobs.share` (its words, strides in bytes)."""
    a = jobs.argument
    first, planes = a(slot, 0), a(slot, 1)
    rows, depth, cols = a(slot, 2), a(slot, 3), a(slot, 4)
    u = gemm.view_at(a(slot, 5), (planes, rows, depth), (a(slot, 6), a(slot, 7), 4))
    v = gemm.view_at(a(slot, 8), (planes, depth, cols), (a(slot, 9), a(slot, 10), 4))
    m = gemm.view_at(a(slot, 11), (planes, rows, cols), (a(slot, 12), a(slot, 13), 4))
    extent = planes - first
    for k in range(first + extent * index // parts, first + extent * (index + 1) // parts):
        gemm.whole(u[k], v[k], m[k])


@njit(nogil=True, cache=True)
def _plane_range(u, v, m, lo, hi):
    """``m[k] = u[k] @ v[k]`` for planes ``lo:hi``, each one whole OpenBLAS call (cached on
    disk: called from Python)."""
    for k in range(lo, hi):
        gemm.whole(u[k], v[k], m[k])


@njit(nogil=True)
def _planes_fit(u, v, m):
    # A loop, not all(...): numba does not compile that generator expression here.
    for k in range(u.shape[0]):  # noqa: SIM110
        if not (gemm.fits(u[k]) and gemm.fits(v[k]) and gemm.fits(m[k])):
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
    matmul(weights.T, pixels, cols)


# --- the entry points compiled code calls ------------------------------------------------------


_CONV_IMAGE = bridge.register("blas.conv_image", conv_image, 3)
_CONV_PACKED = bridge.register("blas.conv_packed", conv_packed, 3)
_CONV_WINOGRAD = bridge.register("blas.conv_winograd", conv_winograd, 3)
_CONV_WINOGRAD_TRANSFORMED = bridge.register(
    "blas.conv_winograd_transformed", conv_winograd_transformed, 3
)
_CONV_TRANSPOSE_IMAGE = bridge.register("blas.conv_transpose_image", conv_transpose_image, 3)


@njit(nogil=True)
def product_into(x, y, out, transpose_x, transpose_y):
    """``out[...] = op(x) @ op(y)`` for 2-D float32 or float64 operands, ``op`` transposing
    when asked: ``nn.dense`` is ``product_into(x, w, out, False, True)``. Without the GIL,
    shared with the polling workers when big (:func:`vm.kernels.gemm.gemm`)."""
    if not gemm.fits(x):
        x = np.ascontiguousarray(x)
    if not gemm.fits(y):
        y = np.ascontiguousarray(y)
    if gemm.fits(out):
        gemm.gemm(x, y, out, transpose_x, transpose_y)
    else:
        result = np.empty(out.shape, out.dtype)
        gemm.gemm(x, y, result, transpose_x, transpose_y)
        out[...] = result


@njit(nogil=True)
def packed_into(x, w, out):
    """``out[...] = x @ unpacked(w).T`` for float32 ``x`` and a weight ``w`` in 32-wide
    ``NC32n`` panels (see :mod:`vm.kernels.packed`); without the GIL, shared with polling
    workers when big, through ``relayvm_packed``."""
    if x.shape[0] > 1 and x.strides[1] != x.itemsize:
        x = np.ascontiguousarray(x)
    if w.strides[2] != w.itemsize or w.strides[1] != w.shape[2] * w.itemsize:
        w = np.ascontiguousarray(w)
    block = np.empty(10, np.int64)
    words = (np.int64(x.ctypes.data), x.shape[0], x.shape[1], gemm.leading(x),
             np.int64(w.ctypes.data), w.shape[0], w.shape[1], np.int64(out.ctypes.data),
             out.shape[1], gemm.leading(out))  # fmt: skip
    for i in range(len(words)):
        block[i] = words[i]
    _packed_symbol(block.ctypes.data)


@njit(nogil=True)
def matmul_into(x, y, out, transpose_x, transpose_y):
    """``out[...] = op(x) @ op(y)`` for 3-D float32 or float64 stacks, ``op`` swapping the
    last two axes when asked; a stack of one item broadcasts. Without the GIL, the items
    or their parts shared with the polling workers (:func:`vm.kernels.gemm.batched`)."""
    x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
    if out.flags.c_contiguous:
        gemm.batched(x, y, out, transpose_x, transpose_y)
    else:
        result = np.empty(out.shape, out.dtype)
        gemm.batched(x, y, result, transpose_x, transpose_y)
        out[...] = result


@njit(nogil=True)
def conv_image_into(x, w3, out3, rows, n, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w):
    """:func:`conv_image` from compiled code."""
    window = (rows, n, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w)
    _conv_into(_CONV_IMAGE, x, w3, out3, window)


@njit(nogil=True)
def conv_packed_into(x, w, out3, rows, n, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w):
    """:func:`conv_packed` from compiled code: column blocks through ``relayvm_conv_blocks``
    where they pay, else through Python for the im2col matrix's workspace."""
    window = (rows, n, cg, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w)
    block, at = _conv_block(x, w, out3, window)
    if _conv_blocks_symbol(block.ctypes.data):
        return
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
    _winograd_into(_CONV_WINOGRAD, x, w, out3, n, pt, pl, out_h, out_w)


@njit(nogil=True)
def conv_winograd_transformed_into(x, u, out3, n, pt, pl, out_h, out_w):
    """:func:`conv_winograd_transformed` from compiled code."""
    _winograd_into(_CONV_WINOGRAD_TRANSFORMED, x, u, out3, n, pt, pl, out_h, out_w)


@njit(nogil=True)
def _winograd_into(code, x, w, out3, n, pt, pl, out_h, out_w):
    block = np.empty(48, np.int64)
    at = bridge.put(block, 1, x)
    at = bridge.put(block, at, w)
    at = bridge.put(block, at, out3)
    for value in (n, pt, pl, out_h, out_w):
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
    "product_into": jobs.Needs(kinds=(jobs.BLAS,)),
    "matmul_into": jobs.Needs(kinds=(jobs.BLAS, jobs.BATCHED)),
    "packed_into": jobs.Needs((jobs.PACKED,), ("relayvm_packed",)),
    "conv_image_into": jobs.Needs(kinds=(jobs.BLAS,)),
    "conv_packed_into": jobs.Needs(
        (jobs.CONV, jobs.IM2COL, jobs.PACKED, jobs.POINTWISE), ("relayvm_conv_blocks",)
    ),
    "conv_winograd_into": jobs.Needs(kinds=(jobs.WINOGRAD, jobs.WINOGRAD_PLANES)),
    "conv_winograd_transformed_into": jobs.Needs(kinds=(jobs.WINOGRAD, jobs.WINOGRAD_PLANES)),
    "conv_transpose_image_into": jobs.Needs(),
}

"""Matrix products called straight from compiled kernels (numpy's OpenBLAS ``gemm``, the
packed register tiles), and the other work kernels share with the worker threads, no GIL.

Runtime layer (``vm.kernels``); imports numpy, numba, llvmlite, ctypes and
:mod:`vm.kernels.jobs`.

:mod:`vm.kernels.bridge` reaches numpy from compiled code through a ctypes callback, which
takes the GIL and builds arrays in Python: about 25 us a call, as long as the whole
product for a one-row ``dense`` (an MLP at batch 1). Kernels therefore call
``cblas_sgemm``/``cblas_dgemm`` of numpy's own OpenBLAS directly, and share a product of
at least :data:`PARALLEL_FLOPS` multiply-adds with the worker threads of
:mod:`vm.kernels.threads` through the slot of :mod:`vm.kernels.jobs`, without the GIL
on either side. The functions are registered with LLVM under fixed symbols
(``relayvm_sgemm``, ``relayvm_dgemm``, ``relayvm_blas_threads``), so kernels
loaded from numba's disk cache link to them by name in every process, whatever address
they got. OpenBLAS runs on the calling thread only (its thread-local thread count is set
to 1 and restored), as :mod:`vm.kernels.threads` explains.

This module posts other kinds of job than products too: im2col copies, convolutions by
packed weights a block of columns at a time, and Winograd transforms. Each kind's chunk
code is registered with :func:`vm.kernels.jobs.chunk` and compiled only when a kernel
needs it.

numpy 2's wheels ship OpenBLAS with 64-bit integers under ``scipy_``-prefixed names; the
symbols are declared with 64-bit integers to match. Where numpy uses another BLAS, or an
OpenBLAS with 32-bit integers, the symbols are Python callbacks doing the product with
numpy (correct, with the callback's cost).
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import binding
from numba import carray, literal_unroll, njit, types
from numba.extending import intrinsic

from vm.kernels import conv_loops, jobs, packed, winograd
from vm.kernels.openblas import openblas

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112

#: (single, double) precision gemm names of a 64-bit-integer OpenBLAS, most specific first.
_ILP64_NAMES = (
    ("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_"),
    ("cblas_sgemm64_", "cblas_dgemm64_"),
)


def _signature(real: type) -> tuple:
    # order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc
    i32, i64 = ctypes.c_int, ctypes.c_int64
    return (None, i32, i32, i32, i64, i64, i64, real, i64, i64, i64, i64, real, i64, i64)


def _view(address: int, rows: int, cols: int, ld: int, dtype: np.dtype) -> np.ndarray:
    if rows == 0 or cols == 0:
        return np.zeros((rows, cols), dtype)
    count = (rows - 1) * ld + cols
    buffer = (ctypes.c_char * (count * dtype.itemsize)).from_address(address)
    flat = np.frombuffer(buffer, dtype, count)
    return np.lib.stride_tricks.as_strided(
        flat, (rows, cols), (ld * dtype.itemsize, dtype.itemsize)
    )


def _numpy_gemm(dtype: np.dtype):
    """A cblas gemm (row-major only) computed by numpy, for when OpenBLAS is not at hand."""

    def gemm(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        x = _view(a, k, m, lda, dtype).T if trans_a == _TRANS else _view(a, m, k, lda, dtype)
        y = _view(b, n, k, ldb, dtype).T if trans_b == _TRANS else _view(b, k, n, ldb, dtype)
        out = _view(c, m, n, ldc, dtype)
        product = alpha * np.matmul(x, y)
        out[...] = product if beta == 0 else product + beta * out

    return gemm


def _resolve() -> dict[str, int]:
    """Addresses for the three symbols: OpenBLAS's functions, or Python fallbacks."""
    library = openblas()
    if library is not None:
        for single, double in _ILP64_NAMES:
            try:
                sgemm, dgemm = getattr(library, single), getattr(library, double)
                local = library.openblas_set_num_threads_local
            except AttributeError:
                continue
            return {
                "relayvm_sgemm": ctypes.cast(sgemm, ctypes.c_void_p).value,
                "relayvm_dgemm": ctypes.cast(dgemm, ctypes.c_void_p).value,
                "relayvm_blas_threads": ctypes.cast(local, ctypes.c_void_p).value,
            }
    for name, real, dtype in (
        ("relayvm_sgemm", ctypes.c_float, np.dtype(np.float32)),
        ("relayvm_dgemm", ctypes.c_double, np.dtype(np.float64)),
    ):
        _FALLBACKS[name] = ctypes.CFUNCTYPE(*_signature(real))(_numpy_gemm(dtype))
    _FALLBACKS["relayvm_blas_threads"] = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda n: 1)
    return {name: ctypes.cast(f, ctypes.c_void_p).value for name, f in _FALLBACKS.items()}


#: The Python fallbacks, kept alive for as long as compiled code may call them.
_FALLBACKS: dict[str, object] = {}
for _name, _address in _resolve().items():
    binding.add_symbol(_name, _address)


def _gemm_type(real: types.Float) -> types.ExternalFunction:
    i32, i64 = types.int32, types.int64
    return types.void(i32, i32, i32, i64, i64, i64, real, i64, i64, i64, i64, real, i64, i64)


_sgemm = types.ExternalFunction("relayvm_sgemm", _gemm_type(types.float32))
_dgemm = types.ExternalFunction("relayvm_dgemm", _gemm_type(types.float64))
_blas_threads = types.ExternalFunction("relayvm_blas_threads", types.int32(types.int32))


@njit(nogil=True)
def fits(a):
    """Whether BLAS can read 2-D ``a`` in place: its elements are contiguous along rows."""
    return a.shape[1] <= 1 or a.strides[1] == a.itemsize


@njit(nogil=True)
def leading(a):
    """The row stride of 2-D ``a`` in elements, as BLAS takes it: a single row may carry
    any stride; BLAS only asks that it cover the row."""
    if a.shape[0] > 1:
        return a.strides[0] // a.itemsize
    return max(a.shape[1], 1)


# --- jobs shared with the worker threads, without the GIL (vm.kernels.jobs) -----------------

#: Multiply-adds from which a product is shared with polling workers (about 2 us on one core).
#: Small as that is, handing half to a polling worker pays: a one-row product by a
#: 512x128 weight (an LSTM gate step) streams 256 KiB of weights, at L2 bandwidth about
#: 3 us on one core, and each core streams half of it, 4.1 -> 2.9-3.2 us with the handoff.
PARALLEL_FLOPS = 1 << 15

# The words of this module's jobs in the slot. A product job:
_A, _B, _C, _M, _N, _K, _LDA, _LDB, _LDC, _TA, _TB, _ITEMSIZE, _ROWS = range(
    jobs.FIRST_ARGUMENT, jobs.FIRST_ARGUMENT + 13
)
_A_COLS, _C_COLS, _ROWS_OUTER = range(jobs.FIRST_ARGUMENT + 13, jobs.FIRST_ARGUMENT + 16)
# An im2col job: A is the float32 NCHW input, B the column matrix, and these the rest.
_IMAGES, _IMAGE, _CHANNELS, _SIZE, _KERNEL, _STRIDE, _PAD, _DILATION, _OUT, _STRIDED = range(
    jobs.FIRST_ARGUMENT + 16, jobs.FIRST_ARGUMENT + 26
)
# A convolution job (packed_conv) has those words too, and B the packed weight, C the
# output, N its channels, K the weight's depth and M the output rows of a chunk.
# A Winograd transform job (winograd_transform) has the image words too, and these: the
# planes of V and M (see vm.kernels.winograd) at addresses a plane stride apart, the
# (images, channels, pixels) output, and which transform (0 input, by input channels;
# 1 output, by output channels).
_V, _V_STRIDE, _M_PLANES, _M_STRIDE, _OUT3 = _B, _LDA, _C, _LDB, _LDC
_PLANES, _OUT_CHANNELS, _TILES, _PHASE = _M, _N, _KERNEL, _ROWS


@njit(nogil=True)
def _raw(itemsize, ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc):
    if itemsize == 4:
        one, zero = np.float32(1.0), np.float32(0.0)
        _sgemm(_ROW_MAJOR, ta, tb, m, n, k, one, pa, lda, pb, ldb, zero, pc, ldc)
    else:
        _dgemm(_ROW_MAJOR, ta, tb, m, n, k, 1.0, pa, lda, pb, ldb, 0.0, pc, ldc)


def _pointer_codegen(kind):
    pointer = types.CPointer(kind)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(types.int64), codegen


@intrinsic
def floats(typingctx, address):
    """The float32 pointer at byte ``address`` (for :func:`numba.carray`)."""
    return _pointer_codegen(types.float32) if isinstance(address, types.Integer) else None


@intrinsic
def int64s(typingctx, address):
    """The int64 pointer at byte ``address`` (for :func:`numba.carray`)."""
    return _pointer_codegen(types.int64) if isinstance(address, types.Integer) else None


@njit(nogil=True)
def view_at(address, shape, strides):
    """The float32 array of ``shape`` at byte ``address``, ``strides`` in bytes (a job's
    arrays reach the workers as addresses)."""
    extent = 1
    for d in range(len(shape)):
        if shape[d] == 0:
            extent = 0
            break
        extent += (shape[d] - 1) * (strides[d] // 4)
    flat = carray(floats(address), (extent,))
    return np.lib.stride_tricks.as_strided(flat, shape, strides)


@njit(nogil=True)
def _window(slot):
    """The image, channel count, and window of the im2col or convolution job in the slot:
    ``(x, n, channels, (kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w), strided)``."""
    channels = jobs.word(slot, _CHANNELS)
    height, width = jobs.pair(slot, _SIZE)
    kh, kw = jobs.pair(slot, _KERNEL)
    sh, sw = jobs.pair(slot, _STRIDE)
    pt, pl = jobs.pair(slot, _PAD)
    dh, dw = jobs.pair(slot, _DILATION)
    out_h, out_w = jobs.pair(slot, _OUT)
    shape = (jobs.word(slot, _IMAGES), channels, height, width)
    x = carray(floats(jobs.word(slot, _A)), shape)
    window = (kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w)
    return x, jobs.word(slot, _IMAGE), channels, window, jobs.word(slot, _STRIDED) != 0


@njit(nogil=True)
def _fill(x, n, c0, count, cols, window, strided):
    """Rows of channels ``c0:c0+count`` of the im2col matrix ``cols``, every output row."""
    out_h = window[8]
    if strided:
        conv_loops.im2col_strided(x, n, c0, count, cols, *window, 0, out_h)
    else:
        conv_loops.im2col(x, n, c0, count, cols, *window, 0, out_h)


@jobs.chunk(jobs.IM2COL)
def _im2col_chunk(slot, index, parts):
    """Input channels ``index`` of ``parts`` of the im2col job in the slot."""
    x, n, channels, window, strided = _window(slot)
    taps = window[0] * window[1]
    cols = carray(floats(jobs.word(slot, _B)), (channels * taps, window[8] * window[9]))
    lo, hi = channels * index // parts, channels * (index + 1) // parts
    if hi > lo:
        _fill(x, n, lo, hi - lo, cols[lo * taps : hi * taps], window, strided)


#: Where the image and window words of an im2col, convolution or Winograd job go.
_WINDOW_AT = (_A, _IMAGES, _IMAGE, _CHANNELS, _SIZE, _KERNEL, _STRIDE, _PAD, _DILATION, _OUT,
              _STRIDED)  # fmt: skip


@njit(nogil=True)
def _window_words(x, n, window, strided):
    """The words at :data:`_WINDOW_AT` of a job on image ``n`` of ``x`` (see :func:`_window`)."""
    kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w = window
    return (np.int64(x.ctypes.data), np.int64(x.shape[0]), np.int64(n), np.int64(x.shape[1]),
            _two(x.shape[2], x.shape[3]), _two(kh, kw), _two(sh, sw), _two(pt, pl),
            _two(dh, dw), _two(out_h, out_w), np.int64(1 if strided else 0))  # fmt: skip


@njit(nogil=True)
def _geometry(kernel, stride, pad, dilation, out):
    """The window tuple of :func:`_window` from (height, width) pairs, and whether the
    strided im2col copy pays (windows overlapping a lot along a row)."""
    window = (kernel[0], kernel[1], stride[0], stride[1], pad[0], pad[1], dilation[0],
              dilation[1], out[0], out[1])  # fmt: skip
    return window, kernel[1] > 2 * stride[1] > 2


@njit(nogil=True)
def im2col(x, n, cols, kernel, stride, pad, dilation, out, share):
    """The float32 im2col matrix ``cols`` of image ``n`` of NCHW ``x``, every channel (see
    :func:`vm.kernels.conv_loops.im2col`; ``kernel``, ``stride``, ``pad`` (top, left),
    ``dilation`` and ``out`` are (height, width) pairs). With ``share``, split by input
    channels with the polling workers without the GIL, as products are: a Python task per
    chunk would cost GIL hand-overs."""
    window, strided = _geometry(kernel, stride, pad, dilation, out)
    channels = x.shape[1]
    slot = jobs.slot()
    threads = jobs.claim(slot, jobs.IM2COL, 0) if share and channels > 1 else 0
    if threads == 0:
        _fill(x, n, 0, channels, cols, window, strided)
        return
    words = (*_window_words(x, n, window, strided), np.int64(cols.ctypes.data))
    jobs.post(slot, min(2 * threads, channels), jobs.IM2COL, (*_WINDOW_AT, _B), words)


#: Pixels of the column block :func:`packed_conv` builds at a time, about: seven panels
#: of 32, each multiplied by the whole weight while it is in cache.
BLOCK_PIXELS = 7 * packed.PANEL


@njit(nogil=True)
def row_blocks(out_h, out_w):
    """The output rows of each column block of :func:`packed_conv`, and the block count."""
    block = max(1, min(out_h, round(BLOCK_PIXELS / out_w)))
    return block, -(-out_h // block)


@njit(nogil=True)
def packed_conv(x, n, weight, out, kernel, stride, pad, dilation, size, share):
    """``out[...]`` = image ``n`` of the float32 convolution of NCHW ``x`` by a weight
    packed in ``NC32n`` panels of its flattened OIHW form (one group), ``out`` a
    C-contiguous ``(units, out_h * out_w)``; the pairs as for :func:`im2col`.

    The columns are built a block of output rows at a time and multiplied while they are
    in cache, instead of as one im2col matrix written to memory and read back (7.4 MB
    for ResNet-18's first convolution). Each tile is :data:`vm.kernels.packed.ROWS`
    output channels by 32 pixels (:func:`vm.kernels.packed.panel_product`), stored
    straight into the NCHW output rather than transposed through a scratch tile. For a
    weight that stays in cache, that convolution took 1.30-1.36 ms on two threads against
    1.53-1.76 for im2col then product. With ``share``, the blocks are shared with the
    polling workers without the GIL."""
    window, strided = _geometry(kernel, stride, pad, dilation, size)
    k = weight.shape[1]
    block, parts = row_blocks(size[0], size[1])
    units = out.shape[0]
    slot = jobs.slot()
    work = units * k * size[0] * size[1]
    threads = jobs.claim(slot, jobs.CONV, work) if share and parts > 1 else 0
    if threads == 0:
        for index in range(parts):
            _conv_rows(x, n, window, strided, weight.ctypes.data, k, units,
                       out.ctypes.data, index * block, block)  # fmt: skip
        return
    words = (*_window_words(x, n, window, strided), np.int64(weight.ctypes.data),
             np.int64(out.ctypes.data), np.int64(units), np.int64(k), np.int64(block))  # fmt: skip
    jobs.post(slot, parts, jobs.CONV, (*_WINDOW_AT, _B, _C, _N, _K, _M), words)


@njit(nogil=True)
def _conv_rows(x, n, window, strided, pw, k, units, pc, r0, block):
    """Output rows ``r0:r0+block`` (fewer at the end) of :func:`packed_conv`."""
    kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w = window
    rows = min(block, out_h - r0)
    if rows <= 0:
        return
    pixels = rows * out_w
    # A panel's worth of room after the last row: panel_product reads a short last panel
    # whole.
    cols = np.empty(k * pixels + packed.PANEL, np.float32)[: k * pixels].reshape(k, pixels)
    # The block's rows are the output rows of a window whose top padding is shifted down.
    _fill(x, n, 0, x.shape[1], cols, (kh, kw, sh, sw, pt - r0 * sh, pl, dh, dw, rows, out_w),
          strided)  # fmt: skip
    plane = out_h * out_w
    b = (np.int64(cols.ctypes.data), pixels)
    for first in range(0, units, packed.PANEL):
        # The rows of one weight panel are 1 element apart, their k steps a panel apart.
        a = (pw + first * k * 4, 1, packed.PANEL)
        c = (pc + (first * plane + r0 * out_w) * 4, plane)
        packed.panel_product(a, k, min(packed.PANEL, units - first), b, pixels, c)


@njit(nogil=True)
def winograd_transform(phase, x, n, v, m, out3, pad, tiles, out, share):
    """A float32 Winograd transform of image ``n`` (see :mod:`vm.kernels.winograd`): the
    input tiles of NCHW ``x`` into the planes ``v`` (``phase`` 0), or the products ``m``
    into ``out3`` (``phase`` 1). ``v`` and ``m`` are ``(planes, rows, tiles)`` views whose
    planes may lie further apart than their size; ``pad`` (top, left), ``tiles`` and
    ``out`` are (height, width) pairs. With ``share``, split by channels with the polling
    workers without the GIL (each Python task would cost GIL hand-overs)."""
    extent = x.shape[1] if phase == 0 else out3.shape[1]
    slot = jobs.slot()
    threads = jobs.claim(slot, jobs.WINOGRAD, 0) if share and extent > 1 else 0
    if threads == 0:
        _winograd_range(phase, x, n, v, m, out3, pad, tiles, out, 0, extent)
        return
    window = (3, 3, 1, 1, pad[0], pad[1], 1, 1, out[0], out[1])
    words = (*_window_words(x, n, window, False), np.int64(v.ctypes.data),
             np.int64(v.strides[0] // 4), np.int64(m.ctypes.data), np.int64(m.strides[0] // 4),
             np.int64(out3.ctypes.data), np.int64(v.shape[0]), np.int64(out3.shape[1]),
             _two(tiles[0], tiles[1]), np.int64(phase))  # fmt: skip
    at = (*_WINDOW_AT, _V, _V_STRIDE, _M_PLANES, _M_STRIDE, _OUT3, _PLANES, _OUT_CHANNELS,
          _TILES, _PHASE)  # fmt: skip
    jobs.post(slot, min(2 * threads, extent), jobs.WINOGRAD, at, words)


@njit(nogil=True)
def _winograd_range(phase, x, n, v, m, out3, pad, tiles, out, lo, hi):
    """Channels ``lo:hi`` of :func:`winograd_transform`."""
    if phase == 0:
        if v.shape[0] == 16:
            winograd.transform_input(x, n, lo, hi, pad[0], pad[1], tiles[0], tiles[1], v)
        else:
            winograd.transform_input4(x, n, lo, hi, pad[0], pad[1], tiles[0], tiles[1], v)
    elif m.shape[0] == 16:
        winograd.transform_output(m, out3, n, lo, hi, tiles[1], out[0], out[1])
    else:
        winograd.transform_output4(m, out3, n, lo, hi, tiles[1], out[0], out[1])


@jobs.chunk(jobs.WINOGRAD)
def _winograd_chunk(slot, index, parts):
    """Channels ``index`` of ``parts`` of the Winograd transform job in the slot."""
    x, n, channels, window, _ = _window(slot)
    planes, out_channels = jobs.word(slot, _PLANES), jobs.word(slot, _OUT_CHANNELS)
    tiles_h, tiles_w = jobs.pair(slot, _TILES)
    tiles = tiles_h * tiles_w
    out_h, out_w = window[8], window[9]
    v = view_at(jobs.word(slot, _V), (planes, channels, tiles),
                (jobs.word(slot, _V_STRIDE) * 4, tiles * 4, 4))  # fmt: skip
    m = view_at(jobs.word(slot, _M_PLANES), (planes, out_channels, tiles),
                (jobs.word(slot, _M_STRIDE) * 4, tiles * 4, 4))  # fmt: skip
    out3 = carray(floats(jobs.word(slot, _OUT3)), (x.shape[0], out_channels, out_h * out_w))
    phase = jobs.word(slot, _PHASE)
    extent = channels if phase == 0 else out_channels
    lo, hi = extent * index // parts, extent * (index + 1) // parts
    if hi > lo:
        _winograd_range(phase, x, n, v, m, out3, (window[4], window[5]), (tiles_h, tiles_w),
                        (out_h, out_w), lo, hi)  # fmt: skip


@njit(nogil=True)
def _two(high, low):
    return (np.int64(high) << 32) | np.int64(low)


@jobs.chunk(jobs.CONV)
def _conv_chunk(slot, index, parts):
    """Output rows ``index * block`` to ``(index + 1) * block`` of the convolution job in
    the slot."""
    x, n, _, window, strided = _window(slot)
    block = jobs.word(slot, _M)
    _conv_rows(x, n, window, strided, jobs.word(slot, _B), jobs.word(slot, _K),
               jobs.word(slot, _N), jobs.word(slot, _C), index * block, block)  # fmt: skip


@njit(nogil=True)
def _product_words(slot):
    """The product job in the slot: ``(m, n, k, pa, lda, pb, ldb, pc, ldc)``."""
    word = jobs.word
    return (word(slot, _M), word(slot, _N), word(slot, _K), word(slot, _A), word(slot, _LDA),
            word(slot, _B), word(slot, _LDB), word(slot, _C), word(slot, _LDC))  # fmt: skip


@jobs.chunk(jobs.BLAS)
def _blas_chunk(slot, index, parts):
    """Rows or columns ``index`` of ``parts`` of the BLAS product job in the slot, with
    OpenBLAS on this thread only."""
    m, n, k, pa, lda, pb, ldb, pc, ldc = _product_words(slot)
    ta, tb, size = jobs.word(slot, _TA), jobs.word(slot, _TB), jobs.word(slot, _ITEMSIZE)
    product = (ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc, size)
    previous = _blas_threads(1)
    _blas_part(product, jobs.word(slot, _ROWS) != 0, index, parts)
    _blas_threads(previous)


@jobs.chunk(jobs.PACKED)
def _packed_chunk(slot, index, parts):
    """Tiles or panels ``index`` of ``parts`` of the packed product job in the slot."""
    m, n, k, pa, lda, pb, _, pc, ldc = _product_words(slot)
    a = (pa, lda, jobs.word(slot, _A_COLS))
    c = (pc, ldc, jobs.word(slot, _C_COLS))
    _packed_part(a, pb, k, m, n, c, index, parts, jobs.word(slot, _ROWS),
                 jobs.word(slot, _ROWS_OUTER))  # fmt: skip


@njit(nogil=True)
def _blas_part(product, rows, index, parts):
    """Chunk ``index`` of ``parts`` of the BLAS product ``(ta, tb, m, n, k, pa, lda, pb,
    ldb, pc, ldc, itemsize)``: a range of its output rows or columns, one OpenBLAS call."""
    ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc, size = product
    if rows:
        lo, hi = m * index // parts, m * (index + 1) // parts
        pa += (lo if ta == _TRANS else lo * lda) * size
        pc += lo * ldc * size
        m = hi - lo
    else:
        lo, hi = n * index // parts, n * (index + 1) // parts
        pb += (lo * ldb if tb == _TRANS else lo) * size
        pc += lo * size
        n = hi - lo
    if m > 0 and n > 0:
        _raw(size, ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc)


@njit(nogil=True)
def _packed_part(a, pw, k, m, units, c, index, parts, by_rows, rows_outer):
    # Chunks of whole tiles (rows) or panels (columns), so no tile is cut in two.
    panels = -(-units // packed.PANEL)
    if by_rows:
        tiles = -(-m // packed.ROWS)
        lo = tiles * index // parts * packed.ROWS
        hi = min(m, tiles * (index + 1) // parts * packed.ROWS)
        packed.product_range(a, pw, k, units, c, (lo, hi), (0, panels), rows_outer)
    else:
        lo, hi = panels * index // parts, panels * (index + 1) // parts
        packed.product_range(a, pw, k, units, c, (0, m), (lo, hi), rows_outer)


#: Where the words of a product job go (see :func:`_shared`).
_PRODUCT_AT = (_A, _B, _C, _M, _N, _K, _LDA, _LDB, _LDC, _TA, _TB, _ITEMSIZE, _ROWS, _A_COLS,
               _C_COLS, _ROWS_OUTER)  # fmt: skip


@njit(nogil=True)
def _shared(m, n, k, ta, tb, pa, lda, pb, ldb, pc, ldc, itemsize, kind, packing):
    """Share the product with the polling workers; False (nothing done) if none polls or
    another job holds the slot. ``kind`` is :data:`vm.kernels.jobs.BLAS` or
    :data:`vm.kernels.jobs.PACKED`; ``packing`` is a packed product's (column stride of
    a, column stride of c, rows outer), zeros for a BLAS one."""
    slot = jobs.slot()
    threads = jobs.claim(slot, kind, m * n * k)
    if threads == 0:
        return False
    if kind == jobs.PACKED:
        # Whole tiles per chunk, each element's sum in one order whatever the chunks
        # (see vm.kernels.packed), so the chunks may follow the number of threads.
        tiles, panels = -(-m // packed.ROWS), -(-n // packed.PANEL)
        rows = tiles >= panels
        extent = tiles if rows else panels
        parts = min(2 * threads, extent, max(1, m * n * k // (PARALLEL_FLOPS // 2)))
    else:
        rows, parts = partition(m, n, k)
    words = (pa, pb, pc, m, n, k, lda, ldb, ldc, ta, tb, itemsize, 1 if rows else 0,
             packing[0], packing[1], packing[2])  # fmt: skip
    values = np.array([np.int64(w) for w in literal_unroll(words)])
    jobs.post(slot, parts, kind, _PRODUCT_AT, values)
    return True


@njit(nogil=True)
def gemm(a, b, out, trans_a, trans_b):
    """``out[...] = op(a) @ op(b)`` for 2-D float32 or float64 arrays that :func:`fits`,
    ``op`` swapping the axes when asked; without the GIL, shared with polling workers when
    it has at least :data:`PARALLEL_FLOPS` multiply-adds."""
    m, n = out.shape
    k = a.shape[0] if trans_a else a.shape[1]
    if m == 0 or n == 0:
        return
    if k == 0:
        out[...] = 0
        return
    ta = _TRANS if trans_a else _NO_TRANS
    tb = _TRANS if trans_b else _NO_TRANS
    lda, ldb, ldc = leading(a), leading(b), leading(out)
    pa, pb, pc = a.ctypes.data, b.ctypes.data, out.ctypes.data
    parts = partition(m, n, k)[1]
    if parts > 1 and _shared(
        m, n, k, ta, tb, pa, lda, pb, ldb, pc, ldc, out.itemsize, jobs.BLAS, (0, 0, 0)
    ):
        return
    gemm_parts(a, b, out, trans_a, trans_b, 0, parts)


#: The most chunks a product is cut into, whatever the number of threads. OpenBLAS picks a
#: kernel by the shape of each call (small-matrix and direct kernels below sizes of its
#: own, packed panels above), and they add an element's terms in different orders: cut
#: another way, a product differs in the last bits of many elements. So the chunks of a
#: product follow its shape only; threads only choose which chunks they take, and a
#: thread alone takes them all, in the same cuts.
PRODUCT_PARTS = 4


@njit(nogil=True)
def partition(m, n, k):
    """How a product ``(m, k) @ (k, n)`` is cut, whoever computes it: ``(rows, parts)``,
    ``parts`` ranges of output rows (``rows``) or columns, the longer side; one part below
    :data:`PARALLEL_FLOPS` multiply-adds, and none smaller than half of that."""
    rows = m >= n
    if m * n * k < PARALLEL_FLOPS:
        return rows, 1
    extent = m if rows else n
    return rows, max(1, min(PRODUCT_PARTS, extent, m * n * k // (PARALLEL_FLOPS // 2)))


@njit(nogil=True)
def gemm_parts(a, b, out, trans_a, trans_b, first, last):
    """Parts ``first:last`` of :func:`partition`'s cut of :func:`gemm`'s product, on this
    thread (with OpenBLAS on this thread only): what a thread computes for a product
    shared some other way (a Python task per part) equals what :func:`gemm` computes.
    ``k == 0`` zeroes the parts."""
    m, n = out.shape
    k = a.shape[0] if trans_a else a.shape[1]
    if m == 0 or n == 0:
        return
    rows, parts = partition(m, n, k)
    if k == 0:
        for index in range(first, last):
            if rows:
                out[m * index // parts : m * (index + 1) // parts] = 0
            else:
                out[:, n * index // parts : n * (index + 1) // parts] = 0
        return
    ta = _TRANS if trans_a else _NO_TRANS
    tb = _TRANS if trans_b else _NO_TRANS
    product = (ta, tb, m, n, k, np.int64(a.ctypes.data), leading(a), np.int64(b.ctypes.data),
               leading(b), np.int64(out.ctypes.data), leading(out), out.itemsize)  # fmt: skip
    previous = _blas_threads(1)
    for index in range(first, last):
        _blas_part(product, rows, index, parts)
    _blas_threads(previous)


#: Items from which a stack of products is shared by items (each item whole on one thread,
#: in :func:`partition`'s cuts) rather than each item by its parts: one job for the stack
#: instead of a job per item (an attention layer's heads), with a chunk or more per thread.
BATCH_ITEMS = 4


@njit(nogil=True)
def batched(a, b, out, trans_a, trans_b):
    """``out[i] = op(a[i or 0]) @ op(b[i or 0])`` for 3-D float32 or float64 stacks whose
    items :func:`fits` (a stack of one item broadcasts), ``op`` swapping the last two axes
    when asked; without the GIL. From :data:`BATCH_ITEMS` items on, the polling workers
    share the items, else each item's parts (:func:`gemm`). Either way an item is cut as
    :func:`partition` cuts it, so the result does not depend on who computes what."""
    batch, m, n = out.shape
    k = a.shape[1] if trans_a else a.shape[2]
    if batch == 0 or m == 0 or n == 0:
        return
    if k == 0:
        out[...] = 0
        return
    work = batch * m * n * k
    if batch >= BATCH_ITEMS and work >= PARALLEL_FLOPS:
        # A broadcast stack steps by 0 bytes from item to item.
        step_a = a.strides[0] if a.shape[0] > 1 else 0
        step_b = b.strides[0] if b.shape[0] > 1 else 0
        words = (a.ctypes.data, b.ctypes.data, out.ctypes.data, m, n, k, leading(a[0]),
                 leading(b[0]), leading(out[0]), _TRANS if trans_a else _NO_TRANS,
                 _TRANS if trans_b else _NO_TRANS, out.itemsize, step_a, step_b,
                 out.strides[0], batch)  # fmt: skip
        arguments = np.array([np.int64(w) for w in literal_unroll(words)])
        if jobs.share(jobs.BATCHED, batch, arguments, work):
            return
    for i in range(batch):
        gemm(a[i if a.shape[0] > 1 else 0], b[i if b.shape[0] > 1 else 0], out[i], trans_a,
             trans_b)  # fmt: skip


@jobs.chunk(jobs.BATCHED)
def _batched_chunk(slot, index, parts):
    """Items ``index`` of ``parts`` of the stack :func:`batched` shares, each item in every
    part of its :func:`partition` cut, with OpenBLAS on this thread only."""
    a = jobs.argument
    batch = a(slot, 15)
    m, n, k = a(slot, 3), a(slot, 4), a(slot, 5)
    rows, cuts = partition(m, n, k)
    previous = _blas_threads(1)
    for item in range(batch * index // parts, batch * (index + 1) // parts):
        product = (a(slot, 9), a(slot, 10), m, n, k, a(slot, 0) + item * a(slot, 12),
                   a(slot, 6), a(slot, 1) + item * a(slot, 13), a(slot, 7),
                   a(slot, 2) + item * a(slot, 14), a(slot, 8), a(slot, 11))  # fmt: skip
        for part in range(cuts):
            _blas_part(product, rows, part, cuts)
    _blas_threads(previous)


@njit(nogil=True)
def whole(a, b, out):
    """``out[...] = a @ b`` for 2-D float32 or float64 arrays that :func:`fits`, in one
    OpenBLAS call on this thread, never cut: for products whose callers share several of
    them between threads (a Winograd convolution's planes)."""
    m, n = out.shape
    k = a.shape[1]
    if m == 0 or n == 0:
        return
    if k == 0:
        out[...] = 0
        return
    previous = _blas_threads(1)
    _raw(out.itemsize, _NO_TRANS, _NO_TRANS, m, n, k, np.int64(a.ctypes.data), leading(a),
         np.int64(b.ctypes.data), leading(b), np.int64(out.ctypes.data), leading(out))  # fmt: skip
    _blas_threads(previous)


@njit(nogil=True)
def packed_product(a, weight, out):
    """``out[...] = a @ w.T`` for float32 2-D ``a`` and ``out`` whose rows are contiguous
    and ``w`` packed in ``NC32n`` panels (C-contiguous ``(panels, k, 32)``, see
    :mod:`vm.kernels.packed`): a dense layer."""
    m, k = a.shape
    _packed(m, k, out.shape[1], (a.ctypes.data, leading(a), 1), weight,
            (out.ctypes.data, leading(out), 1))  # fmt: skip


@njit(nogil=True)
def packed_columns(columns, weight, out):
    """``out[...] = w @ columns`` for a float32 ``(k, pixels)`` im2col matrix and ``out``
    ``(units, pixels)``, both with contiguous rows, ``w`` packed as for
    :func:`packed_product`: a convolution."""
    k, m = columns.shape
    _packed(m, k, out.shape[0], (columns.ctypes.data, 1, leading(columns)), weight,
            (out.ctypes.data, 1, leading(out)))  # fmt: skip


@njit(nogil=True)
def _packed(m, k, units, a, weight, c):
    # Without the GIL; shared with polling workers from PARALLEL_FLOPS multiply-adds.
    if m == 0 or units == 0:
        return
    pc, c_rows, c_cols = c
    if k == 0:
        for r in range(m):
            for u in range(units):
                packed.store(pc, r * c_rows + u * c_cols, 0.0)
        return
    panels = weight.shape[0]
    rows_outer = 1 if weight.size * 4 <= packed.CACHED_WEIGHT_BYTES else 0
    pa, a_rows, a_cols = a
    pw = weight.ctypes.data
    packing = (a_cols, c_cols, rows_outer)
    if m * units * k >= PARALLEL_FLOPS and _shared(
        m, units, k, 0, 0, pa, a_rows, pw, 0, pc, c_rows, 4, jobs.PACKED, packing
    ):
        return
    packed.product_range(a, pw, k, units, c, (0, m), (0, panels), rows_outer)

"""Jobs of the float32 convolutions that compiled code shares with the worker threads
without the GIL: im2row copies, convolutions by packed weights a block of output rows at
a time, and Winograd transforms.

Runtime layer (``vm.kernels.runtime``); imports numpy, numba and the runtime modules
whose loops the chunks run (:mod:`~vm.kernels.runtime.conv_loops`,
:mod:`~vm.kernels.runtime.packed`, :mod:`~vm.kernels.runtime.pointwise`,
:mod:`~vm.kernels.runtime.transpose`, :mod:`~vm.kernels.runtime.winograd`).

Each function here does its job on the calling thread, or, asked to share it and with
workers polling, posts it to the slot of :mod:`vm.kernels.runtime.jobs` as a kind whose
chunk code is registered below: output rows of an im2row, blocks of output rows of a
convolution, channels of a transform. A Python task per chunk would cost GIL hand-overs.
The splits cut no sum, so the chunks may follow the number of threads.
"""

from __future__ import annotations

import numpy as np
from numba import carray, njit
from numba import uint64 as _u
from numba.extending import register_jitable

from vm.kernels.runtime import (
    callbacks,
    conv_loops,
    jobs,
    packed,
    pointwise,
    products,
    symbols,
    transpose,
    winograd,
)
from vm.kernels.runtime.products import floats, view_at

# The words of this module's jobs in the slot. Every job has the image and window words
# (see _window): the float32 NCHW input, its image count, the image, its channels, its
# size, and the window's kernel, stride, padding, dilation, output size and copy kind.
_X, _IMAGES, _IMAGE, _CHANNELS, _SIZE, _KERNEL, _STRIDE, _PAD, _DILATION, _OUT, _STRIDED = range(
    jobs.FIRST_ARGUMENT, jobs.FIRST_ARGUMENT + 11
)
# An im2row job (im2row): its matrix of pixel rows.
_MATRIX = jobs.FIRST_ARGUMENT + 11
# A convolution job (packed_conv; grouped_columns without the block): the packed (grouped:
# flattened) weight, the output, its channels, the weight's depth, the output rows of a
# chunk and the epilogue.
_WEIGHT, _OUTPUT, _UNITS, _DEPTH, _BLOCK, _POST = range(
    jobs.FIRST_ARGUMENT + 11, jobs.FIRST_ARGUMENT + 17
)
# A Winograd transform job (winograd_transform): the planes of V and M (see
# vm.kernels.runtime.winograd) at addresses a plane stride apart, the (images, channels,
# pixels) output, the plane count, the output channels, the tiles, and which transform
# (0 input, by input channels; 1 output, by output channels), and the output's epilogue.
_V, _V_STRIDE, _M_PLANES, _M_STRIDE, _OUT3, _PLANES, _OUT_CHANNELS, _TILES, _PHASE, _W_POST = range(
    jobs.FIRST_ARGUMENT + 11, jobs.FIRST_ARGUMENT + 21
)


@njit(nogil=True)
def _window(slot):
    """The image, channel count, and window of the im2row or convolution job in the slot:
    ``(x, n, channels, (kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w), strided)``."""
    channels = jobs.word(slot, _CHANNELS)
    height, width = jobs.pair(slot, _SIZE)
    kh, kw = jobs.pair(slot, _KERNEL)
    sh, sw = jobs.pair(slot, _STRIDE)
    pt, pl = jobs.pair(slot, _PAD)
    dh, dw = jobs.pair(slot, _DILATION)
    out_h, out_w = jobs.pair(slot, _OUT)
    shape = (jobs.word(slot, _IMAGES), channels, height, width)
    x = carray(floats(jobs.word(slot, _X)), shape)
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


#: Where the image and window words of an im2row, convolution or Winograd job go.
_WINDOW_AT = (_X, _IMAGES, _IMAGE, _CHANNELS, _SIZE, _KERNEL, _STRIDE, _PAD, _DILATION, _OUT,
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


@jobs.chunk(jobs.IM2ROW)
def _im2row_chunk(slot, index, parts):
    """Output rows ``index`` of ``parts`` of the im2row job in the slot (or in a block
    laid out as it: :func:`vm.kernels.runtime.jobs.run_here`)."""
    x, n, channels, window, _ = _window(slot)
    kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w = window
    lo, hi = out_h * index // parts, out_h * (index + 1) // parts
    if hi > lo:
        rows = carray(floats(jobs.word(slot, _MATRIX)), (out_h * out_w, channels * kh * kw))
        conv_loops.im2row(x, n, rows, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, lo, hi)


@njit(nogil=True)
def im2row(x, n, rows, kernel, stride, pad, dilation, out, share):
    """The float32 matrix ``rows`` of image ``n`` of NCHW ``x``, a row per output pixel
    (see :func:`vm.kernels.runtime.conv_loops.im2row`; ``kernel``, ``stride``, ``pad`` (top,
    left), ``dilation`` and ``out`` are (height, width) pairs); both C-contiguous.
    With ``share``, split by output rows with the polling workers without the GIL. The
    job's chunk code does the copy on this thread too, so its kind must be required
    (:func:`vm.kernels.runtime.jobs.require`)."""
    window, _ = _geometry(kernel, stride, pad, dilation, out)
    shape = (window[8] * window[9], x.shape[1] * window[0] * window[1])
    if not (x.flags.c_contiguous and rows.flags.c_contiguous and rows.shape == shape):
        raise ValueError("im2row: the input and the matrix must be C-contiguous, one row a pixel")
    words = (*_window_words(x, n, window, False), np.int64(rows.ctypes.data))
    jobs.run(jobs.IM2ROW, (*_WINDOW_AT, _MATRIX), words, window[8], 0, share)


@njit(nogil=True, cache=True)
def grouped_columns(x, w3, out3, n, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, post=0):
    """Image ``n`` of a float32 grouped convolution of C-contiguous NCHW ``x`` by ``w3``
    ``(groups, og, cg * kh * kw)`` (each group's OIHW weight flattened) into ``out3``
    ``(images, groups * og, out_h * out_w)``, its groups shared with the polling workers
    (:func:`_grouped_range`); ``post``, when not 0, the address of the epilogue to apply
    (:func:`vm.kernels.runtime.packed.post_epilogue`, a unit an output channel). A
    grouped convolution otherwise ran a group at a time through Python, an im2col matrix
    and a BLAS call each: ResNeXt's and RegNet's groups of 8 to 32 channels at 30-60
    GFLOP/s, 2.4-9.6x onnxruntime's time (AMD EPYC Zen 5).

    The shared units are bands of a group's output rows (:func:`_grouped_plan`), so that
    three groups keep two threads busy, and each band's columns stay in the second-level
    cache between their copy and the product."""
    groups, og, k = w3.shape
    pairs = ((kh, kw), (sh, sw), (pt, pl), (dh, dw), (out_h, out_w))
    window, strided = _geometry(*pairs)
    units = groups * _grouped_plan(og, k // (kh * kw), out_h, out_w)[2]
    slot = jobs.slot()
    threads = jobs.claim(slot, jobs.GROUPED, groups * og * k * out_h * out_w) if units > 1 else 0
    if threads == 0:
        _grouped_range(x, n, window, strided, w3, out3.ctypes.data, np.int64(post), 0, units)
        return
    words = (*_window_words(x, n, window, strided), np.int64(w3.ctypes.data),
             np.int64(out3.ctypes.data), np.int64(groups * og), np.int64(k),
             np.int64(post))  # fmt: skip
    at = (*_WINDOW_AT, _WEIGHT, _OUTPUT, _UNITS, _DEPTH, _POST)
    jobs.post(slot, min(2 * threads, units), jobs.GROUPED, at, words)


#: Output planes smaller than this, of groups of at least a panel of output channels,
#: take pixels as the rows of the register tiles (an im2row matrix, its product stored
#: through a buffer: :func:`vm.kernels.runtime.products.packed_pixel_rows`) rather than
#: as their vectors. One thread, alternated in one process, AMD EPYC Zen 5 (pixel rows
#: against columns): RegNetY's groups of 64 channels at 7x7 0.58x, at 14x14 0.81x, at
#: 28x28 0.96x, at 56x56 1.08x; groups of 32 at 7x7 0.46x, at 14x14 0.75x; groups of 16
#: at 14x14 1.01x and of 8 at 28x28 2.2x (a panel of 32 lanes for 8 channels).
GROUPED_ROWS_MAX_PLANE = 28 * 28


#: Input and output channels a group needs for its window to be read in place
#: (:func:`_window_band`) rather than copied into an im2col matrix: each row of taps is
#: then a product of depth ``kw * cg``, and its tiles' 32 columns are output channels, so
#: a group of fewer than 16 leaves most lanes idle. One thread, AMD EPYC Zen 5, 3x3 with
#: relu, in place against the columns: groups of 64 channels (RegNetY) at 28x28 and
#: above 0.57-0.87x; 16 to 32 at 28x28 0.59-0.78x; 16 to 16 at 28x28 0.70x, 32 to 16 at
#: 14x14 0.41x; 8 to 16 about even; 16 to 8 at 28x28 0.89x but 8 to 8 at 56x56 1.72x. On
#: smaller planes, groups of a panel of output channels and more run by pixel rows
#: (:data:`GROUPED_ROWS_MAX_PLANE`), as fast as in place there (RegNetY's 512 channels at
#: 14x14 and 1088 at 7x7).
WINDOW_MIN_DEPTH = 8
WINDOW_MIN_UNITS = 16


@register_jitable
def _grouped_plan(og, cg, out_h, out_w):
    """How :func:`grouped_columns` runs a group (0: an im2col matrix of each band, its
    pixels the tiles' vectors; 1: an im2row matrix of the whole plane, pixels the tiles'
    rows; 2: the window read in place, pixels the tiles' rows), the output rows of each
    band and the bands per group (plain Python too, for the tests): one band of the whole
    plane by pixel rows (see :data:`GROUPED_ROWS_MAX_PLANE`), else about
    :data:`BLOCK_PIXELS` pixels of whole rows.

    A whole plane's columns (RegNetY's groups of 64 channels: 576 rows of 784 or 3136
    pixels, 1.8 or 7.2 MB) left the second-level cache before the product read them, and
    a layer of three groups ran two on one thread while the other waited (AMD EPYC Zen 4,
    two threads, against onnxruntime: 192 channels at 28x28 1.85x, 128 at 56x56 1.47x)."""
    if og >= packed.PANEL and out_h * out_w < GROUPED_ROWS_MAX_PLANE:
        return 1, out_h, 1
    block, bands = row_blocks(out_h, out_w)
    if og >= WINDOW_MIN_UNITS and cg >= WINDOW_MIN_DEPTH:
        return 2, block, bands
    return 0, block, bands


@njit(nogil=True)
def _grouped_range(x, n, window, strided, w3, out_at, post, lo, hi):
    """Units ``lo:hi`` of :func:`grouped_columns` (``out_at`` the address of ``out3``,
    ``post`` its epilogue or 0), a unit a band of a group's output rows
    (:func:`_grouped_plan`), group by group. Each group's weight is packed into panels
    (:func:`_pack_group`) and multiplied, by the plan: with the im2col matrix of a band of
    its input channels' windows as a pointwise convolution multiplies its input
    (:func:`vm.kernels.runtime.pointwise.strip`: a group's output channels, often 8 or 16,
    are the rows of the register tiles and its pixels their vectors, so no lane idles);
    with its im2row matrix, pixels as the rows, in one band (see
    :data:`GROUPED_ROWS_MAX_PLANE`); or with the band's window read in place, pixels as
    the rows (:func:`_window_band`). A band is the convolution of rows ``r0:r1`` alone:
    its window starts ``r0`` strides lower, the top padding less that much. The epilogue
    is applied to each band as soon as it is stored, while it is in cache, on the thread
    that stored it."""
    groups, og, k = w3.shape
    _, channels, height, width = x.shape
    cg = channels // groups
    kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w = window
    plane = out_h * out_w
    plan, block, bands = _grouped_plan(og, cg, out_h, out_w)
    by_rows, in_place = plan == 1, plan == 2
    cols = np.empty(k * block * out_w if plan == 0 else 0, np.float32)
    rows = np.empty((plane if by_rows else 0, k), np.float32)
    panels = -(-og // packed.PANEL)
    weight = np.zeros((panels, k, packed.PANEL), np.float32)
    # The window's padded rows of a band, and its product's pixel-major buffer.
    pitch = (out_w - 1) * sw + (kw - 1) * dw + 1
    band_rows = (block - 1) * sh + (kh - 1) * dh + 1
    padded = np.zeros(band_rows * pitch * cg if in_place else 0, np.float32)
    product = np.empty((block * out_w if in_place else 0, panels * packed.PANEL), np.float32)
    by_tap = np.empty((panels, kh * kw if in_place else 0, cg, packed.PANEL), np.float32)
    held = -1
    for unit in range(lo, hi):
        g, band = unit // bands, unit % bands
        if g != held:
            _pack_group(w3, g, weight)
            if in_place:
                _panels_by_tap(weight, by_tap)
            held = g
        out_at_g = out_at + (n * groups + g) * og * plane * 4
        if by_rows:
            out = carray(floats(out_at_g), (og, plane))
            first = x.ctypes.data + (n * channels + g * cg) * height * width * 4
            source = carray(floats(first), (1, cg, height, width))
            conv_loops.im2row(source, 0, rows, *window, 0, out_h)
            products.packed_pixel_rows(rows, weight, out)
            packed.apply_post(out, post, g * og)
            continue
        r0 = band * block
        r1 = min(out_h, r0 + block)
        pixels = (r1 - r0) * out_w
        at = out_at_g + r0 * out_w * 4
        part = (kh, kw, sh, sw, pt - r0 * sh, pl, dh, dw, r1 - r0, out_w)
        if in_place:
            _window_band(x, n, g * cg, cg, part, padded, pitch, by_tap, product)
            _transpose_into(product, pixels, og, at, plane)
        else:
            flat = cols[: k * pixels].reshape((k, pixels))
            _fill(x, n, g * cg, cg, flat, part, strided)
            pointwise.strip(np.int64(cols.ctypes.data), pixels, k, np.int64(weight.ctypes.data),
                            og, at, plane)  # fmt: skip
        # Rows a plane apart, of which the band's pixels are the first.
        packed.apply_post(carray(floats(at), (og, plane))[:, :pixels], post, g * og)


@njit(nogil=True)
def _window_band(x, n, c0, cg, window, padded, pitch, weight, product):
    """``product[p, u]`` = output channel ``u`` at pixel ``p`` of the convolution of
    channels ``c0:c0+cg`` of image ``n`` over ``window`` (one band: its rows from 0) by
    ``weight``'s panels of 32 output channels, ``(panels, taps, cg, 32)``
    (:func:`_panels_by_tap`), read from the band's padded rows in place.

    The rows the window covers are copied once into ``padded``, channels last (rows of
    ``pitch`` padded pixels of ``cg`` channels, zero outside the image); each row of taps
    is then one product: its tiles take :data:`vm.kernels.runtime.packed.ROWS` pixels of
    an output row as their rows, read ``sw`` pixels apart (a broadcast each, so a stride
    needs no copy), and a panel's 32 output channels as their columns, over a depth of
    ``kw * cg`` contiguous values (the row's taps, channel by channel; a dilated row a tap
    at a time), the rows of taps summed in the tile's stored accumulators. An im2col
    matrix of the band instead copies each input value ``kh * kw`` times and reads it back
    from L2 (RegNetY's groups of 64 channels: 576 rows of 224 pixels, 516 KB a band).
    Channels first, the padded planes, each tap a product of depth ``cg``, took 13-22%
    longer a band (one thread, AMD EPYC Zen 5)."""
    kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w = window
    _fill_band(x, n, c0, cg, (out_h - 1) * sh + (kh - 1) * dh + 1, pt, pl, padded, pitch)
    taps = kh * kw
    units = product.shape[1]
    i = np.int64
    at_padded, at_weight = i(padded.ctypes.data), i(weight.ctypes.data)
    at_product = i(product.ctypes.data)
    together = dw == 1
    calls = kh if together else taps
    depth = kw * cg if together else cg
    for y in range(out_h):
        for x0 in range(0, out_w, packed.ROWS):
            count = min(packed.ROWS, out_w - x0)
            for p in range(weight.shape[0]):
                pc = at_product + ((y * out_w + x0) * units + p * packed.PANEL) * 4
                for q in range(calls):
                    ky, kx = (q, 0) if together else (q // kw, q % kw)
                    pa = at_padded + ((y * sh + ky * dh) * pitch + x0 * sw + kx * dw) * cg * 4
                    pb = at_weight + (p * taps + ky * kw + kx) * cg * packed.PANEL * 4
                    packed.run_panel(i(count), pa, i(sw * cg), i(1), pb, i(packed.PANEL),
                                     i(depth), pc, i(units), i(1 if q > 0 else 0))  # fmt: skip


@njit(nogil=True)
def _fill_band(x, n, c0, cg, rows, pt, pl, padded, pitch):
    """Rows ``-pt:rows-pt`` of channels ``c0:c0+cg`` of image ``n`` of C-contiguous
    NCHW ``x`` into ``padded``, channels last: ``rows`` rows of ``pitch`` pixels, input
    column ``j`` at pixel ``j + pl``, zero outside the image. Blocks of 16 channels by 16
    columns go through register tiles
    (:func:`vm.kernels.runtime.transpose.tile16`); the last block of a row or of the
    channels, when there are 16 or more, ends at their end, over values the block before
    wrote already (the same ones), so only shorter rows and fewer channels go one value
    at a time."""
    _, channels, height, width = x.shape
    first = max(0, -pl)
    last = max(first, min(width, pitch - pl))
    side = transpose.TILE
    plane = height * width
    xf = x.reshape(x.size)
    i = np.int64
    x_at, at = i(x.ctypes.data), i(padded.ctypes.data)
    line = _u(pitch * cg)
    for r in range(rows):
        # Unsigned indices: no wraparound checks, which keep LLVM from vectorizing.
        row = _u(r) * line
        ih = r - pt
        if ih < 0 or ih >= height or first == last:
            for j in range(line):
                padded[row + j] = 0.0
            continue
        for j in range(_u((first + pl) * cg)):
            padded[row + j] = 0.0
        for j in range(_u((last + pl) * cg), line):
            padded[row + j] = 0.0
        source = ((n * channels + c0) * height + ih) * width
        for col in range(first, last, side):
            if col + side > last and last - first >= side:
                col = last - side
            cols = min(side, last - col)
            for c in range(0, cg, side):
                if c + side > cg and cg >= side:
                    c = cg - side
                src = source + c * plane + col
                dst = (r * pitch + col + pl) * cg + c
                if cols == side and cg - c >= side:
                    transpose.tile16(x_at + src * 4, i(plane), at + dst * 4, i(cg))
                    continue
                for a in range(cols):
                    for b in range(min(side, cg - c)):
                        padded[dst + a * cg + b] = xf[src + b * plane + a]


@njit(nogil=True)
def _panels_by_tap(weight, by_tap):
    """The ``NC32n`` panels of a group's weight (:func:`_pack_group`, depth ``c * taps +
    t``) with their rows in tap order, ``(panels, taps, cg, 32)``: the rows of a row of
    taps then lie together, in the order :func:`_window_band` reads its band (a pixel's
    channels, pixel after pixel). 2-4 us for a group of 64 channels (AMD EPYC Zen 5)."""
    panels, taps, cg, width = by_tap.shape
    source, target = weight.reshape(weight.size), by_tap.reshape(by_tap.size)
    for p in range(panels):
        for c in range(cg):
            for t in range(taps):
                at = _u(((p * cg + c) * taps + t) * width)
                to = _u(((p * taps + t) * cg + c) * width)
                for j in range(_u(width)):
                    target[to + j] = source[at + j]


@njit(nogil=True)
def _transpose_into(product, pixels, units, at, plane):
    """The first ``units`` columns of the first ``pixels`` rows of the pixel-major
    ``product`` into the float32 rows at byte address ``at``, ``plane`` elements apart
    (a band of a group's NCHW output), by register tiles."""
    ld = product.shape[1]
    source = np.int64(product.ctypes.data)
    side = transpose.TILE
    for u0 in range(0, units, side):
        for p0 in range(0, pixels, side):
            if u0 + side <= units and p0 + side <= pixels:
                transpose.tile16(source + (p0 * ld + u0) * 4, ld, at + (u0 * plane + p0) * 4,
                                 plane)  # fmt: skip
                continue
            for u in range(u0, min(units, u0 + side)):
                for p in range(p0, min(pixels, p0 + side)):
                    packed.store(at, u * plane + p, product[p, u])


@njit(nogil=True)
def _pack_group(w3, g, weight):
    """Group ``g``'s ``(og, k)`` weight of ``w3`` into the ``NC32n`` panels of ``weight``
    (zero past ``og``).

    Its whole panels are transposes of ``32 x k`` blocks, done in register tiles
    (:func:`vm.kernels.runtime.transpose.tiles_range`): written an output channel at a
    time, each of a row's ``k`` values went to a cache line of its own, which took a
    fifth of RegNetY's grouped layers at 14x14 and half of those at 7x7 (AMD EPYC Zen 5,
    one thread: 1088 channels in groups of 64 at 7x7 654 -> 389 us, 512 at 14x14 816 ->
    696)."""
    og, k = w3.shape[1], w3.shape[2]
    full = og // packed.PANEL
    contiguous = w3.strides[2] == 4 and w3.strides[1] == k * 4
    if contiguous and full > 0:
        source = np.int64(w3.ctypes.data) + g * w3.strides[0]
        tiles = transpose.tile_count(full, packed.PANEL, k)
        i = np.int64
        transpose.tiles_range(source, i(weight.ctypes.data), full, i(packed.PANEL), k, i(0), tiles,
                              i(0))  # fmt: skip
    else:
        full = 0
    for u in range(full * packed.PANEL, og):
        weight[u // packed.PANEL, :, u % packed.PANEL] = w3[g, u]


@jobs.chunk(jobs.GROUPED, links=(symbols.POINTWISE_ITEMS, symbols.TRANSPOSED, symbols.TILE))
def _grouped_chunk(slot, index, parts):
    """Groups ``index`` of ``parts`` of the convolution :func:`grouped_columns` shares."""
    x, n, channels, window, strided = _window(slot)
    k = jobs.word(slot, _DEPTH)
    groups = channels * window[0] * window[1] // k
    og = jobs.word(slot, _UNITS) // groups
    units = groups * _grouped_plan(og, channels // groups, window[8], window[9])[2]
    lo, hi = units * index // parts, units * (index + 1) // parts
    if hi > lo:
        w3 = carray(floats(jobs.word(slot, _WEIGHT)), (groups, og, k))
        out_at, post = jobs.word(slot, _OUTPUT), jobs.word(slot, _POST)
        _grouped_range(x, n, window, strided, w3, out_at, post, lo, hi)


#: Pixels of the column block :func:`packed_conv` builds at a time, about: seven panels
#: of 32, each multiplied by the whole weight while it is in cache.
BLOCK_PIXELS = 7 * packed.PANEL


@register_jitable
def row_blocks(out_h, out_w):
    """The output rows of each column block of :func:`packed_conv`, and the block count
    (plain Python too: the compiler asks, see
    :func:`vm.kernels.runtime.convolution.column_blocks_take`)."""
    block = max(1, min(out_h, round(BLOCK_PIXELS / out_w)))
    return block, -(-out_h // block)


@njit(nogil=True)
def packed_conv(x, n, weight, out, kernel, stride, pad, dilation, size, share, post=0):
    """``out[...]`` = image ``n`` of the float32 convolution of NCHW ``x`` by a weight
    packed in ``NC32n`` panels of its flattened OIHW form (one group), ``out`` a
    C-contiguous ``(units, out_h * out_w)``; the pairs as for :func:`im2row`; ``post``
    the address of the epilogue the tiles apply (:func:`vm.kernels.runtime.packed.post_epilogue`),
    or 0.

    The columns are built a block of output rows at a time and multiplied while they are
    in cache, instead of as one im2col matrix written to memory and read back (7.4 MB
    for ResNet-18's first convolution). Each tile is :data:`vm.kernels.runtime.packed.ROWS`
    output channels by 32 pixels (:func:`vm.kernels.runtime.packed.panel_product`), stored
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
            # Addresses as int64, as the chunk code reads them: one compile for both.
            _conv_rows(x, n, window, strided, np.int64(weight.ctypes.data), k, units,
                       np.int64(out.ctypes.data), index * block, block, post)  # fmt: skip
        return
    words = (*_window_words(x, n, window, strided), np.int64(weight.ctypes.data),
             np.int64(out.ctypes.data), np.int64(units), np.int64(k), np.int64(block),
             np.int64(post))  # fmt: skip
    at = (*_WINDOW_AT, _WEIGHT, _OUTPUT, _UNITS, _DEPTH, _BLOCK, _POST)
    jobs.post(slot, parts, jobs.CONV, at, words)


@njit(nogil=True)
def _conv_rows(x, n, window, strided, pw, k, units, pc, r0, block, post):
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
        c = (pc + (first * plane + r0 * out_w) * 4, plane)
        packed.panel_product(pw + first * k * 4, k, min(packed.PANEL, units - first), b, pixels, c,
                             post, first)  # fmt: skip
    callbacks.alive(cols)


@njit(nogil=True)
def winograd_transform(phase, x, n, v, m, out3, pad, tiles, out, share, post=0):
    """A float32 Winograd transform of image ``n`` (see :mod:`vm.kernels.runtime.winograd`): the
    input tiles of NCHW ``x`` into the planes ``v`` (``phase`` 0), or the products ``m``
    into ``out3`` (``phase`` 1, then the epilogue at ``post`` on each run of channels, if
    not 0: :func:`vm.kernels.runtime.packed.post_epilogue`). ``v`` and ``m`` are ``(planes,
    rows, tiles)`` views whose planes may lie further apart than their size; ``pad`` (top,
    left), ``tiles`` and ``out`` are (height, width) pairs. With ``share``, split by
    channels with the polling workers without the GIL (each Python task would cost GIL
    hand-overs). The job's chunk code does the transform on this thread too, so its kind
    must be required (:func:`vm.kernels.runtime.jobs.require`)."""
    extent = x.shape[1] if phase == 0 else out3.shape[1]
    if not (x.flags.c_contiguous and out3.flags.c_contiguous and _rows_contiguous(v)
            and _rows_contiguous(m)):  # fmt: skip
        raise ValueError("winograd transform: the arrays must be C-contiguous (planes apart)")
    window = (3, 3, 1, 1, pad[0], pad[1], 1, 1, out[0], out[1])
    words = (*_window_words(x, n, window, False), np.int64(v.ctypes.data),
             np.int64(v.strides[0] // 4), np.int64(m.ctypes.data), np.int64(m.strides[0] // 4),
             np.int64(out3.ctypes.data), np.int64(v.shape[0]), np.int64(out3.shape[1]),
             _two(tiles[0], tiles[1]), np.int64(phase), np.int64(post))  # fmt: skip
    at = (*_WINDOW_AT, _V, _V_STRIDE, _M_PLANES, _M_STRIDE, _OUT3, _PLANES, _OUT_CHANNELS,
          _TILES, _PHASE, _W_POST)  # fmt: skip
    jobs.run(jobs.WINOGRAD, at, words, extent, 0, share)


@njit(nogil=True)
def _rows_contiguous(planes):
    """Whether each plane of the 3-D ``planes`` is C-contiguous (the planes may lie
    further apart), as the job's words describe them."""
    return planes.strides[2] == 4 and planes.strides[1] == planes.shape[2] * 4


@njit(nogil=True)
def _winograd_range(phase, x, n, v, m, out3, pad, tiles, out, lo, hi, post):
    """Channels ``lo:hi`` of :func:`winograd_transform`."""
    if phase == 0:
        if v.shape[0] == 16:
            winograd.transform_input(x, n, lo, hi, pad[0], pad[1], tiles[0], tiles[1], v)
        else:
            winograd.transform_input4(x, n, lo, hi, pad[0], pad[1], tiles[0], tiles[1], v)
        return
    if m.shape[0] == 16:
        winograd.transform_output(m, out3, n, lo, hi, tiles[1], out[0], out[1])
    else:
        winograd.transform_output4(m, out3, n, lo, hi, tiles[1], out[0], out[1])
    # The epilogue while this thread's channels are in its cache.
    packed.apply_post(out3[n, lo:hi], post, lo)


@jobs.chunk(jobs.WINOGRAD)
def _winograd_chunk(slot, index, parts):
    """Channels ``index`` of ``parts`` of the Winograd transform job in the slot (or in a
    block laid out as it: :func:`vm.kernels.runtime.jobs.run_here`)."""
    x, n, channels, window, _ = _window(slot)
    phase, out_channels = jobs.word(slot, _PHASE), jobs.word(slot, _OUT_CHANNELS)
    extent = channels if phase == 0 else out_channels
    lo, hi = extent * index // parts, extent * (index + 1) // parts
    if hi <= lo:
        return
    planes = jobs.word(slot, _PLANES)
    tiles_h, tiles_w = jobs.pair(slot, _TILES)
    tiles = tiles_h * tiles_w
    out_h, out_w = window[8], window[9]
    v = view_at(jobs.word(slot, _V), (planes, channels, tiles),
                (jobs.word(slot, _V_STRIDE) * 4, tiles * 4, 4))  # fmt: skip
    m = view_at(jobs.word(slot, _M_PLANES), (planes, out_channels, tiles),
                (jobs.word(slot, _M_STRIDE) * 4, tiles * 4, 4))  # fmt: skip
    out3 = carray(floats(jobs.word(slot, _OUT3)), (x.shape[0], out_channels, out_h * out_w))
    _winograd_range(phase, x, n, v, m, out3, (window[4], window[5]), (tiles_h, tiles_w),
                    (out_h, out_w), lo, hi, jobs.word(slot, _W_POST))  # fmt: skip


@njit(nogil=True)
def _two(high, low):
    return (np.int64(high) << 32) | np.int64(low)


@jobs.chunk(jobs.CONV, links=(symbols.TILE, symbols.PIXEL_PANELS))
def _conv_chunk(slot, index, parts):
    """Output rows ``index * block`` to ``(index + 1) * block`` of the convolution job in
    the slot."""
    x, n, _, window, strided = _window(slot)
    block = jobs.word(slot, _BLOCK)
    _conv_rows(x, n, window, strided, jobs.word(slot, _WEIGHT), jobs.word(slot, _DEPTH),
               jobs.word(slot, _UNITS), jobs.word(slot, _OUTPUT), index * block, block,
               jobs.word(slot, _POST))  # fmt: skip

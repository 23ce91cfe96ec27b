"""Direct loops for depthwise and narrow grouped float convolutions (NCHW data, OIHW weights).

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numpy, numba,
:mod:`vm.kernels.runtime.products` (pointer views) and :mod:`vm.kernels.runtime.jobs` (whose slot
shares a float32 image's groups with the worker threads). The generated kernels call these functions
(as ``dwc``) from
:mod:`vm.kernels.emit_conv` for every ``nn.conv2d`` with ``groups > 1`` whose groups read
few input channels each.

A depthwise layer does ``kh * kw`` multiply-adds per output element and reads each input
element about as often, so it is bound by loads, not by arithmetic: per group and image,
an im2col matrix plus a product (the ungrouped path) moves ``kh * kw`` times the data for
a product too thin for BLAS to pay. Here each group's input channels are first copied into
a zero-bordered workspace, split by column phase for the stride (phase ``p`` holds padded
columns ``p, p + sw, p + 2 sw, ...``), so that every tap of every output row reads a
contiguous run of the workspace: the innermost loop runs along an output row without
bounds checks or strided loads, and LLVM vectorizes it at the host's vector width (numba
compiles for the CPU it runs on). 3x3 kernels (most depthwise layers) sum all nine taps
per output element in registers; kernels 3 or 5 wide sum one row of taps at a time; other
sizes take one tap at a time; float32 depthwise 3x3 layers with a column stride of 2 and
wide rows sum whole rows split by phase in registers (:func:`_stride2_range`). Depthwise
layers without dilation run a whole plane per
loop instead (:func:`_plane_range`) at stride 1, and at equal strides when their output
rows are short (MobileNet's 14x14 and 7x7 stages); at stride 1, float32 planes with square
3, 5 or 7 kernels sum blocks of output rows in registers
(:func:`vm.kernels.runtime.taps.plane_rows`), each input vector loaded once for all the
rows it serves; dilated ones with short rows run
channels-last (:func:`image_channels_last`), the innermost loop across channels. Small
float32 planes (:data:`CHANNEL_BLOCK_MAX_PLANE`) run in blocks of 16 channels, transposed
to channels last and back by register tiles (:func:`_channel_blocks`).
:func:`image_groups` runs every group of one image, shared
between the calling thread and the polling workers (a job of
:func:`vm.kernels.runtime.jobs.share`, no GIL) when the image is big enough: by groups, or
by bands of output rows when its planes are big and run whole (:data:`ROWS_MIN_PLANE`).
The fused epilogue is applied as each group's or band's output is written.
"""

from __future__ import annotations

import numpy as np
from numba import carray, njit, types
from numba import uint64 as _u

from vm.kernels.runtime import callbacks, jobs, packed, products, symbols, transpose
from vm.kernels.runtime import taps as taps_ir
from vm.kernels.runtime import vecmath as vx

#: Multiply-adds of one image below which its groups run on the calling thread alone:
#: handing a job to the workers costs a few microseconds.
SPLIT_WORK = 1 << 17


@njit(nogil=True, cache=True)
def _geometry(kh, kw, sh, sw, dh, dw, out_h, out_w):
    """Rows of the padded input the output reads, and the width of one column phase."""
    rows = (out_h - 1) * sh + (kh - 1) * dh + 1
    cols = (out_w - 1) * sw + (kw - 1) * dw + 1
    return rows, (cols + sw - 1) // sw


@njit(nogil=True, cache=True)
def workspace_size(cg, kh, kw, sh, sw, dh, dw, out_h, out_w):
    """Elements of the workspace :func:`group_image` needs for ``cg`` channels per group.

    Parameters
    ----------
    cg : int
        Input channels per group.
    kh, kw, sh, sw, dh, dw : int
        Kernel size, strides and dilation.
    out_h, out_w : int
        Output height and width.

    Returns
    -------
    int
        The size of the flat, zero-filled array to pass as ``pad``.
    """
    rows, phase = _geometry(kh, kw, sh, sw, dh, dw, out_h, out_w)
    return cg * rows * sw * phase


@njit(nogil=True, cache=True)
def _fill(x, pad, n, g, cg, sh, sw, pt, pl, rows, phase):
    """Copy group ``g``'s input channels of image ``n`` into the interior of ``pad``.

    Only interior positions are written, the same ones for every group, so the border
    stays as zero as the caller made it.
    """
    _, channels, height, width = x.shape
    xf = x.reshape(x.size)
    row_len = sw * phase
    for c in range(cg):
        src_plane = (n * channels + g * cg + c) * height
        for pr in range(rows):
            ih = pr - pt
            if ih < 0 or ih >= height:
                continue
            src = (src_plane + ih) * width
            dst = (c * rows + pr) * row_len
            if sw == 2 and pad.itemsize == 4 and xf.itemsize == 4:
                _fill_pairs(xf, pad, src, dst, width, pl, phase)
                continue
            for p in range(sw):
                # Padded column k * sw + p is input column k * sw + p - pl.
                k0 = max(0, -((p - pl) // sw))
                k1 = min(phase, -((p - pl - width) // sw))
                if k0 >= k1:
                    continue
                # Unsigned indices: numba then needs no negative-index wraparound, which
                # would keep LLVM from vectorizing.
                s0 = _u(src + k0 * sw + p - pl)
                d0 = _u(dst + p * phase + k0)
                count = _u(k1 - k0)
                if sw == 1:
                    for k in range(count):
                        pad[d0 + k] = xf[s0 + k]
                else:
                    step = _u(sw)
                    for k in range(count):
                        pad[d0 + k] = xf[s0 + k * step]


@njit(nogil=True, cache=True)
def _fill_pairs(xf, pad, src, dst, width, pl, phase):
    """One float32 input row (from ``src``) split by column phase for a stride of 2, the
    even padded columns from ``dst`` and the odd ones ``phase`` further: the pairs of
    input columns by :func:`vm.kernels.runtime.packed.split_pairs`, the column left over
    at either end alone."""
    # Pair m: input columns c0 + 2m (an even padded column) and c0 + 2m + 1 (odd).
    c0 = pl % 2
    base = (c0 + pl) // 2
    pairs = max(0, min((width - c0) // 2, phase - base))
    x_at, pad_at = np.int64(xf.ctypes.data), np.int64(pad.ctypes.data)
    packed.split_pairs(x_at + (src + c0) * 4, pad_at + (dst + base) * 4,
                       pad_at + (dst + phase + base) * 4, pairs)  # fmt: skip
    if c0 == 1 and pl // 2 < phase:
        pad[dst + phase + pl // 2] = xf[src]
    last = c0 + 2 * pairs
    if last < width and last + pl < 2 * phase:
        pad[dst + (last + pl) // 2] = xf[src + last]


@njit(nogil=True, cache=True)
def tap_shifts(kw, sw, dw, out_w):
    """Where each tap column starts within a padded row of :func:`group_image`'s workspace
    (its column phase, then its shift): the same for every group of a convolution."""
    phase = _geometry(1, kw, 1, sw, 1, dw, 1, out_w)[1]
    shifts = np.empty(kw, np.int64)
    for j in range(kw):
        shifts[j] = ((j * dw) % sw) * phase + (j * dw) // sw
    return shifts


@njit(nogil=True, cache=True)
def group_image(x, w3, out3, pad, shifts, n, g, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w):
    """Output channels of group ``g`` of image ``n`` of a grouped float convolution.

    Parameters
    ----------
    x : ndarray
        Data, ``(images, channels, height, width)``, in the compute dtype.
    w3 : ndarray
        Weight viewed as ``(groups, out channels per group, cg * kh * kw)``.
    out3 : ndarray
        Output viewed as ``(images, out channels, out_h * out_w)``; group ``g``'s channels
        of image ``n`` are overwritten.
    pad : ndarray
        Flat workspace of :func:`workspace_size` elements, zero wherever a previous call
        did not write (zero-filled once per kernel call is enough).
    shifts : ndarray
        :func:`tap_shifts` of the convolution.
    n, g : int
        Image and group.
    kh, kw, sh, sw, pt, pl, dh, dw : int
        Kernel size, strides, top and left padding, dilation.
    out_h, out_w : int
        Output height and width.
    """
    _, og, k = w3.shape
    cg = k // (kh * kw)
    rows, phase = _geometry(kh, kw, sh, sw, dh, dw, out_h, out_w)
    row_len = sw * phase
    wf = w3.reshape(w3.size)
    of = out3.reshape(out3.size)
    out_channels = out3.shape[1]
    plane = out_h * out_w
    if kh == 3 and kw == 3 and sw == 2 and dw == 1:
        # Stride 2 with more than one channel a group, or not float32 (float32 depthwise
        # runs as _stride2_range): the rows are copied whole, each output row
        # computed at stride 1 and every other column kept (see _taps3x3_stride2). The
        # phase split of _fill, even with its vector pairs, measured no faster for 3x3 on
        # one thread (144 channels 56 -> 28: 398 against 286 us; 96 of 112 -> 56: 628
        # against 691); for other kernel sizes it wins (5x5: 331 against 347 us).
        cols = (out_w - 1) * 2 + 3
        _fill(x, pad, n, g, cg, sh, 1, pt, pl, rows, cols)
        line = np.empty(2 * out_w, pad.dtype)
        for m in range(og):
            o = g * og + m
            ob = (n * out_channels + o) * plane
            for c in range(cg):
                _taps3x3_stride2(pad, wf, of, (o * cg + c) * 9, c, rows, cols, ob, sh, dh,
                                 out_h, out_w, c, line)  # fmt: skip
        return
    _fill(x, pad, n, g, cg, sh, sw, pt, pl, rows, phase)
    for m in range(og):
        o = g * og + m
        ob = (n * out_channels + o) * plane
        if kh == 3 and kw == 3:
            # The first channel's taps write the plane, the others add to it: no pass
            # zeroing it first.
            for c in range(cg):
                wb = (o * cg + c) * 9
                _taps3x3(pad, wf, of, wb, shifts, c, rows, row_len, ob, sh, dh, out_h, out_w, c)
            continue
        for q in range(_u(plane)):
            of[_u(ob) + q] = 0
        for c in range(cg):
            wb = (o * cg + c) * kh * kw
            width = _u(out_w)
            for r in range(out_h):
                d = _u(ob + r * out_w)
                for i in range(kh):
                    base = (c * rows + r * sh + i * dh) * row_len
                    wi = wb + i * kw
                    if kw == 3:
                        a0 = _u(base + shifts[0])
                        a1 = _u(base + shifts[1])
                        a2 = _u(base + shifts[2])
                        w0, w1, w2 = wf[wi], wf[wi + 1], wf[wi + 2]
                        for q in range(width):
                            of[d + q] += w0 * pad[a0 + q] + w1 * pad[a1 + q] + w2 * pad[a2 + q]
                    elif kw == 5:
                        a0 = _u(base + shifts[0])
                        a1 = _u(base + shifts[1])
                        a2 = _u(base + shifts[2])
                        a3 = _u(base + shifts[3])
                        a4 = _u(base + shifts[4])
                        w0, w1, w2, w3_, w4 = wf[wi], wf[wi + 1], wf[wi + 2], wf[wi + 3], wf[wi + 4]
                        for q in range(width):
                            of[d + q] += (
                                w0 * pad[a0 + q]
                                + w1 * pad[a1 + q]
                                + w2 * pad[a2 + q]
                                + w3_ * pad[a3 + q]
                                + w4 * pad[a4 + q]
                            )
                    else:
                        for j in range(kw):
                            a = _u(base + shifts[j])
                            wv = wf[wi + j]
                            for q in range(width):
                                of[d + q] += wv * pad[a + q]


@njit(nogil=True, cache=True)
def _taps3x3(pad, wf, of, wb, shifts, c, rows, row_len, ob, sh, dh, out_h, out_w, add):
    """One input channel's 3x3 taps, all nine per element at once, written to an output
    plane (``add`` false) or added to it."""
    w00, w01, w02 = wf[wb], wf[wb + 1], wf[wb + 2]
    w10, w11, w12 = wf[wb + 3], wf[wb + 4], wf[wb + 5]
    w20, w21, w22 = wf[wb + 6], wf[wb + 7], wf[wb + 8]
    s1, s2 = _u(shifts[1] - shifts[0]), _u(shifts[2] - shifts[0])
    step = _u(dh * row_len)
    width = _u(out_w)
    for r in range(out_h):
        d = _u(ob + r * out_w)
        a0 = _u((c * rows + r * sh) * row_len + shifts[0])
        a1 = a0 + step
        a2 = a1 + step
        if not add:
            for q in range(width):
                of[d + q] = (
                    w00 * pad[a0 + q]
                    + w01 * pad[a0 + s1 + q]
                    + w02 * pad[a0 + s2 + q]
                    + w10 * pad[a1 + q]
                    + w11 * pad[a1 + s1 + q]
                    + w12 * pad[a1 + s2 + q]
                    + w20 * pad[a2 + q]
                    + w21 * pad[a2 + s1 + q]
                    + w22 * pad[a2 + s2 + q]
                )
            continue
        for q in range(width):
            of[d + q] += (
                w00 * pad[a0 + q]
                + w01 * pad[a0 + s1 + q]
                + w02 * pad[a0 + s2 + q]
                + w10 * pad[a1 + q]
                + w11 * pad[a1 + s1 + q]
                + w12 * pad[a1 + s2 + q]
                + w20 * pad[a2 + q]
                + w21 * pad[a2 + s1 + q]
                + w22 * pad[a2 + s2 + q]
            )


@njit(nogil=True, cache=True)
def _taps3x3_stride2(pad, wf, of, wb, c, rows, cols, ob, sh, dh, out_h, out_w, add, line):
    """:func:`_taps3x3` with a column stride of 2, on whole padded rows of ``cols``.

    Every column of a row is computed at stride 1 into ``line`` (at least ``2 * out_w``
    elements), then every other one is kept: twice the multiply-adds, but in contiguous
    loads that vectorize, where reading every other element in the sum does not (LLVM
    makes each such load a gather here, 2.8 GFLOP/s against about 35).
    """
    w00, w01, w02 = wf[wb], wf[wb + 1], wf[wb + 2]
    w10, w11, w12 = wf[wb + 3], wf[wb + 4], wf[wb + 5]
    w20, w21, w22 = wf[wb + 6], wf[wb + 7], wf[wb + 8]
    step = _u(dh * cols)
    width = _u(out_w)
    full = _u(2 * out_w - 1)
    # Unsigned constants: uint64 plus a plain int would be a float64 index.
    one, two = _u(1), _u(2)
    for r in range(out_h):
        d = _u(ob + r * out_w)
        a0 = _u((c * rows + r * sh) * cols)
        a1 = a0 + step
        a2 = a1 + step
        for e in range(full):
            line[e] = (
                w00 * pad[a0 + e]
                + w01 * pad[a0 + e + one]
                + w02 * pad[a0 + e + two]
                + w10 * pad[a1 + e]
                + w11 * pad[a1 + e + one]
                + w12 * pad[a1 + e + two]
                + w20 * pad[a2 + e]
                + w21 * pad[a2 + e + one]
                + w22 * pad[a2 + e + two]
            )
        if add:
            for q in range(width):
                of[d + q] += line[two * q]
        else:
            for q in range(width):
                of[d + q] = line[two * q]


@njit(nogil=True, cache=True)
def by_stride2_rows(x, w3, kh, kw, sw, dw):
    """Whether a depthwise convolution that neither runs in blocks of channels
    (:func:`by_channel_blocks`) nor plane by plane (:func:`plane_by_plane`) runs as
    :func:`_stride2_range`: float32, 3x3, one input channel per group, a column stride of
    2 and no column dilation (MobileNet's downsampling layers with wide rows)."""
    cg = w3.shape[2] // (kh * kw)
    return taps_ir.is_float32(x) and kh == 3 and kw == 3 and cg == 1 and sw == 2 and dw == 1


#: Output rows :func:`_stride2_range` computes from one copy of their input rows: the
#: band's padded rows (17 at stride 2) stay in L1 between the copy and the taps, where a
#: whole padded plane (51 KB for MobileNetV2's 112x112 inputs) went out to L2 in between.
STRIDE2_BAND_ROWS = 8


@njit(nogil=True, cache=True)
def _stride2_row_length(out_w):
    """Elements between two padded rows of :func:`_stride2_range`'s workspace: the
    ``2 * out_w + 1`` columns the taps read, with room for what a row's loads read past
    them, rounded up to whole vectors so that every row starts on a vector boundary."""
    lanes = taps_ir.LANES
    return (2 * out_w + 1 + taps_ir.STRIDE2_SLACK + lanes - 1) // lanes * lanes


@njit(nogil=True, cache=True)
def stride2_workspace_size(sh, dh, out_h, out_w):
    """Elements of the workspace :func:`_stride2_range` needs: the padded input rows of
    one band of output rows, the slack its last row's loads read past, and a vector's
    worth to start the rows on a vector boundary."""
    rows = (min(STRIDE2_BAND_ROWS, out_h) - 1) * sh + 2 * dh + 1
    lanes = taps_ir.LANES
    return rows * _stride2_row_length(out_w) + taps_ir.STRIDE2_SLACK + lanes


@njit(nogil=True, cache=True)
def _stride2_range(x, w3, out3, n, first, last, sh, pt, pl, dh, out_h, out_w, pad, post):
    """The output channels of input channels ``first:last`` of image ``n`` of a float32
    depthwise 3x3 convolution with a column stride of 2 (:func:`by_stride2_rows`); any
    row stride and dilation, padding and channel multiplier.

    Each band of :data:`STRIDE2_BAND_ROWS` output rows of a channel copies the padded
    input rows it reads into ``pad`` (:func:`stride2_workspace_size` elements, zero
    wherever no call wrote; the rows start on vector boundaries, so half the taps' loads
    are aligned), then sums each output row by
    :func:`vm.kernels.runtime.taps.stride2_taps3x3`, which splits the rows by column
    phase in registers; a row's last partial block is computed as a whole block ending at
    the row's end, over outputs already computed (through a line of scratch when the row
    is narrower than a block). The epilogue at ``post`` (or none, 0) is applied to each
    output plane while it is in cache. On an AMD EPYC (Zen 4), one thread, through the
    VM, 96 channels 112 -> 56: 307 us with each channel's whole plane copied at once, 286
    in bands. Against :func:`_taps3x3_stride2` (every column summed, every other kept), 2 threads:
    96 channels 112 -> 56 247 -> 163 us, 144 channels 56 -> 28 103 -> 72 us. Shared
    between threads by channels: by bands of rows, as the plane loops share big planes,
    measured no faster here.
    """
    og = w3.shape[1]
    out_channels = out3.shape[1]
    _, channels, height, width = x.shape
    xf = x.reshape(x.size)
    lanes = taps_ir.LANES
    row_length = _stride2_row_length(out_w)
    # Interior columns a padded row holds: the rest of it stays zero.
    span = max(0, min(width, 2 * out_w + 1 - pl))
    blocks = out_w // lanes
    rest = out_w - blocks * lanes
    line = np.empty(lanes, np.float32)
    of = out3.reshape(out3.size)
    # The first element of pad on a vector boundary (numpy aligns floats to 4 bytes).
    start = (-(pad.ctypes.data // 4)) % lanes
    pad_at, w_at = pad.ctypes.data + start * 4, w3.ctypes.data
    of_at, line_at = of.ctypes.data, line.ctypes.data
    plane = out_h * out_w
    step = dh * row_length
    for c in range(first, last):
        source = (n * channels + c) * height
        for r0 in range(0, out_h, STRIDE2_BAND_ROWS):
            r1 = min(out_h, r0 + STRIDE2_BAND_ROWS)
            # Padded rows p0:p1 of channel c, as rows 0, 1, ... of pad.
            p0 = r0 * sh
            for pr in range(p0, (r1 - 1) * sh + 2 * dh + 1):
                ih = pr - pt
                d0 = _u(start + (pr - p0) * row_length + pl)
                if ih < 0 or ih >= height:
                    for k in range(_u(span)):
                        pad[d0 + k] = 0.0
                else:
                    s0 = _u((source + ih) * width)
                    for k in range(_u(span)):
                        pad[d0 + k] = xf[s0 + k]
            for m in range(og):
                o = c * og + m
                weights = w_at + o * 9 * 4
                ob = (n * out_channels + o) * plane
                for r in range(r0, r1):
                    at = (r - r0) * sh * row_length
                    d = ob + r * out_w
                    taps_ir.stride2_taps3x3(pad_at, at, step, of_at + d * 4, blocks, weights)
                    if rest and blocks:
                        end = out_w - lanes
                        taps_ir.stride2_taps3x3(pad_at, at + 2 * end, step, of_at + (d + end) * 4,
                                                1, weights)  # fmt: skip
                    elif rest:
                        taps_ir.stride2_taps3x3(pad_at, at, step, line_at, 1, weights)
                        for q in range(rest):
                            of[d + q] = line[q]
        for m in range(og):
            ob = (n * out_channels + c * og + m) * plane
            # A view C-contiguous by its type: out3[n, o : o + 1] would do, but a slice
            # typed as any layout would leave apply_post's loops scalar.
            view = carray(products.floats(of_at + ob * 4), (1, plane))
            packed.apply_post(view, post, c * og + m)


#: Strided depthwise convolutions run plane by plane (:func:`_plane_range`) when their
#: output rows are narrower than this; wider ones keep row loops (:func:`group_image`),
#: which read the input in order where the plane loops scatter it into phases. One
#: thread, stride 2: 576 channels 14 -> 7 157 -> 64 us, 192 channels 28 -> 14 88 -> 71,
#: 5x5 of 672 channels 14 -> 7 239 -> 158; from 56 -> 28 the row loops win (184 vs 215).
PLANE_MAX_STRIDED_WIDTH = 16

#: Depthwise convolutions run plane by plane are shared between threads by bands of
#: output rows (every channel's) from this many output pixels a plane, by channels below.
#: The pointwise convolutions around them share their work by pixels, so each thread then
#: reads the band of every channel it wrote itself, where by channels half of what it read
#: was in the other core's cache.
ROWS_MIN_PLANE = 96 * 96


@njit(nogil=True, cache=True)
def plane_geometry(kh, kw, s, out_h, out_w):
    """Rows and row length of each of the ``s * s`` phase planes of :func:`_plane_range`.
    At stride 1 the rows are a whole number of vectors long: the row loops
    (:func:`vm.kernels.runtime.taps.plane_rows`) compute whole vectors of columns."""
    row_len = out_w + (kw - 1) // s
    if s == 1:
        row_len = -(-row_len // taps_ir.LANES) * taps_ir.LANES
    return out_h + (kh - 1) // s, row_len


@njit(nogil=True, cache=True)
def plane_workspace_size(kh, kw, s, out_h, out_w):
    """Elements of the workspace :func:`_plane_range` needs: the ``s * s`` phase planes of
    one padded input channel, one output plane as wide as their rows, and a last element
    that input the taps never read is copied to."""
    rows, row_len = plane_geometry(kh, kw, s, out_h, out_w)
    return s * s * rows * row_len + out_h * row_len + 1 + taps_ir.BLOCK


@njit(nogil=True, cache=True, error_model="numpy")  # see packed.gelu
def _plane_range(x, w3, out3, n, first, last, kh, kw, s, pt, pl, out_h, out_w, pad, post, r0, r1):
    """Input channels ``first:last`` of image ``n`` of a depthwise convolution with stride
    ``s`` along both axes and no dilation (any kernel size, padding and channel
    multiplier), each plane one loop.

    Each channel is copied into a zero-bordered plane split by phase (stride 1: one plane;
    stride 2: four, phase ``(p, q)`` holding the padded rows ``p, p + 2, ...`` and columns
    ``q, q + 2, ...``). Every tap then reads its phase at a fixed offset from the output
    element, so the taps run along the whole flattened plane at once: the columns past each
    output row are computed and dropped, and the rows copied out. On MobileNet's 14x14 and
    7x7 stages this loop fills the vector registers that a 14- or 7-wide row leaves idle,
    and needs neither the channels-last copies nor a per-group setup (benchmarks/NOTES.md).
    At stride 1 the float32 3x3, 5x5 and 7x7 kernels go by blocks of rows instead
    (:func:`vm.kernels.runtime.taps.plane_rows`): ConvNeXt's 7x7 layers and MobileNet's wide
    3x3 ones, where the plane loop waited on its loads. ``pad`` has
    :func:`plane_workspace_size` elements, zero wherever no call wrote. ``post``: the
    address of an epilogue applied as the rows are copied out
    (:func:`vm.kernels.runtime.packed.post_epilogue`), or 0. Only output rows ``r0:r1`` are
    computed, from the input rows they read: a chunk of rows of every channel
    (:func:`_rows_chunk`) copies and computes its own band of each plane.
    """
    _, channels, height, width = x.shape
    og = w3.shape[1]
    taps = kh * kw
    rows, row_len = plane_geometry(kh, kw, s, out_h, out_w)
    phase = rows * row_len
    line = _u(s * s * phase)
    if r0 >= r1:
        return
    # The band of the flattened plane that output rows r0:r1 take, columns past each row
    # included.
    band = r0 * row_len
    count = _u((r1 - 1 - r0) * row_len + out_w)
    out_at = line + _u(band)
    xf = x.reshape(x.size)
    wf = w3.reshape(w3.size)
    of = out3.reshape(out3.size)
    out_channels = out3.shape[1]
    plane = out_h * out_w
    # Where each tap reads, relative to the output element.
    offsets = np.empty(taps, np.uint64)
    for i in range(kh):
        for j in range(kw):
            offsets[i * kw + j] = ((i % s) * s + j % s) * phase + (i // s) * row_len + j // s + band
    # Where each input element goes: with stride 1 a row is one run (copied as such);
    # with a stride, each element's phase position, or the last element of the workspace
    # for one no tap reads.
    # Only the input rows that output rows r0:r1 read: padded rows r0 * s to
    # (r1 + (kh - 1) // s) * s (their phase rows r0 to r1 - 1 + (kh - 1) // s).
    i0 = max(0, -pt, r0 * s - pt)
    i1 = min(height, s * rows - pt, (r1 + (kh - 1) // s) * s - pt)
    j0, j1 = max(0, -pl), min(width, s * row_len - pl)
    span = _u(max(0, j1 - j0))
    spot = np.empty(height * width if s > 1 else 0, np.uint64)
    if s > 1:
        unused = _u(pad.size - 1)
        for ih in range(height):
            for iw in range(width):
                pr, pc = ih + pt, iw + pl
                inside = 0 <= pr < s * rows and 0 <= pc < s * row_len
                spot[ih * width + iw] = (
                    ((pr % s) * s + pc % s) * phase + (pr // s) * row_len + pc // s
                    if inside
                    else unused
                )
    k0, k1 = _u(i0 * width), _u(max(i0, i1) * width)
    for c in range(first, last):
        src = (n * channels + c) * height * width
        if s == 1:
            for ih in range(i0, i1):
                d = _u((ih + pt) * row_len + j0 + pl)
                at = _u(src + ih * width + j0)
                for k in range(span):
                    pad[d + k] = xf[at + k]
        else:
            at = _u(src) + k0
            for k in range(k1 - k0):
                pad[spot[k0 + k]] = xf[at + k]
        for m in range(og):
            o = c * og + m
            wb = o * taps
            if s == 1 and kh == kw and kh in taps_ir.ROW_KERNELS and taps_ir.is_float32(pad):
                taps_ir.plane_rows(pad.ctypes.data, out_at, band, row_len, r1 - r0, out_w,
                                   wf.ctypes.data + wb * 4, kh)  # fmt: skip
            elif kh == 3 and kw == 3:
                a0, a1, a2 = offsets[0], offsets[1], offsets[2]
                a3, a4, a5 = offsets[3], offsets[4], offsets[5]
                a6, a7, a8 = offsets[6], offsets[7], offsets[8]
                w00, w01, w02 = wf[wb], wf[wb + 1], wf[wb + 2]
                w10, w11, w12 = wf[wb + 3], wf[wb + 4], wf[wb + 5]
                w20, w21, w22 = wf[wb + 6], wf[wb + 7], wf[wb + 8]
                for e in range(count):
                    pad[out_at + e] = (
                        w00 * pad[a0 + e]
                        + w01 * pad[a1 + e]
                        + w02 * pad[a2 + e]
                        + w10 * pad[a3 + e]
                        + w11 * pad[a4 + e]
                        + w12 * pad[a5 + e]
                        + w20 * pad[a6 + e]
                        + w21 * pad[a7 + e]
                        + w22 * pad[a8 + e]
                    )
            elif taps_ir.is_float32(pad):
                taps_ir.plane_taps(pad.ctypes.data, out_at, count, offsets.ctypes.data,
                                   wf.ctypes.data + wb * 4, taps)  # fmt: skip
            else:
                for e in range(count):
                    pad[out_at + e] = 0
                for i in range(kh):
                    t = i * kw
                    wi = wb + t
                    if kw == 5:
                        a0, a1, a2 = offsets[t], offsets[t + 1], offsets[t + 2]
                        a3, a4 = offsets[t + 3], offsets[t + 4]
                        v0, v1, v2, v3, v4 = wf[wi], wf[wi + 1], wf[wi + 2], wf[wi + 3], wf[wi + 4]
                        for e in range(count):
                            pad[out_at + e] += (
                                v0 * pad[a0 + e]
                                + v1 * pad[a1 + e]
                                + v2 * pad[a2 + e]
                                + v3 * pad[a3 + e]
                                + v4 * pad[a4 + e]
                            )
                    else:
                        for j in range(kw):
                            v = wf[wi + j]
                            a = offsets[t + j]
                            for e in range(count):
                                pad[out_at + e] += v * pad[a + e]
            ob = (n * out_channels + o) * plane
            plain = post == 0
            if not plain:
                bias = packed.load(post, packed.POST_HEADER + o)
                lo, hi, activation, residual, delta = packed.post_fields(post)
                if activation == packed.SWISH and not residual:
                    # The whole plane in one loop, the columns past each row too: along
                    # rows 7 or 14 wide (EfficientNet's last stages) a loop is mostly
                    # its scalar remainder, and there that is an exponential per element.
                    for e in range(count):
                        v = np.float32(pad[out_at + e] + bias)
                        pad[out_at + e] = vx.swish_f32(v)
                    plain = True
            if plain:
                for r in range(r0, r1):
                    d = _u(ob + r * out_w)
                    e0 = line + _u(r * row_len)
                    for q in range(_u(out_w)):
                        of[d + q] = pad[e0 + q]
                continue
            # The fused chain's bias, residual and clamp, on the copy out: no pass over the
            # output after the convolution (apply_post's loops, reading pad).
            relu = activation == packed.RELU
            at = np.int64(of.ctypes.data) + delta
            for r in range(r0, r1):
                d = _u(ob + r * out_w)
                e0 = line + _u(r * row_len)
                # One loop per case: a branch per element kept them scalar.
                if activation == packed.SWISH:
                    for q in range(_u(out_w)):
                        v = np.float32(np.float32(pad[e0 + q] + bias) + packed.load(at, d + q))
                        of[d + q] = vx.swish_f32(v)
                elif residual:
                    for q in range(_u(out_w)):
                        v = np.float32(np.float32(pad[e0 + q] + bias) + packed.load(at, d + q))
                        of[d + q] = packed.clamp(v, lo, hi, relu)
                else:
                    for q in range(_u(out_w)):
                        of[d + q] = packed.clamp(np.float32(pad[e0 + q] + bias), lo, hi, relu)


@njit(nogil=True, cache=True)
def _channels_last_range(x, w3, out3, n, first, last, kh, kw, sh, sw, pt, pl, dh, dw, out_h,
                         out_w):  # fmt: skip
    """Input channels ``first:last`` of image ``n`` of a depthwise convolution, vectorized
    across their output channels (see :func:`image_channels_last`).

    The channels are copied into a zero-bordered channels-last workspace of their own, the
    taps summed across the channel run, and the result written back to NCHW, so ranges
    run independently on any thread.
    """
    _, channels, height, width = x.shape
    _, og, _ = w3.shape
    lanes = _u((last - first) * og)
    rows = (out_h - 1) * sh + (kh - 1) * dh + 1
    cols = (out_w - 1) * sw + (kw - 1) * dw + 1
    xf = x.reshape(x.size)
    wf = w3.reshape(w3.size)
    of = out3.reshape(out3.size)
    pad = np.zeros(rows * cols * (last - first) * og, x.dtype)
    w0, w1 = max(0, -pl), min(width, cols - pl)
    for c in range(first, last):
        lane = _u((c - first) * og)
        for ih in range(max(0, -pt), min(height, rows - pt)):
            src = ((n * channels + c) * height + ih) * width
            for iw in range(w0, w1):
                d = _u((ih + pt) * cols + iw + pl) * lanes + lane
                v = xf[_u(src + iw)]
                for m in range(_u(og)):
                    pad[d + m] = v
    taps = kh * kw
    # The weights tap-major, so each tap's channel run is contiguous.
    wt = np.empty(taps * (last - first) * og, wf.dtype)
    for k in range(lanes):
        o = first * og + k
        for t in range(taps):
            wt[_u(t) * lanes + k] = wf[o * taps + t]
    plane = out_h * out_w
    acc = np.empty(plane * (last - first) * og, x.dtype)
    if kh == 3 and kw == 3:
        # All nine taps per element at once, in registers: one store per output.
        t1, t2, t3, t4 = lanes, _u(2) * lanes, _u(3) * lanes, _u(4) * lanes
        t5, t6, t7, t8 = _u(5) * lanes, _u(6) * lanes, _u(7) * lanes, _u(8) * lanes
        c1, c2 = _u(dw) * lanes, _u(2 * dw) * lanes
        r1, r2 = _u(dh * cols) * lanes, _u(2 * dh * cols) * lanes
        for r in range(out_h):
            for q in range(out_w):
                a = _u(r * out_w + q) * lanes
                s0 = _u((r * sh) * cols + q * sw) * lanes
                s3, s6 = s0 + r1, s0 + r2
                for o in range(lanes):
                    acc[a + o] = (
                        wt[o] * pad[s0 + o]
                        + wt[t1 + o] * pad[s0 + c1 + o]
                        + wt[t2 + o] * pad[s0 + c2 + o]
                        + wt[t3 + o] * pad[s3 + o]
                        + wt[t4 + o] * pad[s3 + c1 + o]
                        + wt[t5 + o] * pad[s3 + c2 + o]
                        + wt[t6 + o] * pad[s6 + o]
                        + wt[t7 + o] * pad[s6 + c1 + o]
                        + wt[t8 + o] * pad[s6 + c2 + o]
                    )
    else:
        for r in range(out_h):
            for q in range(out_w):
                a = _u(r * out_w + q) * lanes
                for o in range(lanes):
                    acc[a + o] = 0
                for i in range(kh):
                    for j in range(kw):
                        s_ = _u((r * sh + i * dh) * cols + q * sw + j * dw) * lanes
                        t = _u(i * kw + j) * lanes
                        for o in range(lanes):
                            acc[a + o] += wt[t + o] * pad[s_ + o]
    oc = out3.shape[1]
    for k in range(lanes):
        d = _u((n * oc + first * og) * plane) + k * _u(plane)
        for p in range(_u(plane)):
            of[d + p] = acc[p * lanes + k]


@njit(nogil=True)
def _share(kind, extent, x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, post):
    """Offer image ``n`` to the polling workers as ``extent`` items of a job of ``kind``
    (:func:`vm.kernels.runtime.jobs.share`); False, doing nothing, when the
    image is too small to pay for it, the data is not float32 in C order (what the
    callbacks read), or no worker takes it."""
    groups, og, k = w3.shape
    work = groups * og * k * out_h * out_w
    if (
        work < SPLIT_WORK
        or extent < 2
        or x.itemsize != 4
        or not (x.flags.c_contiguous and w3.flags.c_contiguous and out3.flags.c_contiguous)
    ):
        return False
    words = _words(x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, post)
    return jobs.share(kind, extent, np.array(words), work)


@njit(nogil=True)
def _words(x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, post):
    """Image ``n`` of a float32 convolution of C-contiguous arrays as :data:`WORDS` int64
    words: the arrays' addresses and shapes, the geometry, then the epilogue's address
    (see :func:`_unpack`)."""
    i64 = np.int64
    return (i64(x.ctypes.data), i64(x.shape[0]), i64(x.shape[1]), i64(x.shape[2]),
            i64(x.shape[3]), i64(w3.ctypes.data), i64(w3.shape[0]), i64(w3.shape[1]),
            i64(w3.shape[2]), i64(out3.ctypes.data), i64(out3.shape[1]), i64(out3.shape[2]),
            i64(kh), i64(kw), i64(sh), i64(sw), i64(pt), i64(pl), i64(dh), i64(dw), i64(out_h),
            i64(out_w), i64(n), i64(post))  # fmt: skip


#: How many words :func:`_words` gives.
WORDS = 24


@njit(nogil=True)
def _unpack(word, source):
    """The arrays and geometry of :func:`_words`, word ``i`` read as ``word(source, i)``."""
    x = carray(products.floats(word(source, 0)),
               (word(source, 1), word(source, 2), word(source, 3), word(source, 4)))  # fmt: skip
    w3 = carray(products.floats(word(source, 5)),
                (word(source, 6), word(source, 7), word(source, 8)))  # fmt: skip
    out3 = carray(products.floats(word(source, 9)),
                  (x.shape[0], word(source, 10), word(source, 11)))  # fmt: skip
    geometry = (word(source, 12), word(source, 13), word(source, 14), word(source, 15),
                word(source, 16), word(source, 17), word(source, 18), word(source, 19),
                word(source, 20), word(source, 21))  # fmt: skip
    return (x, w3, out3) + geometry + (word(source, 22), word(source, 23))


@njit(nogil=True)
def _job(slot):
    """The arrays and geometry :func:`_share` put in the slot, for a chunk callback."""
    return _unpack(jobs.argument, slot)


@njit(nogil=True)
def _block_word(block, i):
    return block[i]


@njit(nogil=True)
def entry_arguments(address):
    """The arrays and geometry that :func:`entry_block` put in the block at ``address``, in
    the order of its parameters."""
    return _unpack(_block_word, carray(products.int64s(address), (WORDS,)))


@njit(nogil=True)
def image_channels_last(x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, post=0):
    """Image ``n`` of a depthwise convolution (one input channel per group, any channel
    multiplier), vectorized across channels; split between threads by channels when the
    image is big enough and the data float32.

    Small output planes leave too short a row for the per-group loops to fill a vector
    register, so runs of channels are copied into zero-bordered channels-last workspaces
    and the innermost loop runs over the channels instead; the result is written back to
    NCHW. Output channel ``o`` reads input channel ``o // multiplier``.

    Parameters
    ----------
    x, w3, out3 : ndarray
        As for :func:`group_image`, with one input channel per group.
    kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w : int
        As for :func:`group_image`.
    n : int
        Image.
    post : int
        The address of an epilogue to apply (:func:`vm.kernels.runtime.packed.post_epilogue`),
        or 0.
    """
    channels = x.shape[1]
    # Chunks of at least 16 channels, so each keeps a vector register's width.
    runs = max(channels // 16, 1)
    if _share(jobs.DEPTHWISE_CHANNELS, runs, x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h,
              out_w, n, post):  # fmt: skip
        return
    _channels_last_range(x, w3, out3, n, 0, channels, kh, kw, sh, sw, pt, pl, dh, dw, out_h,
                         out_w)  # fmt: skip
    packed.apply_post(out3[n], post)


@njit(nogil=True)
def image_groups(x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, post=0):
    """Every group of image ``n`` (:func:`group_image`), split between threads by groups
    when the image is big enough and the data float32.

    Parameters
    ----------
    x, w3, out3 : ndarray
        As for :func:`group_image`.
    kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w : int
        As for :func:`group_image`.
    n : int
        Image.
    post : int
        The address of an epilogue to apply as each group's output is written
        (:func:`vm.kernels.runtime.packed.post_epilogue`), or 0.
    """
    groups, _, k = w3.shape
    if plane_by_plane(k // (kh * kw), sh, sw, dh, dw, out_w) and out_h * out_w >= ROWS_MIN_PLANE:
        kind, extent = jobs.DEPTHWISE_ROWS, out_h
    else:
        kind, extent = jobs.DEPTHWISE_GROUPS, groups
    if _share(kind, extent, x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, post):
        return
    _groups_range(x, w3, out3, n, 0, groups, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, post)


@njit(nogil=True, cache=True)
def plane_by_plane(cg, sh, sw, dh, dw, out_w):
    """Whether :func:`_groups_range` runs a grouped convolution by :func:`_plane_range`."""
    if cg != 1 or dh != 1 or dw != 1 or sh != sw:
        return False
    return sh == 1 or out_w < PLANE_MAX_STRIDED_WIDTH


#: Depthwise float32 convolutions with output planes of at most this many pixels run in
#: blocks of 16 channels, channels last (:func:`_channel_blocks`); strided ones with
#: kernels wider than 3x3 up to :data:`STRIDED_CHANNEL_BLOCK_MAX_PLANE`. On an
#: Intel Xeon, Emerald Rapids, 2 threads, against the plane loops: 960 channels at 7x7
#: 55 -> 31 us, 384 at 14x14 50 -> 39, 576 14 -> 7 51 -> 28, 5x5 72 channels 56 -> 28 166
#: -> 103; at 28x28 the plane loops win (3x3 64 against 73 us, 5x5 121-145 against
#: 142-157, 7x7 even), and the rows of group_image at 3x3 56 -> 28 (101 against 111).
CHANNEL_BLOCK_MAX_PLANE = 14 * 14
STRIDED_CHANNEL_BLOCK_MAX_PLANE = 28 * 28
#: Channels a block holds: one vector register's float32 lanes.
BLOCK_CHANNELS = taps_ir.LANES


@njit(nogil=True, cache=True)
def by_channel_blocks(x, w3, kh, kw, sh, sw, dh, dw, out_h, out_w):
    """Whether a depthwise convolution runs its channels in blocks
    (:func:`_channel_blocks`): float32, one output channel per input channel, one stride
    for both axes, no dilation, a small output plane and at least one block of
    channels."""
    if not taps_ir.is_float32(x) or sh != sw or dh != 1 or dw != 1:
        return False
    plane = out_h * out_w
    small = plane <= CHANNEL_BLOCK_MAX_PLANE or (
        sh > 1 and kh * kw > 9 and plane <= STRIDED_CHANNEL_BLOCK_MAX_PLANE
    )
    return small and w3.shape[1] == 1 and x.shape[1] >= BLOCK_CHANNELS


@njit(nogil=True, cache=True, error_model="numpy")  # see packed.gelu
def _channel_blocks(x, w3, out3, n, first, last, kh, kw, s, pt, pl, out_h, out_w, post):
    """Channels ``first:last`` (a multiple of :data:`BLOCK_CHANNELS`) of image ``n`` of a
    float32 depthwise convolution with stride ``s`` along both axes and no dilation, a
    block of channels at a time, channels last.

    The block's input planes are transposed (:mod:`vm.kernels.runtime.transpose`) into a
    zero-bordered workspace whose pixels are vectors of the block's channels; every tap
    of an output pixel is then one multiply-add of such vectors
    (:func:`vm.kernels.runtime.taps.channel_taps`), with no lane wasted on a plane's
    border or a short row; the result is transposed back to NCHW and the epilogue at
    ``post`` (or 0) applied. Plane by plane, a 7x7 plane summed 61 positions for its 49
    outputs, mostly in the loop's scalar remainder.
    """
    _, channels, height, width = x.shape
    lanes = BLOCK_CHANNELS
    taps = kh * kw
    rows, cols = (out_h - 1) * s + kh, (out_w - 1) * s + kw
    plane, plane_in = out_h * out_w, height * width
    count = -(-plane // taps_ir.PIXELS) * taps_ir.PIXELS
    pad = np.zeros(rows * cols * lanes, np.float32)
    turned = np.empty(plane_in * lanes, np.float32)
    sums = np.empty(count * lanes, np.float32)
    bases = np.zeros(count, np.int64)
    for r in range(out_h):
        for q in range(out_w):
            bases[r * out_w + q] = r * s * cols + q * s
    offsets = np.empty(taps, np.int64)
    for i in range(kh):
        for j in range(kw):
            offsets[i * kw + j] = i * cols + j
    weights = np.empty(taps * lanes, np.float32)
    wf = w3.reshape(w3.size)
    i0, i1 = max(0, -pt), min(height, rows - pt)
    j0, j1 = max(0, -pl), min(width, cols - pl)
    span = _u(max(0, j1 - j0) * lanes)
    tiles_in = transpose.tile_count(1, lanes, plane_in)
    tiles_out = transpose.tile_count(1, plane, lanes)
    x_at, out_at = np.int64(x.ctypes.data), np.int64(out3.ctypes.data)
    # The transposes' arguments as int64 (no literals), as their other callers pass them:
    # numba compiles a callee once per set of argument types.
    i = np.int64
    for c0 in range(first, last, lanes):
        source = x_at + (n * channels + c0) * plane_in * 4
        transpose.tiles_range(source, i(turned.ctypes.data), i(1), lanes, plane_in, i(0), tiles_in,
                              i(0))  # fmt: skip
        for ih in range(i0, i1):
            d = _u(((ih + pt) * cols + j0 + pl) * lanes)
            at = _u((ih * width + j0) * lanes)
            for k in range(span):
                pad[d + k] = turned[at + k]
        for t in range(taps):
            for lane in range(lanes):
                weights[t * lanes + lane] = wf[(c0 + lane) * taps + t]
        taps_ir.channel_taps(pad.ctypes.data, bases.ctypes.data, plane, sums.ctypes.data,
                             offsets.ctypes.data, weights.ctypes.data, taps)  # fmt: skip
        target = out_at + (n * out3.shape[1] + c0) * plane * 4
        transpose.tiles_range(i(sums.ctypes.data), target, i(1), plane, lanes, i(0), tiles_out,
                              i(0))  # fmt: skip
        packed.apply_post(out3[n, c0 : c0 + lanes], post, c0)


@njit(nogil=True)
def _groups_range(x, w3, out3, n, lo, hi, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, post):
    """Groups ``lo:hi`` of image ``n`` (:func:`image_groups`), with a workspace of their
    own: small float32 depthwise planes in blocks of channels (:func:`_channel_blocks`,
    see :func:`by_channel_blocks`), the channels left over as the rest; depthwise without
    dilation plane by plane (:func:`_plane_range`) at stride 1, or with equal strides and
    rows narrower than :data:`PLANE_MAX_STRIDED_WIDTH`; float32 depthwise 3x3 with a
    column stride of 2 by rows (:func:`_stride2_range`); any other by :func:`group_image`.
    The epilogue at ``post`` (or none, 0) is applied to each group's output while it is
    in cache."""
    k = w3.shape[2]
    cg = k // (kh * kw)
    if cg == 1 and by_channel_blocks(x, w3, kh, kw, sh, sw, dh, dw, out_h, out_w):
        blocked = lo + (hi - lo) // BLOCK_CHANNELS * BLOCK_CHANNELS
        _channel_blocks(x, w3, out3, n, lo, blocked, kh, kw, sh, pt, pl, out_h, out_w, post)
        lo = blocked
        if lo == hi:
            return
    if plane_by_plane(cg, sh, sw, dh, dw, out_w):
        pad = np.zeros(plane_workspace_size(kh, kw, sh, out_h, out_w), x.dtype)
        _plane_range(x, w3, out3, n, lo, hi, kh, kw, sh, pt, pl, out_h, out_w, pad, post, 0,
                     out_h)  # fmt: skip
        return
    if by_stride2_rows(x, w3, kh, kw, sw, dw):
        pad = np.zeros(stride2_workspace_size(sh, dh, out_h, out_w), x.dtype)
        _stride2_range(x, w3, out3, n, lo, hi, sh, pt, pl, dh, out_h, out_w, pad, post)
        return
    pad = np.zeros(workspace_size(cg, kh, kw, sh, sw, dh, dw, out_h, out_w), x.dtype)
    shifts = tap_shifts(kw, sw, dw, out_w)
    og = w3.shape[1]
    for g in range(lo, hi):
        group_image(x, w3, out3, pad, shifts, n, g, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w)
        packed.apply_post(out3[n, g * og : (g + 1) * og], post, g * og)


@jobs.chunk(jobs.DEPTHWISE_GROUPS)
def _groups_chunk(slot, index, parts):
    """Groups ``index`` of ``parts`` of the float32 image that :func:`image_groups` shares
    through :func:`vm.kernels.runtime.jobs.share`; each chunk has its own workspace."""
    x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, post = _job(slot)
    groups = w3.shape[0]
    # Cut between blocks of channels where they run so, the last chunk taking the rest.
    blocks = by_channel_blocks(x, w3, kh, kw, sh, sw, dh, dw, out_h, out_w)
    unit = BLOCK_CHANNELS if blocks and x.shape[1] == groups else 1
    units = groups // unit
    lo = units * index // parts * unit
    hi = groups if index == parts - 1 else units * (index + 1) // parts * unit
    _groups_range(x, w3, out3, n, lo, hi, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, post)


@jobs.chunk(jobs.DEPTHWISE_ROWS)
def _rows_chunk(slot, index, parts):
    """Output rows ``index`` of ``parts`` of every channel of the float32 image that
    :func:`image_groups` shares (a depthwise convolution :func:`_plane_range` runs); each
    chunk has its own workspace."""
    # Plane by plane: one stride for both axes, no dilation.
    x, w3, out3, kh, kw, sh, _, pt, pl, _, _, out_h, out_w, n, post = _job(slot)
    r0, r1 = out_h * index // parts, out_h * (index + 1) // parts
    pad = np.zeros(plane_workspace_size(kh, kw, sh, out_h, out_w), x.dtype)
    _plane_range(x, w3, out3, n, 0, w3.shape[0], kh, kw, sh, pt, pl, out_h, out_w, pad, post, r0,
                 r1)  # fmt: skip


@jobs.chunk(jobs.DEPTHWISE_CHANNELS)
def _channels_chunk(slot, index, parts):
    """Channels ``index`` of ``parts`` of the float32 image that
    :func:`image_channels_last` shares (in runs of 16, the last run taking the rest)."""
    x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, post = _job(slot)
    runs = max(x.shape[1] // 16, 1)
    first = x.shape[1] * (runs * index // parts) // runs
    last = x.shape[1] * (runs * (index + 1) // parts) // runs
    if first < last:
        _channels_last_range(x, w3, out3, n, first, last, kh, kw, sh, sw, pt, pl, dh, dw, out_h,
                             out_w)  # fmt: skip
        og = w3.shape[1]
        packed.apply_post(out3[n, first * og : last * og], post, first * og)


# --- float32 entry points compiled once, called by kernels under fixed symbols ------------------
#
# numba compiles a kernel's module with the code of every function it calls linked in and
# optimised again: each depthwise kernel spent several seconds compiling image_groups and
# its loops. float32 kernels call these C entry points by symbol instead, compiled (or
# loaded from numba's cache) once per process when a kernel calling them is loaded.
_ENTRY = types.int64(types.int64)


@callbacks.entry(symbols.DEPTHWISE_GROUPS, _ENTRY)
def _groups_entry(address):
    """:func:`image_groups` on the block of :func:`image_groups_f32`."""
    image_groups(*entry_arguments(address))
    return 1


@callbacks.entry(symbols.DEPTHWISE_CHANNELS, _ENTRY)
def _channels_entry(address):
    """:func:`image_channels_last` on the block of :func:`image_channels_last_f32`."""
    image_channels_last(*entry_arguments(address))
    return 1


_groups_symbol = types.ExternalFunction(symbols.DEPTHWISE_GROUPS, _ENTRY)
_channels_symbol = types.ExternalFunction(symbols.DEPTHWISE_CHANNELS, _ENTRY)


@njit(nogil=True)
def entry_block(x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, post):
    """The words of :func:`_words` in an array, for the entry point of a float32
    convolution by a ``(groups, og, k)`` weight (these and
    :func:`vm.kernels.runtime.convolution.grouped_f32`); the arrays C-contiguous, ``post``
    an epilogue array (:func:`vm.kernels.runtime.packed.post_epilogue`) or empty. The
    entry point reads them back with :func:`entry_arguments`. Returns the block and the
    ``(x, w3)`` it names, copies where they were not contiguous: the caller keeps both
    alive until the entry point returns (:func:`vm.kernels.runtime.callbacks.alive`)."""
    x, w3 = np.ascontiguousarray(x), np.ascontiguousarray(w3)
    if not out3.flags.c_contiguous:
        raise ValueError("convolution entry point: the output must be C-contiguous")
    address = packed.post_address(post)
    words = _words(x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, address)
    block = np.empty(WORDS, np.int64)
    for i in range(WORDS):
        block[i] = words[i]
    return block, (x, w3)


@njit(nogil=True)
def image_groups_f32(x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, post):
    """:func:`image_groups` for float32 arrays, through its entry point; ``post`` is the
    epilogue to apply (:func:`vm.kernels.runtime.packed.post_epilogue`) or an empty array
    (an argument, so that it lives until the convolution is done)."""
    block, named = entry_block(x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, post)
    _groups_symbol(block.ctypes.data)
    callbacks.alive(block, named)


@njit(nogil=True)
def image_channels_last_f32(x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, post):
    """:func:`image_channels_last` for float32 arrays, through its entry point (``post`` as
    for :func:`image_groups_f32`)."""
    block, named = entry_block(x, w3, out3, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, n, post)
    _channels_symbol(block.ctypes.data)
    callbacks.alive(block, named)


#: What each entry point generated kernels call needs before such a kernel is compiled or
#: loaded (:mod:`vm.kernels.library` prepares it): the kind of job it shares and the C
#: entry point it calls.
NEEDS = {
    "image_groups": jobs.Needs(kinds=(jobs.DEPTHWISE_GROUPS, jobs.DEPTHWISE_ROWS)),
    "image_channels_last": jobs.Needs(kinds=(jobs.DEPTHWISE_CHANNELS,)),
    "image_groups_f32": jobs.Needs(
        (jobs.DEPTHWISE_GROUPS, jobs.DEPTHWISE_ROWS), (symbols.DEPTHWISE_GROUPS,)
    ),
    "image_channels_last_f32": jobs.Needs(
        (jobs.DEPTHWISE_CHANNELS,), (symbols.DEPTHWISE_CHANNELS,)
    ),
}
